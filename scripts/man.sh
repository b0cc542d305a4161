#!/bin/sh
# Generate man pages from each command's --help (help2man) plus docs/man/<command>.h2m, which adds
# EXAMPLES, EXIT STATUS, FILES and ENVIRONMENT sections. Usage: scripts/man.sh BIN_DIR OUT_DIR
set -eu
bin=$1
out=$2
mkdir -p "$out"
for b in "$bin"/swift-*; do
    name=$(basename "$b")
    extra=
    [ -f "docs/man/$name.h2m" ] && extra="--include=docs/man/$name.h2m"
    summary=$("$b" --help | sed '1d; /^  or: /d' | sed -n 1p | sed 's/\.$//') # after Usage and its 'or:' lines
    help2man --no-info --no-discard-stderr --section=1 --source="swift-tools" \
        --name="$summary" $extra --include=docs/man/common.h2m \
        --output="$out/$name.1.tmp" "$b"
    mv "$out/$name.1.tmp" "$out/$name.1"
done
