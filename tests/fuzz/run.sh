#!/bin/sh
# Run every fuzz target over its seed corpus (tests/fuzz/corpus/<name>/) plus mutated inputs.
# FUZZ_RUNS (default 2000) sets the number of mutated inputs per target.
set -eu
dir=$1
runs=${FUZZ_RUNS:-2000}
for f in "$dir"/fuzz_*; do
    case $f in *.d) continue ;; esac # the compiler's dependency files beside the targets
    name=$(basename "$f" | sed 's/^fuzz_//')
    corpus=tests/fuzz/corpus/$name
    [ -d "$corpus" ] || corpus=
    echo "fuzz: $name" >&2
    "$f" -runs="$runs" $corpus
done
