#!/usr/bin/env bash
# lib/ is four layers with dependencies pointing one way only:
#   services -> lib/guards -> lib/stock -> lib/locks -> lib/base
# A file may include its own layer or a lower one, never a higher one
# (lib/base includes nothing above it, lib/locks only base, lib/stock locks
# and base); cross-layer includes name their layer ("base/db.h"); no include
# circle between files, and -- when the objects are built -- no circle of
# calls between the .c files either (A calls B and B calls A, directly or
# round a loop); no C file in lib/ is over 700 lines; every entry of
# lib/guards/ other than core/ (what several guards share) and the two
# headers guard.h and guard_list.h is one guard: a file guard_NAME.c, or a
# folder NAME/ holding guard_NAME.c and that guard's private helpers; no
# guard folder includes another's; every guard is in the guard list and
# every list entry has its file. Exit 0 pass, 1 fail.
set -u
cd "$(dirname "$0")/../.." || exit 1
problems=()
LAYERS=(base locks stock guards)   # bottom first

# tsort's loop report as "a -> b -> c; d -> e", one circle per loop.
circles() {
    awk '/input contains a loop/ {if (c) printf "%s; ", c; c = ""; next}
         {sub(/^tsort: /, ""); c = c ? c " -> " $0 : $0}
         END {if (c) print c}' "$1"
}

rank() { # rank of a layer name, -1 if not a layer
    local i
    for i in "${!LAYERS[@]}"; do [ "${LAYERS[$i]}" = "$1" ] && { echo "$i"; return; }; done
    echo -1
}

# The layer of every lib folder is known.
for d in lib/*/; do
    d=${d#lib/}; d=${d%/}
    [ "$(rank "$d")" -ge 0 ] || problems+=("unknown layer lib/$d")
done
[ -z "$(find lib -maxdepth 1 -name '*.[ch]')" ] || problems+=("C files directly under lib/: put them in a layer")

# Every include points to its own layer or below; a bare include is a file
# of the same folder (no reaching across by -I); every edge is kept for the
# circle check.
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
while read -r f; do
    dir=$(dirname "$f")
    case "$f" in
        lib/*) layer=${f#lib/}; layer=${layer%%/*}; own=$(rank "$layer") ;;
        *) own=${#LAYERS[@]} ;;   # services sit above every layer
    esac
    while read -r inc; do
        top=${inc%%/*}
        r=$(rank "$top")
        if [ "$inc" != "$top" ] && [ "$r" -ge 0 ]; then
            target=lib/$inc
            [ -f "$target" ] || { problems+=("$f: $target does not exist"); continue; }
            [ "$r" -le "$own" ] || problems+=("$f (layer ${LAYERS[$own]:-services}) includes $inc from a higher layer")
        else
            target=$dir/$inc
            [ -f "$target" ] || { problems+=("$f includes \"$inc\", not in $dir (name its layer)"); continue; }
        fi
        echo "$f $target" >> "$edges"
    done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
done < <(find lib services -name '*.[ch]' | sort)
if ! tsort "$edges" > /dev/null 2> "$edges.err"; then
    problems+=("include circle: $(circles "$edges.err")")
fi
rm -f "$edges.err"

# Call circles between lib/ files, read from the built objects: an edge
# A -> B when A.o uses a symbol B.o defines. A header declaring calls both
# ways (rlock.c <-> rlock_fair.c) shows up here, not in the include graph.
objdir=${LAB_BUILD:-build}/obj/lib
if [ -d "$objdir" ] && command -v nm > /dev/null; then
    calls=$(mktemp)
    defs=$(mktemp)
    for o in $(find "$objdir" -name '*.o' | sort); do
        src=${o#"$objdir"/}; src=lib/${src%.o}.c
        [ -f "$src" ] || continue   # a stale object of a moved file
        nm -g --defined-only "$o" | awk -v s="$src" 'NF==3 {print $3, s}' >> "$defs"
    done
    sort -k1,1 "$defs" -o "$defs"
    for o in $(find "$objdir" -name '*.o' | sort); do
        src=${o#"$objdir"/}; src=lib/${src%.o}.c
        [ -f "$src" ] || continue
        nm -u "$o" | awk '{print $NF}' | sort -u | join - "$defs" | awk -v s="$src" '$2 != s {print s, $2}' >> "$calls"
    done
    if ! tsort "$calls" > /dev/null 2> "$calls.err"; then
        problems+=("call circle between lib/ files: $(circles "$calls.err")")
    fi
    echo "call graph: $(sort -u "$calls" | wc -l) edges between $(tr ' ' '\n' < "$calls" | sort -u | wc -l) files, no circle unless reported"
    rm -f "$calls" "$calls.err" "$defs"
else
    echo "call graph: $objdir not built, call circles not checked"
fi

while read -r n f; do
    [ "$f" = total ] && continue
    [ "$n" -gt 700 ] && problems+=("$f has $n lines (limit 700)")
done < <(find lib -name '*.c' -exec wc -l {} +)

# One guard per entry of lib/guards/ (a file, or a folder with its
# helpers), one line per guard in guard_list.h.
guard_file() { # the guard's file of list name $1, a file or in its folder
    if [ -d "lib/guards/$1" ]; then echo "lib/guards/$1/guard_$1.c"; else echo "lib/guards/guard_$1.c"; fi
}
listed=$(sed -n 's/^GUARD(\([a-z_]*\))$/\1/p' lib/guards/guard_list.h | sort)
[ -n "$listed" ] || problems+=("lib/guards/guard_list.h lists no guard")
defined=
for e in lib/guards/*; do
    n=$(basename "$e")
    case "$n" in core | guard.h | guard_list.h) continue ;; esac
    if [ -d "$e" ]; then
        g=$n; f=$e/guard_$g.c
        [[ "$g" =~ ^[a-z_]+$ ]] || { problems+=("$e: a guard folder is named like its guard (lower case, _)"); continue; }
        [ -f "$f" ] || { problems+=("$e/ is not a guard: no guard_$g.c in it (shared machinery goes in lib/guards/core/)"); continue; }
        # A guard's helpers are its own: no other guard folder reaches in.
        while read -r other; do
            problems+=("$other includes a private helper of lib/guards/$g/ (share it through lib/guards/core/)")
        done < <(grep -lE "^#include \"guards/$g/" $(find lib services -name '*.[ch]' ! -path "$e/*") 2>/dev/null)
    else
        case "$n" in
            guard_*.c) g=${n#guard_}; g=${g%.c}; f=$e ;;
            *) problems+=("$e is not a guard (a guard is guard_NAME.c or a folder NAME/): machinery goes in lib/guards/core/"); continue ;;
        esac
    fi
    grep -qE "^const struct guard guard_$g =" "$f" ||
        { problems+=("$f is not a guard (no const struct guard guard_$g)"); continue; }
    defined="$defined $g"
done
defined=$(echo $defined | tr ' ' '\n' | sed '/^$/d' | sort)
[ "$listed" = "$defined" ] || problems+=("guard list ($(echo $listed)) != guards defined ($(echo $defined))")
for g in $listed; do
    [ -f "$(guard_file "$g")" ] || problems+=("guard $g has no $(guard_file "$g")")
done

if [ "${#problems[@]}" -gt 0 ]; then
    printf 'test_layers: FAIL: %s\n' "${problems[@]}"
    exit 1
fi
echo "test_layers: ok ($(echo "$listed" | wc -w) guards)"
