# JSON round trips over generated documents and over the records of the data
# file given as argv[1].  Output is deterministic (fixed seed, sorted keys).
import hashlib
import json
import random
import sys

rng = random.Random(20240611)


def make(depth):
    kind = rng.randrange(7 if depth > 0 else 4)
    if kind == 0:
        return rng.randrange(-10**12, 10**12)
    if kind == 1:
        return round(rng.uniform(-1e6, 1e6), 6)
    if kind == 2:
        return "".join(rng.choice("abcdefghij\u00e9\u4e2d\"\\\n ") for _ in range(rng.randrange(40)))
    if kind == 3:
        return rng.choice([True, False, None])
    if kind in (4, 5):
        return {"k%d_%d" % (depth, rng.randrange(1000)): make(depth - 1) for _ in range(rng.randrange(1, 8))}
    return [make(depth - 1) for _ in range(rng.randrange(8))]


docs = [make(4) for _ in range(300)]
compact = json.dumps(docs, sort_keys=True)
back = json.loads(compact)
assert back == docs, "generated documents did not survive a round trip"
pretty = json.dumps(back, sort_keys=True, indent=2, ensure_ascii=False)
assert json.loads(pretty) == docs
print("generated", len(compact), len(pretty), hashlib.sha256(pretty.encode()).hexdigest())

records = []
with open(sys.argv[1], encoding="ascii") as f:
    for line in f:
        key, num, dec, words = line.rstrip("\n").split("\t")
        records.append({"key": key, "n": int(num), "x": float(dec), "words": words.split(" ")})
text = json.dumps(records, sort_keys=True)
again = json.loads(text)
assert again == records, "records did not survive a round trip"
by_first = {}
for r in again:
    by_first.setdefault(r["words"][0], []).append(r["n"])
summary = {w: [len(v), sum(v), min(v), max(v)] for w, v in sorted(by_first.items())}
print("records", len(records), len(text), hashlib.sha256(text.encode()).hexdigest())
print(json.dumps(summary, sort_keys=True)[:2000])
