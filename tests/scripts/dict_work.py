# Dict-, set- and string-heavy processing of the data file given as argv[1].
import collections
import sys

counts = {}
by_key_prefix = collections.defaultdict(dict)
pairs = collections.Counter()
seen = set()
lines = 0
with open(sys.argv[1], encoding="ascii") as f:
    for line in f:
        lines += 1
        key, num, dec, words = line.rstrip("\n").split("\t")
        ws = words.split(" ")
        for w in ws:
            counts[w] = counts.get(w, 0) + 1
        for a, b in zip(ws, ws[1:]):
            pairs[(a.lower(), b.lower())] += 1
        by_key_prefix[key[:3]][key] = (int(num), dec)
        seen.add(key[::-1])

# Churn: delete and re-insert so dicts shrink, grow and rehash.
for round_ in range(3):
    doomed = [k for k in counts if hash(k) % 3 == round_]
    for k in doomed:
        del counts[k]
    for k in doomed[: len(doomed) // 2]:
        counts[k.upper() + str(round_)] = len(k)

inverse = {}
for w, c in counts.items():
    inverse.setdefault(c, []).append(w)

print("lines", lines, "words", len(counts), "prefixes", len(by_key_prefix), "seen", len(seen))
for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:40]:
    print("word", w, c)
for (a, b), c in sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[:40]:
    print("pair", a, b, c)
for p in sorted(by_key_prefix)[:50]:
    d = by_key_prefix[p]
    print("prefix", p, len(d), sum(v[0] for v in d.values()))
print("inverse", sorted((c, len(ws)) for c, ws in inverse.items())[:60])
print("set", sum(len(s) for s in seen), len(set(s[:4] for s in seen)))
