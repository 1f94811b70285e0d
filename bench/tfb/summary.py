#!/usr/bin/env python3
"""The tables of bench/tfb/run.sh: one per test, medians over the rounds with
their spread (min..max), and each peer's requests per CPU-second as a ratio
of moonhttp's at the same concurrency step (wrk connections). With gnuplot
installed, one PNG per test beside raw.tsv: requests per server CPU-second
by server and concurrency.

  summary.py RESULTS/raw.tsv
"""
import collections
import os
import shutil
import statistics
import subprocess
import sys

SERVERS = ["moonhttp", "go", "fastify", "nginx"]  # the charts' bar order
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
        runs[(r[col["test"]], int(r[col["conns"]]), r[col["server"]])].append(r)

    def stat(rs, name):
        v = [float(r[col[name]]) for r in rs]
        v = [x for x in v if x == x] or [float("nan")]  # nan: wrk did not say
        return statistics.median(v), min(v), max(v)

    out_dir = os.path.dirname(os.path.abspath(raw))
    for test in ORDER:
        steps = sorted({c for (t, c, s) in runs if t == test})
        if not steps:
            continue
        print("\n### %s (%s, wrk -c%s)\n" % (test, WHAT[test], ",".join(map(str, steps))))
        print("| conns | server | req per CPU-s (spread) | vs moonhttp | req/s (spread) | p50 ms | p99 ms | max ms | errors |")
        print("|---|---|---|---|---|---|---|---|---|")
        cells = {}  # (conns, server) -> median req per CPU-s, for the chart
        for c in steps:
            servers = [s for (t, cc, s) in runs if t == test and cc == c]
            base = stat(runs[(test, c, "moonhttp")], "req_per_cpu_s")[0] if (test, c, "moonhttp") in runs else None
            for s in sorted(servers, key=lambda s: -stat(runs[(test, c, s)], "req_per_cpu_s")[0]):
                rs = runs[(test, c, s)]
                cpu, cmin, cmax = stat(rs, "req_per_cpu_s")
                rps, rmin, rmax = stat(rs, "req_s")
                ratio = "%.2fx" % (cpu / base) if base else "-"
                errors = sum(int(r[col["errors"]]) for r in rs)
                print("| %d | %s | %.0f (%.0f..%.0f) | %s | %.0f (%.0f..%.0f) | %.2f | %.2f | %.1f | %d |" % (
                    c, s, cpu, cmin, cmax, ratio, rps, rmin, rmax, stat(rs, "p50_ms")[0],
                    stat(rs, "p99_ms")[0], stat(rs, "max_ms")[0], errors))
                cells[(c, s)] = cpu
        chart(out_dir, test, steps, cells)


# One PNG per test: requests per server CPU-second (median over the rounds),
# a cluster of bars per concurrency step, one bar per server.
def chart(out_dir, test, steps, cells):
    if not shutil.which("gnuplot"):
        return
    servers = [s for s in SERVERS if any((c, s) in cells for c in steps)]
    servers += sorted({s for (c, s) in cells} - set(servers))
    dat = os.path.join(out_dir, "%s.dat" % test)
    with open(dat, "w") as f:
        f.write("conns " + " ".join(servers) + "\n")
        for c in steps:
            f.write("%d %s\n" % (c, " ".join("%f" % cells[(c, s)] if (c, s) in cells else "NaN"
                                                for s in servers)))
    plots = ", ".join("'%s' using %d:xtic(1) title columnheader(%d)" % (dat if i == 0 else "", i + 2, i + 2)
                      for i in range(len(servers)))
    script = """set terminal png size 760,420
set output '%s/%s.png'
set title "bench/tfb %s: requests per server CPU-second (medians)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.7 border -1
set boxwidth 0.9
set key outside right top
set yrange [0:*]
set xlabel "wrk connections"
set ylabel "requests per CPU-second"
plot %s
""" % (out_dir, test, test, plots)
    subprocess.run(["gnuplot"], input=script, text=True, check=False)


if __name__ == "__main__":
    main()
