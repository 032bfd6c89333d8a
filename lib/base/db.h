/* MySQL/MariaDB access: one connection per thread, cached prepared
 * statements, and errors sorted into what a caller does next (retry, answer
 * 503, treat as duplicate). Every statement with user data goes through
 * db_run(); plain db_exec() is for constant SQL only. */
#ifndef LAB_DB_H
#define LAB_DB_H

#include <mysql.h>
#include <stddef.h>

#define DB_OK        0
#define DB_ERR      -1  /* SQL error the caller cannot fix by retrying */
#define DB_EUNAVAIL -2  /* cannot reach the server: answer 503, reconnect later */
#define DB_ERETRY   -3  /* deadlock (1213, also a Galera certification failure)
                             * or lock wait timeout (1205): the transaction is
                             * rolled back, repeating it is safe */
#define DB_EDUP     -4  /* duplicate key (1062) */

struct db_conf {
    char host[128];
    long port;
    char user[64];
    char password[128];
    char dbname[64];
    long timeout_ms;         /* connect/read/write timeout: nothing blocks forever */
    long lock_wait_s;        /* innodb_lock_wait_timeout for the session */
    long fault_commit_lost;  /* fault injection: every Nth COMMIT of the process
                              * is applied, then its reply is "lost" (the
                              * connection is dropped); 0 = off */
    long sync_wait;          /* Galera's wsrep_sync_wait for the session: 1
                              * makes every read wait until this node applied
                              * what the cluster committed before it; 0 = the
                              * server's default (off) */
    char sql_dialect[12];    /* "auto" (or ""), "mariadb" or "mysql": see
                              * enum db_dialect */
};

/* Which SQL a connection speaks. A few statements have a MariaDB form
 * (@@in_transaction, INSERT ... RETURNING) and a portable one that MySQL 8
 * and MariaDB both run; `auto` picks by the server's version string at
 * every connect, `mysql` forces the portable forms on any server (that is
 * how they are tested on MariaDB), `mariadb` forces the MariaDB forms. */
enum db_dialect {
    DB_DIALECT_AUTO = 0,
    DB_DIALECT_MARIADB,
    DB_DIALECT_MYSQL,
};

/* "auto" or "" -> DB_DIALECT_AUTO, "mariadb", "mysql"; -1 for anything else. */
int db_dialect_parse(const char *text);
/* "auto", "mariadb" or "mysql". */
const char *db_dialect_name(enum db_dialect d);
/* What a connection to a server announcing `server_version` speaks under
 * `conf`: its sql_dialect when forced, else MARIADB for a version string
 * naming MariaDB and MYSQL for any other. Never DB_DIALECT_AUTO. */
enum db_dialect db_dialect_of(const struct db_conf *conf, const char *server_version);
/* Checks what cfg_parse cannot (the dialect's spelling): DB_OK, or DB_ERR
 * with a one-line reason naming the flag in err. */
int db_conf_check(const struct db_conf *conf, char *err, size_t errlen);

/* The MySQL rows every option table shares (config.h), for a struct `type`
 * with a `struct db_conf` member `m`; `schema` is the default database. */
#define DB_CFG_OPTIONS(type, m, schema, schema_help)                                      \
    {"mysql-host", "MYSQL_HOST", CFG_STR, "127.0.0.1", 0, 0, offsetof(type, m.host),      \
     sizeof(((type *)0)->m.host), "MySQL/MariaDB host"},                                  \
    {"mysql-port", "MYSQL_PORT", CFG_INT, "3307", 1, 65535, offsetof(type, m.port), 0,    \
     "MySQL/MariaDB port"},                                                               \
    {"mysql-user", "MYSQL_USER", CFG_STR, "root", 0, 0, offsetof(type, m.user),           \
     sizeof(((type *)0)->m.user), "MySQL user"},                                          \
    {"mysql-password", "MYSQL_PASSWORD", CFG_STR, "", 0, 0, offsetof(type, m.password),   \
     sizeof(((type *)0)->m.password), "MySQL password"},                                  \
    {"mysql-db", "MYSQL_DB", CFG_STR, schema, 0, 0, offsetof(type, m.dbname),             \
     sizeof(((type *)0)->m.dbname), schema_help},                                         \
    {"mysql-timeout", "MYSQL_TIMEOUT_MS", CFG_MS, "5s", 100, 600000,                      \
     offsetof(type, m.timeout_ms), 0, "connect/read/write timeout"},                      \
    {"mysql-lock-wait", "MYSQL_LOCK_WAIT_S", CFG_INT, "5", 1, 3600,                       \
     offsetof(type, m.lock_wait_s), 0, "innodb_lock_wait_timeout (seconds)"},             \
    {"fault-commit-lost", "LAB_FAULT_COMMIT_LOST", CFG_INT, "0", 0, 1000000,              \
     offsetof(type, m.fault_commit_lost), 0,                                              \
     "fault: every Nth COMMIT is applied and its reply lost (0 off)"},                   \
    {"mysql-sync-wait", "LAB_MYSQL_SYNC_WAIT", CFG_INT, "0", 0, 15,                       \
     offsetof(type, m.sync_wait), 0,                                                      \
     "Galera: SET SESSION wsrep_sync_wait to this (1: reads wait for the cluster; 0 off)"}, \
    {"sql-dialect", "SQL_DIALECT", CFG_STR, "auto", 0, 0, offsetof(type, m.sql_dialect),  \
     sizeof(((type *)0)->m.sql_dialect),                                                  \
     "SQL forms: auto (by the server's version), mariadb, or mysql (portable: MySQL 8)"}

