#!/usr/bin/env python3
"""bench/tie_odds.py: the tie rules of replace.c, simulated (docs/TOLERANCE.md,
"One planted bug").

Each replica is right with probability P, else one of W wrong answers, all
alike likely, independently (a planted bug that a heap layout hits or not,
and which object it hits). k replicas start; while no k//2 + 1 agree, one
more is started, at most RESPAWNS, in 2k slots; with every slot taken,
'none' gives up (diehard before ties went on), 'oldest' takes out the one
started first (diehard's rule), 'newest' the one started last, 'random' any.

    python3 bench/tie_odds.py [RUNS]     (default 200000)

Prints, per (P, W) and rule, the fractions masked, wrong and no majority.
"""
import random
import sys


def run(p, w, rule, k=3, respawns=16):
    slots, quorum = 2 * k, k // 2 + 1
    started = 0

    def new():
        nonlocal started
        started += 1
        return 0 if random.random() < p else random.randint(1, w)

    voters = [new() for _ in range(k)]  # in the order started
    while True:
        counts = {}
        for v in voters:
            counts[v] = counts.get(v, 0) + 1
        value, n = max(counts.items(), key=lambda c: c[1])
        if n >= quorum:
            return "masked" if value == 0 else "wrong"
        if started - k >= respawns:
            return "no majority"
        if len(voters) >= slots:
            if rule == "none":
                return "no majority"
            voters.pop(0 if rule == "oldest" else -1 if rule == "newest" else random.randrange(len(voters)))
        voters.append(new())


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    random.seed(1)
    print("| P | W | rule | masked | wrong | no majority |")
    print("|---|---|---|---|---|---|")
    for p, w in [(0.365, 999), (0.5, 999), (0.665, 999), (0.2, 999), (0.365, 10)]:
        for rule in ["none", "oldest", "newest", "random"]:
            c = {"masked": 0, "wrong": 0, "no majority": 0}
            for _ in range(runs):
                c[run(p, w, rule)] += 1
            print(f"| {p} | {w} | {rule} | {c['masked'] / runs:.4f} | {c['wrong'] / runs:.4f} "
                  f"| {c['no majority'] / runs:.4f} |")


if __name__ == "__main__":
    main()
