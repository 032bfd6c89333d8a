#!/usr/bin/env bash
# The guards a reader is told about are the guards the service runs: every
# name GET /guards returns has a row in the README's guard table and in
# services/API.md's guard table, in the same order, neither table names a
# guard the service does not have, and API.md's count of guards is right.
# Where a table cell says what GET /guards says (each guard's own C file),
# it says it in the same words: the README's "needs" is the guard's
# `needs`, its "with 2+ instances" says "oversell" exactly when the guard
# is not safe_across_instances; API.md's `expect` column is `expect` and
# its "safe across instances" column is safe_across_instances.
# Uses tests/run's stack (LAB_INVENTORY_URLS).
# Exit 0 pass, 77 skip (no stack, curl or jq), 1 fail.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if ! command -v curl >/dev/null || ! command -v jq >/dev/null; then echo "needs curl and jq"; exit 77; fi
[ -n "${LAB_INVENTORY_URLS:-}" ] || { echo "no stack (run through tests/run)"; exit 77; }
url=${LAB_INVENTORY_URLS%%,*}

served=$(curl -fsS --max-time 5 "$url/guards" | jq -r '.guards[].name') || { echo "GET $url/guards failed"; exit 1; }
[ -n "$served" ] || { echo "GET /guards listed no guard"; exit 1; }

# The rows of the first table after a heading: "| `name` | ..." lines.
table_names() { # file heading
    awk -v h="$2" '
        index($0, h) == 1 { on = 1; next }
        on && /^## / { exit }
        on && /^\| `[a-z-]+` \|/ { seen = 1; split($0, f, "`"); print f[2]; next }
        on && seen && !/^\|/ { exit }' "$1"
}

fail=0
check() { # label names
    if [ "$2" != "$served" ]; then
        echo "$1 does not match GET /guards:"
        diff <(echo "$served") <(echo "$2") | sed 's/^/    /'
        fail=1
    fi
}
check "README.md's guard table" "$(table_names "$ROOT/README.md" '## Guards')"
check "services/API.md's guard table" "$(table_names "$ROOT/services/API.md" '## 2. Guards')"

n=$(echo "$served" | wc -l)
words=(zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
       fifteen sixteen seventeen eighteen nineteen twenty)
said=$(sed -n '/^## 2. Guards/,/^| name/p' "$ROOT/services/API.md" | grep -oiE '\b[a-z]+ exist' | head -1 | cut -d' ' -f1)
if [ -n "$said" ] && [ "${said,,}" != "${words[$n]}" ]; then
    echo "services/API.md says \"$said exist\"; GET /guards lists $n"
    fail=1
fi
# Column c (1 = the name) of the rows of the first table after a heading,
# as "name<TAB>cell", backquotes dropped.
table_column() { # file heading column
    awk -v h="$2" -v c="$3" '
        index($0, h) == 1 { on = 1; next }
        on && /^## / { exit }
        on && /^\| `[a-z-]+` \|/ {
            seen = 1; n = split($0, f, / \| /); name = f[1]; sub(/^\| /, "", name)
            v = f[c]; sub(/ \|$/, "", v); gsub(/`/, "", name); gsub(/`/, "", v)
            print name "\t" v; next }
        on && seen && !/^\|/ { exit }' "$1"
}
cells() { # label want got
    if [ "$2" != "$3" ]; then
        echo "$1 does not say what GET /guards says:"
        diff <(echo "$2") <(echo "$3") | sed 's/^/    /'
        fail=1
    fi
}
body=$(curl -fsS --max-time 5 "$url/guards") || { echo "GET $url/guards failed"; exit 1; }
cells "README.md's needs column" "$(jq -r '.guards[] | "\(.name)\t\(.needs)"' <<<"$body")" \
    "$(table_column "$ROOT/README.md" '## Guards' 2)"
cells "README.md's with-2+-instances column (oversell iff not safe)" \
    "$(jq -r '.guards[] | "\(.name)\t\(if .safe_across_instances then "safe" else "oversells" end)"' <<<"$body")" \
    "$(table_column "$ROOT/README.md" '## Guards' 4 |
       awk -F'\t' '{ print $1 "\t" ($2 ~ /oversell/ ? "oversells" : "safe") }')"
cells "services/API.md's expect column" "$(jq -r '.guards[] | "\(.name)\t\(.expect)"' <<<"$body")" \
    "$(table_column "$ROOT/services/API.md" '## 2. Guards' 3)"
cells "services/API.md's safe column" \
    "$(jq -r '.guards[] | "\(.name)\t\(if .safe_across_instances then "yes" else "no" end)"' <<<"$body")" \
    "$(table_column "$ROOT/services/API.md" '## 2. Guards' 4)"

[ "$fail" = 0 ] && echo "README.md and services/API.md list the $n guards GET /guards serves, in its words"
exit "$fail"
