#!/usr/bin/env bash
# deploy/docker/Dockerfile builds what compose runs: a debian:bookworm build
# stage with the -dev package of every pkg-config module the Makefile links,
# a debian:bookworm-slim runtime without compilers or -dev packages that
# runs as a non-root user through the entrypoint; the runtime packages exist
# in Debian (apt-cache, offline) and provide every shared library the built
# binaries need; .dockerignore keeps the sources in the context and the host's
# build outputs out; the entrypoint dispatches roles as compose expects.
# Exit 0 pass, 77 skip (no python3, or loadtest/compare and scenarios, which
# the image ships, not written yet), 1 fail. No engine, no network.
set -u
cd "$(dirname "$0")/../.." || exit 1
name=test_compose_image
dockerfile=deploy/docker/Dockerfile
entrypoint=deploy/docker/entrypoint.sh

fail() { echo "$name: FAIL: $*"; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "$name: skip: python3 not installed"; exit 77; }
[ -f "$dockerfile" ] || fail "$dockerfile missing"
[ -f "$entrypoint" ] || fail "$entrypoint missing"

build=${LAB_BUILD:-build}
case "$build" in /*) ;; *) build=$PWD/$build ;; esac
tmp=$(mktemp -d) || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT

# Debian package owning a library; dpkg records /usr/lib or /lib as the
# package shipped it, whatever path ldd printed (merged /usr).
owner() {
    local real cand
    real=$(readlink -f "$1")
    for cand in "$1" "${1#/usr}" "/usr$1" "$real" "${real#/usr}" "/usr$real"; do
        dpkg -S "$cand" 2>/dev/null | head -1 | cut -d: -f1 | grep . && return 0
    done
    return 0
}

# Shared libraries the built binaries ask for, as Debian package names.
: >"$tmp/needed"
if command -v readelf >/dev/null 2>&1 && command -v dpkg >/dev/null 2>&1; then
    for role in inventory order loadgen; do
        bin=$build/bin/$role
        [ -x "$bin" ] || continue
        for soname in $(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
            case "$soname" in lib[atu]san.so*|libubsan.so*|liblsan.so*) continue ;; esac
            path=$(ldd "$bin" | awk -v s="$soname" '$1 == s && $3 ~ /^\// { print $3; exit }')
            [ -n "$path" ] || fail "$role needs $soname, which ldd cannot find here"
            pkg=$(owner "$path")
            [ -n "$pkg" ] || fail "$role needs $soname ($path), which no Debian package owns"
            echo "$role $soname $pkg" >>"$tmp/needed"
        done
    done
fi

# Package names are looked up in apt's local lists (offline), when it has any.
apt_ok=0
if command -v apt-cache >/dev/null 2>&1 && compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
    apt_ok=1
fi

python3 - "$dockerfile" "$tmp/needed" "$apt_ok" <<'PY' || exit $?
import fnmatch, glob, os, re, subprocess, sys

dockerfile, needed_path, apt_ok = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
name = "test_compose_image"
problems, later = [], []
text = open(dockerfile).read().replace("\\\n", " ")
lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]

stages, cur = [], None
for l in lines:
    m = re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", l, re.I)
    if m:
        cur = {"image": m.group(1), "name": m.group(2), "lines": []}
        stages.append(cur)
    elif cur is not None:
        cur["lines"].append(l)
if len(stages) < 2:
    problems.append(f"{len(stages)} stage(s): expected a build and a runtime stage")
    stages += [{"image": "", "name": None, "lines": []}] * 2
build, runtime = stages[0], stages[-1]
if build["image"] != "debian:bookworm":
    problems.append(f"build stage FROM {build['image']}, expected debian:bookworm")
if runtime["image"] != "debian:bookworm-slim":
    problems.append(f"runtime stage FROM {runtime['image']}, expected debian:bookworm-slim")

def apt_packages(stage):
    pk = []
    for l in stage["lines"]:
        for m in re.finditer(r"apt-get\s+install\s+([^&;|]*)", l):
            pk += [w for w in m.group(1).split() if not w.startswith("-") and "$" not in w]
    return pk

build_pk, run_pk = apt_packages(build), apt_packages(runtime)

# Build stage: the -dev package of every pkg-config module the Makefile uses.
DEV = {"libmicrohttpd": "libmicrohttpd-dev", "jansson": "libjansson-dev",
       "hiredis": "libhiredis-dev", "libcurl": "libcurl4-openssl-dev",
       "mysqlclient": "default-libmysqlclient-dev", "libmariadb": "libmariadb-dev",
       "cmocka": "libcmocka-dev", "libuuid": "uuid-dev", "openssl": "libssl-dev",
       "libssl": "libssl-dev", "zlib": "zlib1g-dev"}
mk = open("Makefile").read()
mods = []
for m in re.finditer(r"^PKGS\s*:?=\s*(.*)$", mk, re.M):
    mods += m.group(1).split()
for m in re.finditer(r"pkg-config\s+(?:--\S+\s+)+([A-Za-z0-9_. -]+)\)", mk):
    mods += m.group(1).split()
mods = sorted(set(mods))
for mod in mods:
    dev = DEV.get(mod)
    if dev is None:
        problems.append(f"Makefile links pkg-config module {mod}: add its -dev package here and to the Dockerfile")
    elif dev not in build_pk and not (mod == "mysqlclient" and "libmariadb-dev" in build_pk):
        problems.append(f"build stage lacks {dev} (pkg-config {mod})")
for tool in ("build-essential", "pkg-config"):
    if tool not in build_pk:
        problems.append(f"build stage lacks {tool}")

# Runtime stage: no toolchain, no -dev; a non-root user; the entrypoint.
for p in run_pk:
    if p.endswith("-dev") or p in ("build-essential", "gcc", "make", "pkg-config"):
        problems.append(f"runtime stage installs {p}")
users = [l.split(None, 1)[1] for l in runtime["lines"] if re.match(r"USER\s", l, re.I)]
if not users or users[-1].split(":")[0] in ("root", "0"):
    problems.append("runtime stage does not end as a non-root USER")
if not any(re.match(r"COPY\s+--from=", l, re.I) for l in runtime["lines"]):
    problems.append("runtime stage copies nothing from the build stage")
ep = [l for l in runtime["lines"] if re.match(r"ENTRYPOINT\s", l, re.I)]
if not ep or "lab-entrypoint" not in ep[-1]:
    problems.append("runtime ENTRYPOINT is not the lab entrypoint")
for want in ("curl", "jq", "ca-certificates"):
    if want not in run_pk:
        problems.append(f"runtime stage lacks {want} (healthchecks / compare)")

# Libraries the built binaries need are installed by the runtime stage.
BASE = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}   # in bookworm-slim already
for line in open(needed_path):
    role, soname, pkg = line.split()
    if pkg not in run_pk and pkg not in BASE:
        problems.append(f"{role} needs {soname} from {pkg}, not installed in the runtime stage")

if apt_ok and build_pk + run_pk:
    r = subprocess.run(["apt-cache", "show", "--no-all-versions"] + sorted(set(build_pk + run_pk)),
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    known = set(re.findall(r"^Package:\s*(\S+)", r.stdout, re.M))
    for p in sorted(set(build_pk + run_pk) - known):
        problems.append(f"apt-cache does not know package {p}")

# .dockerignore: last matching pattern wins, `!` re-includes, a pattern that
# matches a folder covers everything under it (Docker's rules).
def compile_pat(p):
    rx, i = "", 0
    while i < len(p):
        if p.startswith("**", i):
            rx += ".*"; i += 2
            if p.startswith("/", i):
                rx = rx[:-2] + "(?:.*/)?"; i += 1
        elif p[i] == "*":
            rx += "[^/]*"; i += 1
        elif p[i] == "?":
            rx += "[^/]"; i += 1
        else:
            rx += re.escape(p[i]); i += 1
    return re.compile(rx + r"\Z")

