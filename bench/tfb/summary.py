#!/usr/bin/env python3
"""The tables of bench/tfb/run.sh: one per test, medians over the rounds with
their spread (min..max), and each peer's requests per CPU-second as a ratio
of moonhttp's. With gnuplot installed, one PNG per test beside raw.tsv
(requests per server CPU-second by server).

  summary.py RESULTS/raw.tsv
"""
import collections
import os
import shutil
import statistics
import subprocess
import sys

ORDER = ["json", "db", "queries", "fortunes", "updates", "plaintext", "cached", "redis"]
WHAT = {"json": "/json", "db": "/db", "queries": "/queries?queries=20", "fortunes": "/fortunes",
        "updates": "/updates?queries=20", "plaintext": "/plaintext, pipelined 16 deep",
        "cached": "/cached-queries?count=100", "redis": "the seed's 12 routes, one Redis GET each"}


def main():
    raw = sys.argv[1]
    rows = [line.rstrip("\n").split("\t") for line in open(raw)]
    head, rows = rows[0], rows[1:]
    col = {name: i for i, name in enumerate(head)}
    runs = collections.defaultdict(list)
    for r in rows:
        runs[(r[col["test"]], r[col["server"]])].append(r)

    def stat(rs, name):
        v = [float(r[col[name]]) for r in rs]
        v = [x for x in v if x == x] or [float("nan")]  # nan: wrk did not say
        return statistics.median(v), min(v), max(v)

    out_dir = os.path.dirname(os.path.abspath(raw))
    for test in ORDER:
        servers = [s for (t, s) in runs if t == test]
        if not servers:
            continue
        conns = runs[(test, servers[0])][0][col["conns"]]
        print("\n### %s (%s, wrk -c%s)\n" % (test, WHAT[test], conns))
        print("| server | req per CPU-s (spread) | vs moonhttp | req/s (spread) | p50 ms | p99 ms | max ms | errors |")
        print("|---|---|---|---|---|---|---|---|")
        base = stat(runs[(test, "moonhttp")], "req_per_cpu_s")[0] if (test, "moonhttp") in runs else None
        bars = []
        for s in sorted(servers, key=lambda s: -stat(runs[(test, s)], "req_per_cpu_s")[0]):
            rs = runs[(test, s)]
            cpu, cmin, cmax = stat(rs, "req_per_cpu_s")
            rps, rmin, rmax = stat(rs, "req_s")
            ratio = "%.2fx" % (cpu / base) if base else "-"
            errors = sum(int(r[col["errors"]]) for r in rs)
            print("| %s | %.0f (%.0f..%.0f) | %s | %.0f (%.0f..%.0f) | %.2f | %.2f | %.1f | %d |" % (
                s, cpu, cmin, cmax, ratio, rps, rmin, rmax, stat(rs, "p50_ms")[0], stat(rs, "p99_ms")[0],
                stat(rs, "max_ms")[0], errors))
            bars.append((s, cpu, cmin, cmax))
        chart(out_dir, test, bars)


def chart(out_dir, test, bars):
    if not shutil.which("gnuplot"):
        return
    dat = os.path.join(out_dir, "%s.dat" % test)
    with open(dat, "w") as f:
        for i, (s, cpu, cmin, cmax) in enumerate(bars):
            f.write("%d %s %f %f %f\n" % (i, s, cpu, cmin, cmax))
    script = """set terminal png size 640,400
set output '%s/%s.png'
set title 'bench/tfb: %s (%s), requests per server CPU-second, median and spread'
set style fill solid 0.6
set boxwidth 0.6
set yrange [0:*]
set xtics rotate by 0
plot '%s' using 1:3:xtic(2) with boxes notitle, '' using 1:3:4:5 with yerrorbars notitle
""" % (out_dir, test, test, WHAT[test], dat)
    subprocess.run(["gnuplot"], input=script, text=True, check=False)


if __name__ == "__main__":
    main()
