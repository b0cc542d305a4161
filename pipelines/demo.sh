#!/bin/sh
# make demo: the whole pipeline on data the project makes itself (no network, no ../shared).
# It grows with each stage; stages not built yet are reported and skipped.
set -eu
bin=${SWIFT_BIN:-build/bin}
out=${DEMO_DIR:-build/demo}
mkdir -p "$out"
echo "demo: output in $out" >&2
for s in download preprocess train eval export trace-analyze; do
    if [ -x "$bin/swift-$s" ]; then
        echo "demo: swift-$s built" >&2
    else
        echo "demo: swift-$s not built yet (skipped)" >&2
    fi
done