pats = []
if os.path.exists(".dockerignore"):
    for l in open(".dockerignore"):
        l = l.strip()
        if not l or l.startswith("#"):
            continue
        neg = l.startswith("!")
        l = os.path.normpath(l.lstrip("!").lstrip("/"))
        pats.append((neg, compile_pat(l)))

def ignored(path):
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    out = False
    for neg, rx in pats:
        if any(rx.match(p) for p in prefixes):
            out = not neg
    return out

must_ship = ["Makefile", "deploy/docker/entrypoint.sh"]
must_ship += glob.glob("lib/*/*.[ch]") + glob.glob("services/*/*.[ch]") + glob.glob("loadtest/**/*.[ch]", recursive=True)
must_ship += sorted(glob.glob("sql/*.sql")) + glob.glob("loadtest/scenarios/*.conf")
must_ship += ["loadtest/compare"] if os.path.exists("loadtest/compare") else []
for f in must_ship:
    if ignored(f):
        problems.append(f".dockerignore drops {f}, which the image build needs")
for f in ("build/bin/inventory", "build-asan/bin/order", ".git/HEAD", "reports/x.md",
          "run/pids/x.pid", "lib/x.o", "tests/unit/test_x.c"):
    if not ignored(f):
        problems.append(f".dockerignore lets {f} into the build context")
