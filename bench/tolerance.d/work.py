# work.py — the Python program of bench/tolerance: parses the input text into
# words, builds dicts and lists of varying sizes (tables above pymalloc's
# 512-byte limit come from malloc), sorts, joins, and prints a summary.
import sys, collections, json
text = sys.stdin.read()
words = text.split()
freq = collections.Counter(words)
by_len = collections.defaultdict(list)
for w in set(words):
    by_len[len(w)].append(w)
rows = []
for n in sorted(by_len):
    ws = sorted(by_len[n])
    rows.append({"len": n, "count": len(ws), "first": ws[:5], "joined": "".join(ws)[:64]})
print(json.dumps(rows[:20], sort_keys=True))
for w, c in sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))[:30]:
    print(w, c)
big = [" ".join(words[i:i + 50]) for i in range(0, len(words), 50)]
print(len(big), sum(len(b) for b in big), sorted(big)[len(big) // 2][:40])