/* Prepared statements kept per connection: more than the library has
 * (about 40), so a worker that served every guard re-prepares none. */
#define DB_STMT_CACHE 64

struct db_conn {
    MYSQL *my;               /* NULL while disconnected */
    const struct db_conf *conf;
    int err;                 /* last DB_E* code, 0 when fine */
    unsigned int my_errno;   /* server/client errno of the last failure */
    char errstr[128];
    int in_txn;              /* between db_begin and commit/rollback */
    double last_used;        /* monotonic seconds; idle connections get a ping */
    long lock_wait_s;        /* the session's innodb_lock_wait_timeout now */
    long conflicts;          /* deadlocks, lock wait timeouts and (Galera)
                              * certification failures seen: only grows */
    unsigned long long insert_id; /* the last db_run that was not a SELECT:
                              * its mysql_stmt_insert_id, which is also the
                              * value of a LAST_INSERT_ID(expr) it set */
    enum db_dialect dialect; /* what this connection speaks, settled at
                              * connect: MARIADB or MYSQL, never AUTO */
    char server[64];         /* the server's version string */
    long long txn_seq;       /* MYSQL dialect: the number db_begin wrote in
                              * the session's transaction marker (DB_TXN_MARK) */
    int mark_ready;          /* MYSQL dialect: the marker table exists */
    struct { const char *sql; MYSQL_STMT *stmt; } cache[DB_STMT_CACHE];
    int evict;               /* the next slot a full cache gives up */
};

/* Call once in main() before any thread starts (mysql_library_init). */
int db_global_init(void);
void db_global_end(void);

/* Connection for the calling thread, created on first use and freed when
 * the thread exits. Returns NULL only when out of memory; otherwise check
 * c->my (NULL = could not connect, c->err/errstr say why). Reconnects a
 * connection that was lost on the last call. `conf` must outlive threads. */
struct db_conn *db_thread_conn(const struct db_conf *conf);

/* Standalone connection (tools, tests). Never NULL unless OOM. */
struct db_conn *db_connect(const struct db_conf *conf);
/* Reconnect if the last call lost the server. Returns DB_OK or DB_EUNAVAIL. */
int db_ensure(struct db_conn *c);
/* Closes the connection and its statements; accepts NULL. */
void db_free(struct db_conn *c);

/* Run one prepared statement. `sql` must be a string literal (it keys the
 * statement cache by address). `in` lists parameter types: 's' const char*,
 * 'l' long long, 'i' int. `out` lists result columns of the FIRST row:
 * 'l' long long*, 'i' int*, 's' (char *buf, size_t buflen). Parameters come
 * first in the varargs, then outputs.
 * Returns, for a SELECT, the number of rows (outputs filled when > 0); for
 * other statements, the affected-row count; or a negative DB_E* code. */
long long db_run(struct db_conn *c, const char *sql, const char *in,
                 const char *out, ...);

/* The portable stand-in for MariaDB's @@in_transaction: a one-row
 * temporary table whose number db_begin sets inside each new transaction
 * (the MYSQL dialect only). A statement that must write only inside the
 * transaction db_begin opened joins it with `n = c->txn_seq`: after an
 * abort (a Galera brute-force abort between two statements) the row is
 * rolled back to an older number, so the statement, even if the server
 * runs it on its own in autocommit, matches nothing and writes nothing. The
 * protocol's in-transaction flag cannot serve: it reports the state after
 * the previous statement, before such an abort. */
#define DB_TXN_MARK "lab_txn_mark"
/* The condition such a statement carries; its one parameter is txn_seq. */
#define DB_IN_OUR_TXN "EXISTS (SELECT 1 FROM " DB_TXN_MARK " m WHERE m.one=1 AND m.n=?)"

/* Constant SQL without parameters or results (BEGIN, COMMIT, ...). */
int db_exec(struct db_conn *c, const char *sql);
/* START TRANSACTION; in the MYSQL dialect also writes the transaction
 * marker (DB_TXN_MARK: one statement more, and the marker table made on the
 * connection's first transaction: CREATE TEMPORARY TABLES privilege). */
int db_begin(struct db_conn *c);
/* COMMIT. DB_EUNAVAIL means the answer was lost: the transaction may or
 * may not have been applied (see stock_commit_sale for how a sale finds
 * out). */
int db_commit(struct db_conn *c);
/* Best effort; a failed rollback also drops the connection. */
void db_rollback(struct db_conn *c);

/* Make the session's row-lock wait at most `ms` (rounded up to whole
 * seconds, at least 1: InnoDB's unit). A round trip only when it changes;
 * outside a transaction a connection found dead is replaced once (as by
 * db_begin). Returns DB_OK or a negative DB_E* code. */
int db_set_lock_wait(struct db_conn *c, long ms);

/* Quick round trip for /healthz: DB_OK or DB_EUNAVAIL. */
int db_ping(struct db_conn *c);

#endif
