#!/bin/sh
# tests/bench/analyze_same.sh OLD NEW [TRACES] — run two swift-trace-analyze binaries on every
# trace file and every directory under TRACES (default ../shared/data/traces), in JSON, text
# and Markdown, and report any output that differs (byte for byte) or any exit status that does.
# Exit 0 when all are identical. For changes meant to be pure refactors or speed-ups.
set -u
old=$1 new=$2 root=${3:-../shared/data/traces}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
n=0 bad=0
for p in $(find "$root" -mindepth 1 \( -type d -o -name '*.json' -o -name '*.json.gz' -o -name '*.jsonl' -o -name '*.raw.gz' \) | sort); do
    for f in json text md; do
        "$old" -q -f $f "$p" >"$tmp/a" 2>"$tmp/ae"; ra=$?
        "$new" -q -f $f "$p" >"$tmp/b" 2>"$tmp/be"; rb=$?
        n=$((n + 1))
        if [ $ra != $rb ] || ! cmp -s "$tmp/a" "$tmp/b" || ! cmp -s "$tmp/ae" "$tmp/be"; then
            bad=$((bad + 1))
            echo "DIFFERS: -f $f $p (exit $ra vs $rb)"
            diff "$tmp/a" "$tmp/b" | head -20
            diff "$tmp/ae" "$tmp/be" | head -5
        fi
    done
done
echo "$n runs, $bad differ"
[ $bad = 0 ]
