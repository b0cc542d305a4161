#!/bin/sh
# make bench: run every tests/bench/*.sh in turn. Each prints its figures and the ratio to the
# reference it competes with, measured side by side on this machine. Nothing here is a test.
set -u
rc=0
for b in tests/bench/*.sh; do
    [ "$b" = tests/bench/run.sh ] && continue
    echo "== $(basename "$b" .sh)"
    sh "$b" || { echo "bench: $b failed" >&2; rc=1; }
done
exit $rc