if not glob.glob("sql/*.sql"):
    problems.append("no sql/*.sql: MySQL would start without the schema")

if not os.path.exists("loadtest/compare"):
    later.append("loadtest/compare")
if not glob.glob("loadtest/scenarios/*.conf"):
    later.append("loadtest/scenarios/*.conf")

if problems:
    print(f"{name}: FAIL: " + "; ".join(problems))
    sys.exit(1)
if later:
    open(needed_path + ".later", "w").write(", ".join(later))
PY

# The entrypoint picks the role like compose's `command:` expects.
mkdir -p "$tmp/build/bin"
for role in inventory order loadgen; do
    # shellcheck disable=SC2016  # the stub expands these, not this script
    printf '#!/bin/sh\necho "%s|$INSTANCE_ID|$*"\n' "$role" >"$tmp/build/bin/$role"
    chmod +x "$tmp/build/bin/$role"
done
ep() { env -i PATH=/usr/bin:/bin LAB_ROOT="$tmp" LAB_BUILD="$tmp/build" "$@"; }
host=$(cat /proc/sys/kernel/hostname)
got=$(ep INSTANCE_ID=inventory-2 sh "$entrypoint" inventory --port 8002) || fail "entrypoint inventory failed"
[ "$got" = "inventory|inventory-2|--port 8002" ] || fail "entrypoint inventory ran: $got"
got=$(ep INSTANCE_ID=auto sh "$entrypoint" inventory) || fail "entrypoint INSTANCE_ID=auto failed"
[ "$got" = "inventory|inventory-$host|" ] || fail "INSTANCE_ID=auto gave: $got (want inventory-$host)"
got=$(ep INSTANCE_ID=order-1 sh "$entrypoint" order) || fail "entrypoint order failed"
[ "$got" = "order|order-1|" ] || fail "entrypoint order ran: $got"
ep sh "$entrypoint" help >/dev/null || fail "entrypoint help exits non-zero"
got=$(ep sh "$entrypoint" echo passthrough) || fail "entrypoint cannot exec other commands"
[ "$got" = passthrough ] || fail "entrypoint ran 'echo passthrough' as: $got"
mkdir -p "$tmp/loadtest" "$tmp/reports"
# shellcheck disable=SC2016  # the stub expands these, not this script
printf '#!/bin/sh\necho "compare|$LAB_REPORTS_DIR|$*"\n' >"$tmp/loadtest/compare"
chmod +x "$tmp/loadtest/compare"
got=$(ep LAB_REPORTS_DIR="$tmp/reports" sh "$entrypoint" compare --quick) || fail "entrypoint compare failed"
[ "$got" = "compare|$tmp/reports|--quick" ] || fail "entrypoint compare ran: $got"

if [ -f "$tmp/needed.later" ]; then
    echo "$name: skip: image checked, but it ships $(cat "$tmp/needed.later"), not written yet"
    exit 77
fi
exit 0
