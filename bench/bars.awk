# bench/bars.awk — judges libdiehard (fill off) against the project's bars.
#
# Why: the numbers alone do not say whether the allocator is good enough; the
# project set three bars, and this prints each with the measured figure and
# "met" or "missed", so nobody has to redo the arithmetic by hand.
#   - time, geometric mean over the allocation-intensive benchmarks: ≤ 1.5× glibc
#   - time, geometric mean over the real commands: ≤ 1.1× glibc
#   - peak RSS at DIEHARD_M=2: ≤ 2.5× glibc (judged on the geometric mean over
#     every benchmark; the worst single benchmark is shown beside it)
# Input: bench/run's summary (see bench/table.awk). Variable: multiplier (M).
# A timed-out run counts with its lower bound, so a mean above a bar is a
# certain miss while one below it is marked as not known; a crashed or wrong
# run misses every bar it belongs to.

BEGIN { bench_count = 0 }

{
    if (!($1 in kind)) order[++bench_count] = $1
    kind[$1] = $2
    verdict[$1, $3] = $4
    seconds[$1, $3] = $5
    rss_kb[$1, $3] = $6
}

function usable(b) {
    return verdict[b, "glibc"] == "ok" && (verdict[b, "diehard"] == "ok" || verdict[b, "diehard"] == "TIMEOUT")
}

# what is "time" or "rss"; k is a kind, or "" for every benchmark.
function judge(what, k, label, bar,   i, b, n, broken, lower, total_log, r, mean, worst, worst_name, verdict_text) {
    n = 0; broken = 0; lower = 0; total_log = 0; worst = 0
    for (i = 1; i <= bench_count; i++) {
        b = order[i]
        if (k != "" && kind[b] != k) continue
        if (!usable(b)) { broken++; continue }
        if (verdict[b, "diehard"] == "TIMEOUT") lower = 1
        r = what == "time" ? seconds[b, "diehard"] / seconds[b, "glibc"] \
                           : rss_kb[b, "diehard"] / rss_kb[b, "glibc"]
        n++
        total_log += log(r)
        if (r > worst) { worst = r; worst_name = b }
    }
    if (n + broken == 0) return
    mean = n > 0 ? exp(total_log / n) : 0
    if (broken > 0 || mean > bar) verdict_text = "**missed**"
    else if (lower) verdict_text = "not known (a timed-out run is in the mean)"
    else verdict_text = "met"
    printf "- %s, geomean over %d%s benchmark(s): %s%.2f× glibc (bar ≤ %.1f×): %s", \
        what == "time" ? "time" : "peak RSS", n, label == "" ? "" : " " label,
        lower ? "≥" : "", mean, bar, verdict_text
    if (what == "rss" && n > 0) printf "; worst: %s at %.2f×", worst_name, worst
    if (broken > 0) printf "; %d benchmark(s) crashed or printed a wrong result", broken
    printf "\n"
}

END {
    print "Bars (diehard, fill off, DIEHARD_M=" multiplier "):"
    print ""
    judge("time", "alloc", "allocation-intensive", 1.5)
    judge("time", "real", "real-command", 1.1)
    judge("rss", "", "", 2.5)
}
