#!/bin/sh
# swift-trace-analyze, two builds, byte for byte: OLD and NEW binaries on every trace path under
# $SHARED/data/traces (each file, each directory, the whole tree) and on generated rank
# directories (tests/bench/gen_ranks.py: RANKS, default "2 8 64", copies of one Kineto rank and
# of one of our JSONL ranks when OURS names one), with -j 1 and -j 2, in JSON, text, Markdown
# and HTML; stdout, stderr and the exit code compared. Prints one line per difference and a
# closing count; exit 1 when anything differs.
#
#     tests/bench/analyze-same.sh /tmp/old/swift-trace-analyze build/bin/swift-trace-analyze
set -u
OLD=$1
NEW=$2
SHARED=${SHARED:-../shared}
T="$SHARED/data/traces"
DIR=$(mktemp -d /tmp/swift-analyze-same.XXXXXX)
trap 'rm -rf "$DIR"' EXIT INT TERM
GEN="$(dirname "$0")/gen_ranks.py"
paths=$(find "$T" -name '*.json' -o -name '*.json.gz' -o -name '*.jsonl' -o -type d | sort)
for n in ${RANKS:-2 8 64}; do
    slow=$((n > 5 ? 5 : n - 1))
    python3 "$GEN" "$T/hta/trace_filter/sampled_rank-0.json.gz" "$DIR/k$n" --ranks "$n" \
        --slow "$slow" --stretch 1.3 || exit 1
    paths="$paths $DIR/k$n"
    if [ -n "${OURS:-}" ]; then
        python3 "$GEN" "$OURS" "$DIR/o$n" --ranks "$n" --slow "$slow" --stretch 1.3 || exit 1
        paths="$paths $DIR/o$n"
    fi
done
runs=0
diffs=0
for p in $paths; do
    for j in 1 2; do
        for f in json text md html; do
            "$OLD" -j $j -f $f "$p" >"$DIR/o.out" 2>"$DIR/o.err"
            ro=$?
            "$NEW" -j $j -f $f "$p" >"$DIR/n.out" 2>"$DIR/n.err"
            rn=$?
            runs=$((runs + 1))
            if [ $ro != $rn ] || ! cmp -s "$DIR/o.out" "$DIR/n.out"; then
                echo "DIFFERS: -j $j -f $f $p (exit $ro vs $rn)"
                diffs=$((diffs + 1))
            elif ! cmp -s "$DIR/o.err" "$DIR/n.err"; then
                # -j 2 may say the same things in another order (files read in parallel)
                if [ $j = 1 ] || [ "$(sort "$DIR/o.err")" != "$(sort "$DIR/n.err")" ]; then
                    echo "STDERR DIFFERS: -j $j -f $f $p"
                    diffs=$((diffs + 1))
                fi
            fi
        done
    done
done
echo "analyze-same: $runs runs, $diffs differences"
[ $diffs = 0 ]
