#!/bin/bash
# Entrypoint of the MariaDB stand-in for mariadb:10.11 (deploy/docker/mariadb).
# Behaves like the official image's for what deploy/docker-compose.yml uses:
#   - arguments starting with '-' are options of the server (`command:` in
#     compose gives only options);
#   - an empty data folder is initialised: root's password from
#     MYSQL_ROOT_PASSWORD (or MYSQL_ALLOW_EMPTY_PASSWORD=yes), root@'%',
#     optional MYSQL_DATABASE and MYSQL_USER/MYSQL_PASSWORD (granted that
#     database), then /docker-entrypoint-initdb.d/* in name order, all on a
#     server that listens on its socket only, so a TCP healthcheck cannot
#     pass before the init is done;
#   - then the real server replaces this script (exec), as user mysql.
# MySQL-only options MariaDB would refuse are dropped with a note.
set -euo pipefail

log() { echo "mariadb-entrypoint: $*" >&2; }
die() { log "error: $*"; exit 1; }

# '...' SQL string literal for a value from the environment.
sql_str() {
    local s=${1//\\/\\\\}
    printf "'%s'" "${s//\'/\'\'}"
}
# `...` SQL identifier.
# shellcheck disable=SC2016 # the backquotes are SQL, not a command
sql_id() { printf '`%s`' "${1//\`/\`\`}"; }

if [ "${1:0:1}" = '-' ]; then
    set -- mysqld "$@"
fi
case "${1:-}" in
    mysqld|mariadbd) shift ;;
    *) exec "$@" ;;
esac

args=()
for a in "$@"; do
    case "$a" in
        # mysql:8.0's switch to mysql_native_password: MariaDB's default
        # already, and an unknown option would stop the server.
        --default-authentication-plugin=*|--default_authentication_plugin=*)
            log "ignoring $a (MySQL only; MariaDB uses mysql_native_password)" ;;
        *) args+=("$a") ;;
    esac
done

datadir=/var/lib/mysql
socket=/run/mysqld/mysqld.sock
mkdir -p /run/mysqld
chown mysql:mysql /run/mysqld "$datadir"

if [ ! -d "$datadir/mysql" ]; then
    root_pw=${MYSQL_ROOT_PASSWORD:-${MARIADB_ROOT_PASSWORD:-}}
    allow_empty=${MYSQL_ALLOW_EMPTY_PASSWORD:-${MARIADB_ALLOW_EMPTY_ROOT_PASSWORD:-}}
    if [ -z "$root_pw" ] && [ -z "$allow_empty" ]; then
        die "database is uninitialized and MYSQL_ROOT_PASSWORD is not set (or MYSQL_ALLOW_EMPTY_PASSWORD=yes)"
    fi
    log "initialising $datadir"
    mariadb-install-db --user=mysql --datadir="$datadir" --skip-test-db \
        --auth-root-authentication-method=normal >/dev/null

    mariadbd --user=mysql --datadir="$datadir" --skip-networking \
        --socket="$socket" "${args[@]}" &
    init_pid=$!
    client=(mariadb --protocol=socket --socket="$socket" -uroot)
    for _ in $(seq 1 60); do
        "${client[@]}" -e 'SELECT 1' >/dev/null 2>&1 && break
        kill -0 "$init_pid" 2>/dev/null || die "init server exited"
        sleep 1
    done
    "${client[@]}" -e 'SELECT 1' >/dev/null || die "init server did not answer within 60 s"

    {
        echo "SET @@SESSION.SQL_LOG_BIN=0;"
        # Anonymous accounts and root@127.0.0.1/::1/<hostname> without a
        # password, which mariadb-install-db creates: over TCP they match
        # before root@'%' and refuse its password.
        "${client[@]}" -N -B -e "SELECT CONCAT('DROP USER ', QUOTE(user), '@', QUOTE(host), ';') FROM mysql.user
            WHERE user = '' OR (user = 'root' AND host NOT IN ('localhost', '%'))"
        echo "ALTER USER 'root'@'localhost' IDENTIFIED BY $(sql_str "$root_pw");"
        echo "CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY $(sql_str "$root_pw");"
        echo "GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;"
        if [ -n "${MYSQL_DATABASE:-}" ]; then
            echo "CREATE DATABASE IF NOT EXISTS $(sql_id "$MYSQL_DATABASE");"
        fi
        # A least-privilege account, as in mysql:8.0: on MYSQL_DATABASE only.
        if [ -n "${MYSQL_USER:-}" ]; then
            [ "$MYSQL_USER" != root ] || die "MYSQL_USER=root: set MYSQL_ROOT_PASSWORD instead"
            echo "CREATE USER IF NOT EXISTS $(sql_str "$MYSQL_USER")@'%' IDENTIFIED BY $(sql_str "${MYSQL_PASSWORD:-}");"
            if [ -n "${MYSQL_DATABASE:-}" ]; then
                echo "GRANT ALL ON $(sql_id "$MYSQL_DATABASE").* TO $(sql_str "$MYSQL_USER")@'%';"
            fi
        fi
        echo "FLUSH PRIVILEGES;"
    } | "${client[@]}" || die "setting up accounts failed"

    export MYSQL_PWD=$root_pw
    db_arg=()
    [ -n "${MYSQL_DATABASE:-}" ] && db_arg=("$MYSQL_DATABASE")
    for f in /docker-entrypoint-initdb.d/*; do
        [ -e "$f" ] || continue
        case "$f" in
            *.sh)     log "running $f"; if [ -x "$f" ]; then "$f"; else
                          # shellcheck source=/dev/null
                          . "$f"; fi ;;
            *.sql)    log "applying $f"; "${client[@]}" "${db_arg[@]}" <"$f" || die "$f failed" ;;
            *.sql.gz) log "applying $f"; gzip -dc "$f" | "${client[@]}" "${db_arg[@]}" || die "$f failed" ;;
            *)        log "ignoring $f" ;;
        esac
    done
    unset MYSQL_PWD

    mariadb-admin --protocol=socket --socket="$socket" -uroot --password="$root_pw" shutdown \
        || die "init server did not shut down"
    wait "$init_pid" || true
    log "init done"
fi

exec mariadbd --user=mysql --datadir="$datadir" --socket="$socket" "${args[@]}"
