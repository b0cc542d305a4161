#!/bin/sh
# check-layers — the arrows of docs/architecture.md run down only: cmd/ -> lib/ -> kernels/.
#
#   sh scripts/check-layers.sh [ROOT]        (make check-layers; run by .ci/run)
#
# Fails (exit 1, one line per offence as FILE:LINE: what) when
#   - a file under kernels/ includes a lib/ or cmd/ header,
#   - a file under lib/ includes a cmd/ header,
#   - a file of one wing (lib/WING/) includes another wing's lib/OTHER/internal.h,
#   - a file includes a project header by any spelling other than the one from the repository
#     root in quotes ("lib/core/error.h", "kernels/ops.h"): one spelling, so grep finds every user;
# and keeps the rooms walkable: no .c file in lib/ or cmd/ over 1,000 lines, no function there
# over 150 (clang-formatted code: a body opens with "{" alone in column 0).
set -eu
root=${1:-.}
cd "$root"
bad=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
files=$(find kernels lib cmd tests -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) 2>/dev/null | sort)
for f in $files; do
    # every include, as LINE QUOTE PATH (QUOTE: q for "...", a for <...>)
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]' "$f" |
        sed -e 's/^\([0-9]*\):[^"<]*"\([^"]*\)".*/\1 q \2/' \
            -e 's/^\([0-9]*\):[^"<]*<\([^>]*\)>.*/\1 a \2/' >"$tmp" || true
    while read -r line quote inc; do
        where="$f:$line"
        if [ "$quote" = a ]; then
            case $inc in
            lib/* | kernels/* | tests/* | cmd/*)
                echo "$where: includes <$inc>: project headers are included with quotes"; bad=1 ;;
            *) continue ;; # a system header
            esac
        fi
        case $f in
        kernels/*)
            case $inc in lib/* | cmd/*) echo "$where: kernels/ includes $inc (kernels know shapes, not stages)"; bad=1 ;; esac ;;
        lib/*)
            case $inc in cmd/*) echo "$where: lib/ includes $inc"; bad=1 ;; esac
            wing=$(echo "$f" | cut -d/ -f2)
            case $inc in
            lib/*/internal.h)
                other=$(echo "$inc" | cut -d/ -f2)
                [ "$other" = "$wing" ] || { echo "$where: lib/$wing includes another wing's $inc"; bad=1; } ;;
            esac ;;
        esac
        case $inc in
        lib/* | kernels/* | tests/* | cmd/*) [ -f "$inc" ] || { echo "$where: includes $inc, which does not exist"; bad=1; } ;;
        *) echo "$where: includes \"$inc\": spell project headers from the repository root"; bad=1 ;;
        esac
    done <"$tmp"
done
for f in $(find lib cmd -type f -name '*.c' 2>/dev/null | sort); do
    n=$(wc -l <"$f")
    [ "$n" -le 1000 ] || { echo "$f: $n lines (split it: at most 1000)"; bad=1; }
    awk '/^\{$/ { start = FNR; name = prev; next }
         /^\}/ { if (start && FNR - start + 1 > 150)
                     printf "%s:%d: %s is %d lines (at most 150)\n", FILENAME, start - 1, name, FNR - start + 1
                 start = 0 }
         /^[A-Za-z_].*\(/ { prev = $0; sub(/\(.*/, "", prev); sub(/.*[ *]/, "", prev) }' "$f" >"$tmp"
    [ -s "$tmp" ] && { cat "$tmp"; bad=1; }
done
[ $bad -eq 0 ] && echo "check-layers: ok" >&2
exit $bad
