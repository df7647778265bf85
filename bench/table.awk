# bench/table.awk — turns bench/run's summary into the markdown results table.
#
# Why: kept apart from bench/run so the running and the presenting can each be
# read on their own. Input (tab-separated, one line per benchmark and
# configuration, benchmarks in run order):
#     benchmark kind configuration verdict seconds peak_rss_kb
# kind is "alloc" (allocation-intensive, written here) or "real" (real command);
# verdict is ok, TIMEOUT (seconds and RSS are lower bounds), FAIL or WRONG.
# Variables: configs (space-separated ids, glibc first), titles ("|"-separated,
# same order).
#
# One row per benchmark: glibc's time and RSS, then for every other
# configuration its time, time ratio, RSS and RSS ratio to glibc. Then one row
# per kind with geometric means; a mean that includes a timeout is a lower
# bound (≥), one that leaves out failed benchmarks says how many it covers.

BEGIN {
    bench_count = 0
    config_count = split(configs, config, " ")
    split(titles, title, "|")
}

{
    if (!($1 in kind)) order[++bench_count] = $1
    kind[$1] = $2
    verdict[$1, $3] = $4
    seconds[$1, $3] = $5
    mebibytes[$1, $3] = $6 / 1024
}

function usable(b, c) {
    return verdict[b, "glibc"] == "ok" && (verdict[b, c] == "ok" || verdict[b, c] == "TIMEOUT")
}

function header(   c, line, rule) {
    line = "| benchmark | glibc time (s) | glibc RSS (MiB) |"
    rule = "|---|---:|---:|"
    for (c = 2; c <= config_count; c++) {
        line = line sprintf(" %s time (s) | %s time × | %s RSS (MiB) | %s RSS × |",
                            title[c], title[c], title[c], title[c])
        rule = rule "---:|---:|---:|---:|"
    }
    print line
    print rule
}

function row(b,   c, id, line, more, least) {
    line = sprintf("| %s | %.3f | %.1f |", b, seconds[b, "glibc"], mebibytes[b, "glibc"])
    for (c = 2; c <= config_count; c++) {
        id = config[c]
        if (!usable(b, id)) {
            line = line sprintf(" **%s** | | | |", verdict[b, id])
            continue
        }
        more = verdict[b, id] == "TIMEOUT" ? ">" : ""
        least = verdict[b, id] == "TIMEOUT" ? "≥" : ""
        line = line sprintf(" %s%.3f%s | %s%.2f | %s%.1f | %s%.2f |",
                            more, seconds[b, id], more ? " **timeout**" : "",
                            more, seconds[b, id] / seconds[b, "glibc"],
                            least, mebibytes[b, id],
                            least, mebibytes[b, id] / mebibytes[b, "glibc"])
    }
    print line
}

function geomean_row(k, label,   c, i, b, id, n, total, lower, log_s, log_m, log_sr, log_mr, line, mark, note) {
    n = 0; log_s = 0; log_m = 0
    for (i = 1; i <= bench_count; i++) {
        b = order[i]
        if (kind[b] != k || verdict[b, "glibc"] != "ok") continue
        n++
        log_s += log(seconds[b, "glibc"])
        log_m += log(mebibytes[b, "glibc"])
    }
    if (n == 0) return
    line = sprintf("| **geomean, %s** | %.3f | %.1f |", label, exp(log_s / n), exp(log_m / n))
    for (c = 2; c <= config_count; c++) {
        id = config[c]
        n = 0; total = 0; lower = 0; log_s = 0; log_m = 0; log_sr = 0; log_mr = 0
        for (i = 1; i <= bench_count; i++) {
            b = order[i]
            if (kind[b] != k) continue
            total++
            if (!usable(b, id)) continue
            n++
            if (verdict[b, id] == "TIMEOUT") lower = 1
            log_s += log(seconds[b, id])
            log_m += log(mebibytes[b, id])
            log_sr += log(seconds[b, id] / seconds[b, "glibc"])
            log_mr += log(mebibytes[b, id] / mebibytes[b, "glibc"])
        }
        if (n == 0) {
            line = line " | | | |"
            continue
        }
        mark = lower ? "≥" : ""
        note = n < total ? sprintf(" (%d of %d)", n, total) : ""
        line = line sprintf(" %s%.3f | **%s%.2f**%s | %s%.1f | **%s%.2f**%s |",
                            mark, exp(log_s / n), mark, exp(log_sr / n), note,
                            mark, exp(log_m / n), mark, exp(log_mr / n), note)
    }
    print line
}

END {
    header()
    for (i = 1; i <= bench_count; i++) if (kind[order[i]] == "alloc") row(order[i])
    for (i = 1; i <= bench_count; i++) if (kind[order[i]] == "real") row(order[i])
    geomean_row("alloc", "allocation-intensive")
    geomean_row("real", "real commands")
}
