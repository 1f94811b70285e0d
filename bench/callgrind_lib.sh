# shellcheck shell=bash
# Reading callgrind's output files, for the scripts that count instructions
# per request by the difference of two runs (N1 and N2 requests, start-up
# cancels out): bench/callgrind.sh, proxy.sh, cache_callgrind.sh,
# tfb/run.sh. A run writes one file per process (--trace-children,
# --callgrind-out-file=PREFIX.%p); each function takes that PREFIX.

# cg_total PREFIX: the instructions of all the run's processes. Exits when
# the run left no file (the server did not start under valgrind).
cg_total() {
    local total=0 f t
    for f in "$1".*; do
        [ -e "$f" ] || { echo "no callgrind output $1.*" >&2; exit 1; }
        t=$(awk '/^(summary|totals):/ { print $2; exit }' "$f")
        total=$((total + ${t:-0}))
    done
    echo "$total"
}

# cg_busiest PREFIX: the file of the process with the most instructions (the
# worker that served the requests, not a master).
cg_busiest() {
    local f
    for f in "$1".*; do
        echo "$(awk '/^(summary|totals):/ { print $2; exit }' "$f") $f"
    done | sort -n | tail -n 1 | cut -d' ' -f2
}

# cg_own PREFIX: "count function" lines, own instructions per function of the busiest process.
cg_own() {
    callgrind_annotate --auto=no --threshold=100 "$(cg_busiest "$1")" 2>/dev/null |
        grep -E '^ *[0-9,]+ +\( *[0-9.]+%\) ' | grep -v 'PROGRAM TOTALS' |
        sed -E 's/^ *([0-9,]+) +\( *[0-9.]+%\) +/\1 /' | tr -d ,
}

# cg_own_per_request PREFIX1 PREFIX2 N TOP: each function's own instructions
# per request (the second run's minus the first's, over the N requests
# between them), the TOP largest.
cg_own_per_request() {
    { cg_own "$1" | sed 's/^/a /'; cg_own "$2" | sed 's/^/b /'; } | awk -v n="$3" '
        { k = $3; for (i = 4; i <= NF; i++) k = k " " $i; v[k] += ($1 == "b" ? $2 : -$2) }
        END { for (k in v) printf "%8.1f  %s\n", v[k] / n, k }' | sort -rn | head -n "$4"
}
