#!/usr/bin/env bash
# No function in lib/ or services/ is over 70 lines (TigerBeetle's limit),
# from the line that names it to its closing brace, brought in by
# ratcheting: the ones that were already longer are listed in
# tests/checks/long_functions.txt ("path function lines"), and that list
# may only shrink. A function over the limit that is not listed fails; a
# listed one that grew past its listed length fails; a listed one that is
# now within the limit, or gone, fails until its line is removed (or its
# length lowered to what it is now), so what was won stays won.
# Exit 0 pass, 1 fail.
set -u
cd "$(dirname "$0")/../.." || exit 1
LIMIT=70
LIST=tests/checks/long_functions.txt
problems=()

# "path function lines" per function definition: the project's style puts a
# body's braces alone at column 0, the name on the line that opens with a
# type at column 0 and holds the first '('.
measure() {
    awk 'FNR == 1 { hdr = 0; infn = 0 }
         /^[A-Za-z_]/ && /\(/ && !infn { hdr = FNR; text = $0 }
         /^\{[ \t]*$/ && hdr && !infn {
             infn = 1; start = hdr; name = text; sub(/\(.*/, "", name)
             n = split(name, w, /[ \t*]+/); name = w[n] }
         /^\}/ && infn { print FILENAME, name, FNR - start + 1; infn = 0; hdr = 0 }' "$@"
}

now=$(measure $(find lib services -name '*.[ch]' | sort))
long=$(awk -v l=$LIMIT '$3 > l' <<< "$now")

declare -A allowed
while read -r path fn n; do
    case "$path" in ''|'#'*) continue ;; esac
    allowed["$path $fn"]=$n
    cur=$(awk -v p="$path" -v f="$fn" '$1 == p && $2 == f {print $3; exit}' <<< "$now")
    if [ -z "$cur" ]; then
        problems+=("$path $fn is listed in $LIST but no longer exists: remove its line")
    elif [ "$cur" -le "$LIMIT" ]; then
        problems+=("$path $fn is $cur lines now, within $LIMIT: remove its line from $LIST")
    elif [ "$cur" -gt "$n" ]; then
        problems+=("$path $fn grew to $cur lines (listed at $n; limit $LIMIT): shorten it")
    elif [ "$cur" -lt "$n" ]; then
        problems+=("$path $fn shrank to $cur lines: lower its line in $LIST to $cur")
    fi
done < "$LIST"

while read -r path fn n; do
    [ -n "$path" ] || continue
    [ -n "${allowed["$path $fn"]:-}" ] ||
        problems+=("$path $fn is $n lines (limit $LIMIT): split it (name the states, push ifs up and fors down)")
done <<< "$long"

if [ "${#problems[@]}" -gt 0 ]; then
    printf 'test_function_length: FAIL: %s\n' "${problems[@]}"
    exit 1
fi
echo "test_function_length: ok ($(wc -l <<< "$now") functions, $(grep -c . <<< "$long") over $LIMIT, all listed)"
