# Four threads each build dicts and strings from their share of the data file
# (argv[1]) and hand results back through a queue; the output does not depend
# on scheduling.
import queue
import sys
import threading

with open(sys.argv[1], encoding="ascii") as f:
    lines = f.read().split("\n")

results = queue.Queue()
NTHREADS = 4


def work(t):
    mine = lines[t::NTHREADS]
    freq = {}
    longest = ""
    total = 0
    chunks = []
    for i, line in enumerate(mine):
        if not line:
            continue
        key, num, dec, words = line.split("\t")
        total += int(num)
        for w in words.split(" "):
            freq[w] = freq.get(w, 0) + 1
            if len(w) > len(longest) or (len(w) == len(longest) and w > longest):
                longest = w
        chunks.append(words.upper()[::-1])
        if len(chunks) > 1000:
            joined = "|".join(chunks)
            total += len(joined) % 7919
            chunks = [joined[:100]]
        if i % 5000 == 0:
            freq = {k: v for k, v in freq.items() if v > 1 or hash(k) % 2}
    results.put((t, total, len(freq), longest, sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))[:5]))


threads = [threading.Thread(target=work, args=(t,)) for t in range(NTHREADS)]
for th in threads:
    th.start()
for th in threads:
    th.join()
out = sorted(results.get() for _ in range(NTHREADS))
for row in out:
    print(*row)
