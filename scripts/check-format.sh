#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Checks that every tracked C source and header (git ls-files '*.c' '*.h') is
# formatted as .clang-format says, with clang-format 14 (--dry-run -Werror);
# changes nothing unless given --fix, which reformats those files in place.
#   scripts/check-format.sh          list the files that differ; exit 1 if any
#   scripts/check-format.sh -v       the same, with clang-format's findings
#   scripts/check-format.sh --fix    reformat them
# Exit 77 (skipped, for ctest) when clang-format 14 is not installed: another
# version formats differently, so its verdict would not be the style's.
set -eu
cd "$(dirname "$0")/.."

mode=check
case "${1:-}" in
"") ;;
--fix) mode=fix ;;
-v|--verbose) mode=verbose ;;
*) echo "usage: scripts/check-format.sh [--fix | -v]" >&2; exit 2 ;;
esac

cf=""
for c in "${CLANG_FORMAT:-}" clang-format-14 clang-format; do
    if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1 &&
        "$c" --version | grep -q 'version 14\.'; then
        cf=$c
        break
    fi
done
if [ -z "$cf" ]; then
    echo "check-format: SKIP: clang-format 14 is not installed (apt-get install clang-format-14)"
    exit 77
fi

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    files=$(git ls-files '*.c' '*.h')
else
    files=$(find . -path './build*' -prune -o -type f \( -name '*.c' -o -name '*.h' \) -print |
        sed 's|^\./||' | sort)
fi

if [ "$mode" = fix ]; then
    # shellcheck disable=SC2086 # one name per word: tracked C files have no spaces
    "$cf" --style=file -i $files
    echo "check-format: reformatted $(echo "$files" | wc -l) files with $cf"
    exit 0
fi

bad=""
n=0
for f in $files; do
    if [ "$mode" = verbose ]; then
        "$cf" --style=file --dry-run -Werror "$f" || bad="$bad $f"
    elif ! "$cf" --style=file --dry-run -Werror --ferror-limit=1 "$f" >/dev/null 2>&1; then
        bad="$bad $f"
    fi
    n=$((n + 1))
done
if [ -n "$bad" ]; then
    echo "check-format: these files are not formatted as .clang-format says:"
    for f in $bad; do
        echo "  $f"
    done
    echo "check-format: $(echo $bad | wc -w) of $n files differ;" \
        "scripts/check-format.sh -v shows where, scripts/check-format.sh --fix reformats them"
    exit 1
fi
echo "check-format: all $n C files are formatted as .clang-format says"
