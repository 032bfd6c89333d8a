#!/bin/sh
# Entrypoint of the oversell-lab image: the first argument picks the role, so
# one image serves inventory, order, the load generator and the comparison
# runner. Every address comes from the environment or flags, never from here.
set -eu

LAB_ROOT=${LAB_ROOT:-/opt/lab}
LAB_BUILD=${LAB_BUILD:-$LAB_ROOT/build}

usage() {
    cat <<USAGE
usage: <image> ROLE [options]
roles:
  inventory [opts]   inventory service   (inventory --help for its options)
  order [opts]       order service       (order --help)
  loadgen [opts]     load generator      (loadgen --help)
  compare [opts]     comparison runner, reports into \$LAB_REPORTS_DIR (${LAB_REPORTS_DIR:-/reports})
  help               this text
anything else is executed as given (e.g. sh, curl).
INSTANCE_ID=auto names a service instance ROLE-<container hostname>, so
replicas of a scaled service report distinct instances.
USAGE
}

# A scaled service cannot be given one INSTANCE_ID per replica by compose:
# derive it from the container's hostname, which differs per replica.
name_instance() {
    if [ "${INSTANCE_ID:-}" = auto ]; then
        INSTANCE_ID="$1-$(cat /proc/sys/kernel/hostname)"
        export INSTANCE_ID
    fi
}

role=${1:-help}
case "$role" in
    inventory|order)
        shift
        name_instance "$role"
        exec "$LAB_BUILD/bin/$role" "$@"
        ;;
    loadgen)
        shift
        exec "$LAB_BUILD/bin/loadgen" "$@"
        ;;
    compare)
        shift
        out=${LAB_REPORTS_DIR:-/reports}
        mkdir -p "$out" 2>/dev/null || true
        if [ ! -w "$out" ]; then
            echo "lab-entrypoint: reports folder $out is not writable by uid $(id -u);" \
                 "on the host: mkdir -p reports, then set OVERSELL_UID/OVERSELL_GID in deploy/.env" \
                 "to the owner's (id -u, id -g)" >&2
            exit 1
        fi
        exec "$LAB_ROOT/loadtest/compare" "$@"
        ;;
    help|-h|--help)
        usage
        ;;
    *)
        exec "$@"
        ;;
esac
