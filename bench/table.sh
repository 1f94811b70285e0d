#!/bin/sh
# Turns a run's raw.tsv (bench/run.sh) into markdown: one table per load, one
# row per server, medians across rounds with the spread (min–max) and ratios
# against nginx + lua. Separate from run.sh so a table can be remade, or its
# layout changed, without running the benchmark again:
#
#   bench/table.sh bench/results/run-<stamp>/raw.tsv
set -eu
[ $# -eq 1 ] || { echo "usage: $0 raw.tsv" >&2; exit 2; }

awk -F'\t' '
function sortn(a, n,    i, j, t) {
    for (i = 2; i <= n; i++) {
        t = a[i]
        for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]
        a[j + 1] = t
    }
}
# Median, min and max of column `col` for key k, as numbers in M, LO, HI.
function stats(k, col,    n, i, a) {
    n = cnt[k]
    for (i = 1; i <= n; i++) a[i] = val[k, col, i] + 0
    sortn(a, n)
    M = n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    LO = a[1]; HI = a[n]
}
function cell(k, col, fmt) {
    stats(k, col)
    if (cnt[k] == 1) return sprintf(fmt, M)
    return sprintf(fmt " (" fmt "–" fmt ")", M, LO, HI)
}
function ratio(k, col,    m) {
    if (!((BASE, LOADK) in cnt)) return "—"
    stats(BASE SUBSEP LOADK, col); m = M
    stats(k, col)
    return m > 0 ? sprintf("%.2f", M / m) : "—"
}
NR == 1 { next }
$1 == "#skip" { skip[$2] = $3; next }
$1 == "#fail" { fail[$2] = fail[$2] (fail[$2] ? "; " : "") $3; next }
{
    k = $2 SUBSEP $3
    n = ++cnt[k]
    for (c = 4; c <= 15; c++) val[k, c, n] = $c
    if (NF < 13) noclient = 1 # raw.tsv from before the wrk CPU column
    if (NF < 15) notail = 1   # raw.tsv from before p99.9 and max
    errs[k] += $8 + $9
    seen[$2] = 1
}
END {
    BASE = "nginx-lua"
    nserv = split("moonhttp nginx-lua go floor h2o", order, " ")
    nload = split("c100 c1000 c10000 pipe16", loads, " ")
    title["c100"] = "`wrk -t1 -c100`, GET /api/users, keep-alive"
    title["c1000"] = "`wrk -t1 -c1000`, GET /api/users, keep-alive"
    title["c10000"] = "`wrk -t1 -c10000`, GET /api/users, keep-alive"
    title["pipe16"] = "`wrk -t1 -c100 -s pipeline.lua`, 16 pipelined GET /api/users per write"
    name["moonhttp"] = "moonhttp"; name["nginx-lua"] = "nginx + lua"; name["go"] = "Go ServeMux"
    name["floor"] = "epoll floor"; name["h2o"] = "h2o + mruby"
    for (li = 1; li <= nload; li++) {
        LOADK = loads[li]
        printf "### %s\n\n", title[LOADK]
        print "| server | req/s | p50 ms | p99 ms | p99.9 ms | max ms | CPU µs/req (process) | CPU µs/req (cpu0) | req/s ÷ nginx | CPU/req ÷ nginx | p99 ÷ nginx | errors | steal % | wrk CPU % |"
        print "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        for (si = 1; si <= nserv; si++) {
            s = order[si]; k = s SUBSEP LOADK
            if (!(k in cnt)) {
                why = s in skip ? skip[s] : (s in fail ? fail[s] : "")
                if (why != "" || s == "moonhttp")
                    printf "| %s | pending%s | | | | | | | | | | | | |\n", name[s], why != "" ? ": " why : ""
                continue
            }
            # wrk times a pipelined batch, not each response: no latencies.
            lat50 = LOADK == "pipe16" ? "—" : cell(k, 6, "%.2f")
            lat99 = LOADK == "pipe16" ? "—" : cell(k, 7, "%.2f")
            lat999 = LOADK == "pipe16" || notail ? "—" : cell(k, 14, "%.2f")
            latmax = LOADK == "pipe16" || notail ? "—" : cell(k, 15, "%.1f")
            r99 = LOADK == "pipe16" ? "—" : ratio(k, 7)
            printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s | %s |\n", name[s],
                cell(k, 4, "%.0f"), lat50, lat99, lat999, latmax, cell(k, 10, "%.2f"), cell(k, 11, "%.2f"),
                ratio(k, 4), ratio(k, 10), r99, errs[k], cell(k, 12, "%.0f"),
                noclient ? "—" : cell(k, 13, "%.0f")
        }
        print ""
    }
    print "Medians across rounds, (min–max) when there was more than one. CPU µs/req (process):"
    print "utime+stime of the server and its children ÷ requests. (cpu0): busy time of the"
    print "server CPU (user+nice+system+irq+softirq, steal excluded) ÷ requests. Ratios use"
    print "medians; lower CPU/req is better. errors: wrk socket errors + non-2xx, all rounds."
    print "steal %: share of the server CPU the hypervisor took. wrk CPU %: busy share of the"
    print "client CPU; near 100 means wrk, not the server, set the req/s."
}' "$1"
