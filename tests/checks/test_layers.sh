#!/usr/bin/env bash
# lib/ is three layers with dependencies pointing one way only:
#   services -> lib/guards -> lib/stock -> lib/base
# No file under lib/base includes from lib/stock or lib/guards; none under
# lib/stock includes from lib/guards; cross-layer includes name their layer
# ("base/db.h"); no C file in lib/ is over 700 lines; every guard file is in
# the guard list and every list entry has its file. Exit 0 pass, 1 fail.
set -u
cd "$(dirname "$0")/../.." || exit 1
problems=()

# "stock/x.h" or "../stock/x.h" from a lower layer.
for f in lib/base/*.[ch]; do
    grep -HnE '#include "(\.\./)?(stock|guards)/' "$f" && problems+=("$f includes an upper layer")
done
for f in lib/stock/*.[ch]; do
    grep -HnE '#include "(\.\./)?guards/' "$f" && problems+=("$f includes lib/guards")
done
# A bare include must be a file of the same folder: no reaching across by -I.
for f in lib/*/*.[ch] services/*/*.[ch]; do
    dir=$(dirname "$f")
    while read -r inc; do
        case "$inc" in
            base/*|locks/*|stock/*|guards/*) [ -f "lib/$inc" ] || problems+=("$f: lib/$inc does not exist") ;;
            *) [ -f "$dir/$inc" ] || problems+=("$f includes \"$inc\", not in $dir (name its layer)") ;;
        esac
    done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
done
# The layer of every lib folder is known.
for d in lib/*/; do
    case "$d" in lib/base/|lib/locks/|lib/stock/|lib/guards/) ;; *) problems+=("unknown layer $d") ;; esac
done
[ -z "$(find lib -maxdepth 1 -name '*.[ch]')" ] || problems+=("C files directly under lib/: put them in a layer")

while read -r n f; do
    [ "$f" = total ] && continue
    [ "$n" -gt 700 ] && problems+=("$f has $n lines (limit 700)")
done < <(find lib -name '*.c' -exec wc -l {} +)

# One file per guard, one line per guard in guard_list.h.
listed=$(sed -n 's/^GUARD(\([a-z_]*\))$/\1/p' lib/guards/guard_list.h | sort)
defined=$(grep -hoE '^const struct guard guard_[a-z_]+ =' lib/guards/*.c | sed 's/.*guard_\([a-z_]*\) =/\1/' | sort)
[ -n "$listed" ] || problems+=("lib/guards/guard_list.h lists no guard")
[ "$listed" = "$defined" ] || problems+=("guard list ($(echo $listed)) != guards defined ($(echo $defined))")
for g in $listed; do
    [ -f "lib/guards/guard_$g.c" ] || problems+=("guard $g has no lib/guards/guard_$g.c")
done

if [ "${#problems[@]}" -gt 0 ]; then
    printf 'test_layers: FAIL: %s\n' "${problems[@]}"
    exit 1
fi
echo "test_layers: ok ($(echo "$listed" | wc -w) guards)"
