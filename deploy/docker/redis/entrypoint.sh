#!/bin/sh
# Entrypoint of the Redis stand-in for redis:7 (deploy/docker/redis), as the
# official image's: options alone (or a .conf first) mean redis-server; the
# server runs as user redis. Debian's redis-server keeps protected mode on
# when started without a config file, which refuses every client from
# another container; the official image turns it off, so does this one
# (before the caller's options: a later --protected-mode wins).
set -eu

case "${1:-}" in
    -*|*.conf) set -- redis-server "$@" ;;
esac
[ "${1:-}" = redis-server ] || exec "$@"
shift
conf=
case "${1:-}" in
    -*|'') ;;
    *) conf=$1; shift ;;   # redis-server takes its config file first
esac
if [ "$(id -u)" = 0 ]; then
    chown redis:redis /data 2>/dev/null || true
    set -- setpriv --reuid=redis --regid=redis --init-groups redis-server ${conf:+"$conf"} \
        --protected-mode no "$@"
else
    set -- redis-server ${conf:+"$conf"} --protected-mode no "$@"
fi
exec "$@"
