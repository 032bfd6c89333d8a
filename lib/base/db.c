/* MySQL connection per thread, statement cache, error classification. */
#include "db.h"

#include "util.h"

#include <errmsg.h>
#include <mysqld_error.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DB_MAX_PARAMS 16

static pthread_key_t db_key;
static pthread_once_t db_key_once = PTHREAD_ONCE_INIT;

int db_global_init(void)
{
    return mysql_library_init(0, NULL, NULL) == 0 ? DB_OK : DB_ERR;
}

void db_global_end(void)
{
    mysql_library_end();
}

static void drop_statements(struct db_conn *c)
{
    for (int i = 0; i < DB_STMT_CACHE; i++) {
        if (c->cache[i].stmt)
            mysql_stmt_close(c->cache[i].stmt);
        c->cache[i].stmt = NULL;
        c->cache[i].sql = NULL;
    }
}

static void disconnect(struct db_conn *c)
{
    drop_statements(c);
    if (c->my)
        mysql_close(c->my);
    c->my = NULL;
    c->mark_ready = 0;   /* the temporary marker table went with the session */
}

int db_dialect_parse(const char *text)
{
    if (!text || !*text || strcmp(text, "auto") == 0)
        return DB_DIALECT_AUTO;
    if (strcmp(text, "mariadb") == 0)
        return DB_DIALECT_MARIADB;
    if (strcmp(text, "mysql") == 0)
        return DB_DIALECT_MYSQL;
    return -1;
}

const char *db_dialect_name(enum db_dialect d)
{
    return d == DB_DIALECT_MARIADB ? "mariadb" : d == DB_DIALECT_MYSQL ? "mysql" : "auto";
}

int db_conf_check(const struct db_conf *conf, char *err, size_t errlen)
{
    if (db_dialect_parse(conf->sql_dialect) >= 0)
        return DB_OK;
    snprintf(err, errlen, "--sql-dialect: '%s' is not auto, mariadb or mysql",
             conf->sql_dialect);
    return DB_ERR;
}

/* MariaDB names itself in its version string ("10.11.6-MariaDB-0+deb12u1",
 * or "5.5.5-10.11.6-MariaDB" through an old proxy); MySQL and its forks do
 * not ("8.0.36", Percona's "8.0.36-28"). */
enum db_dialect db_dialect_of(const struct db_conf *f, const char *server)
{
    int d = db_dialect_parse(f->sql_dialect);
    if (d == DB_DIALECT_MARIADB || d == DB_DIALECT_MYSQL)
        return (enum db_dialect)d;
    return server && strstr(server, "MariaDB") ? DB_DIALECT_MARIADB : DB_DIALECT_MYSQL;
}

/* Decide what the caller does with a failure, and drop a dead connection so
 * the next call reconnects instead of failing forever. */
static int classify(struct db_conn *c, unsigned int no, const char *msg)
{
    if (no == 0 && c->my && mysql_errno(c->my) != 0) {
        /* A statement call that failed without naming why on the statement:
         * the connection knows. */
        no = mysql_errno(c->my);
        msg = mysql_error(c->my);
    }
    if (no == 0) {
        /* Failed, and nobody says why: not an SQL error a caller could fix,
         * so the connection is not trusted any more (503, reconnect). */
        c->my_errno = 0;
        snprintf(c->errstr, sizeof(c->errstr), "mysql: call failed without an error code");
        disconnect(c);
        return c->err = DB_EUNAVAIL;
    }
    c->my_errno = no;
    snprintf(c->errstr, sizeof(c->errstr), "mysql %u: %.100s", no, msg ? msg : "");
    switch (no) {
    case ER_LOCK_DEADLOCK:
    case ER_LOCK_WAIT_TIMEOUT:
        c->conflicts++;
        return c->err = DB_ERETRY;
    case ER_UNKNOWN_COM_ERROR:
        /* Galera: "WSREP has not yet prepared node for application use",
         * the node is outside the primary component (paused, partitioned,
         * rejoining). The connection is fine; the node will come back. */
    case ER_ERROR_DURING_COMMIT:
        /* 1180: Galera refused an open COMMIT for the same reason; the
         * transaction is rolled back. */
        return c->err = DB_EUNAVAIL;
    case ER_DUP_ENTRY:
        return c->err = DB_EDUP;
    case CR_SERVER_GONE_ERROR:
    case CR_SERVER_LOST:
    case CR_CONNECTION_ERROR:
    case CR_CONN_HOST_ERROR:
    case CR_UNKNOWN_HOST:
    case CR_COMMANDS_OUT_OF_SYNC:
    case ER_SERVER_SHUTDOWN:
    case ER_CONNECTION_KILLED:
    case 4031: /* MariaDB: client idle too long, disconnected */
    case 2055: /* lost connection at handshake/reading */
        disconnect(c);
        return c->err = DB_EUNAVAIL;
    default:
        if (no >= 2000 && no < 3000) { /* other client-side errors: treat as lost */
            disconnect(c);
            return c->err = DB_EUNAVAIL;
        }
        return c->err = DB_ERR;
    }
}

int db_ensure(struct db_conn *c)
{
    if (c->my)
        return DB_OK;
    const struct db_conf *f = c->conf;
    MYSQL *my = mysql_init(NULL);
    if (!my) {
        snprintf(c->errstr, sizeof(c->errstr), "out of memory");
        return c->err = DB_EUNAVAIL;
    }
    unsigned int t = (unsigned int)((f->timeout_ms + 999) / 1000);
    if (t == 0)
        t = 1;
    mysql_options(my, MYSQL_OPT_CONNECT_TIMEOUT, &t);
    mysql_options(my, MYSQL_OPT_READ_TIMEOUT, &t);
    mysql_options(my, MYSQL_OPT_WRITE_TIMEOUT, &t);
    unsigned int proto = MYSQL_PROTOCOL_TCP;
    mysql_options(my, MYSQL_OPT_PROTOCOL, &proto);
    /* Pinned, not inherited from the client library's default: identifiers
     * are compared as bytes, so both ends must agree on what the bytes are. */
    mysql_options(my, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    if (!mysql_real_connect(my, f->host, f->user, f->password,
                            f->dbname[0] ? f->dbname : NULL,
                            (unsigned int)f->port, NULL, 0)) {
        c->my_errno = mysql_errno(my);
        snprintf(c->errstr, sizeof(c->errstr), "connect %.40s:%ld: %.70s", f->host,
                 f->port, mysql_error(my));
        mysql_close(my);
        return c->err = DB_EUNAVAIL;
    }
    c->my = my;
    c->in_txn = 0;
    snprintf(c->server, sizeof(c->server), "%s", mysql_get_server_info(my));
    c->dialect = db_dialect_of(f, c->server);
    char sql[96];
    c->lock_wait_s = f->lock_wait_s > 0 ? f->lock_wait_s : 5;
    snprintf(sql, sizeof(sql), "SET SESSION innodb_lock_wait_timeout=%ld", c->lock_wait_s);
    if (mysql_query(my, sql) != 0) {
        classify(c, mysql_errno(my), mysql_error(my));
        disconnect(c);
        return c->err = DB_EUNAVAIL;
    }
    if (f->sync_wait > 0) {
        snprintf(sql, sizeof(sql), "SET SESSION wsrep_sync_wait=%ld", f->sync_wait);
        if (mysql_query(my, sql) != 0) {
            classify(c, mysql_errno(my), mysql_error(my));
            disconnect(c);
            return c->err = DB_EUNAVAIL;
        }
    }
    c->err = DB_OK;
    return DB_OK;
}

struct db_conn *db_connect(const struct db_conf *conf)
{
    struct db_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->conf = conf;
    db_ensure(c);
    return c;
}

void db_free(struct db_conn *c)
{
    if (!c)
        return;
    disconnect(c);
    free(c);
}

static void thread_conn_free(void *p)
{
    db_free(p);
    mysql_thread_end();
}

static void make_key(void)
{
    pthread_key_create(&db_key, thread_conn_free);
}

struct db_conn *db_thread_conn(const struct db_conf *conf)
{
    pthread_once(&db_key_once, make_key);
    struct db_conn *c = pthread_getspecific(db_key);
    if (!c) {
        mysql_thread_init();
        c = calloc(1, sizeof(*c));
        if (!c)
            return NULL;
        c->conf = conf;
        pthread_setspecific(db_key, c);
    }
    /* A connection idle for a while may have outlived a server restart:
     * find out now, while no request state depends on it, rather than
     * failing the request's first statement. */
    double now = util_now();
    if (c->my && now - c->last_used > 2.0 && mysql_ping(c->my) != 0)
        disconnect(c);
    c->last_used = now;
    db_ensure(c);
    return c;
}

static MYSQL_STMT *cached_stmt(struct db_conn *c, const char *sql)
{
    int slot = -1;
    for (int i = 0; i < DB_STMT_CACHE; i++) {
        if (c->cache[i].sql == sql)
            return c->cache[i].stmt;
        if (!c->cache[i].sql && slot < 0)
            slot = i;
    }
    MYSQL_STMT *st = mysql_stmt_init(c->my);
    if (!st) {
        classify(c, CR_OUT_OF_MEMORY, "statement init failed");
        return NULL;
    }
    if (mysql_stmt_prepare(st, sql, strlen(sql)) != 0) {
        classify(c, mysql_stmt_errno(st), mysql_stmt_error(st));
        mysql_stmt_close(st);
        return NULL;
    }
    if (slot < 0) { /* cache full: evict in turn, never always the same slot */
        slot = c->evict;
        c->evict = (c->evict + 1) % DB_STMT_CACHE;
        mysql_stmt_close(c->cache[slot].stmt);
    }
    c->cache[slot].sql = sql;
    c->cache[slot].stmt = st;
    return st;
}

/* One statement's bound parameters and result columns, on run_once's
 * stack: MySQL reads the parameters and writes the columns through them. */
struct stmt_binds {
    MYSQL_BIND pb[DB_MAX_PARAMS], rb[DB_MAX_PARAMS];
    unsigned long plen[DB_MAX_PARAMS], rlen[DB_MAX_PARAMS];
    long long pll[DB_MAX_PARAMS];
    int pi[DB_MAX_PARAMS];
    my_bool rnull[DB_MAX_PARAMS];
};

/* Bind the parameters `in` describes from ap. DB_OK, or DB_ERR with
 * c->errstr on a type letter the format does not know. */
static int bind_params(struct db_conn *c, const char *in, va_list *ap, struct stmt_binds *b)
{
    for (size_t i = 0; in[i]; i++) {
        MYSQL_BIND *pb = &b->pb[i];
        switch (in[i]) {
        case 's': {
            const char *s = va_arg(*ap, const char *);
            b->plen[i] = (unsigned long)strlen(s);
            pb->buffer_type = MYSQL_TYPE_STRING;
            pb->buffer = (void *)s;
            pb->buffer_length = b->plen[i];
            pb->length = &b->plen[i];
            break;
        }
        case 'l':
            b->pll[i] = va_arg(*ap, long long);
            pb->buffer_type = MYSQL_TYPE_LONGLONG;
            pb->buffer = &b->pll[i];
            break;
        case 'i':
            b->pi[i] = va_arg(*ap, int);
            pb->buffer_type = MYSQL_TYPE_LONG;
            pb->buffer = &b->pi[i];
            break;
        default:
            snprintf(c->errstr, sizeof(c->errstr), "bad parameter type '%c'", in[i]);
            return c->err = DB_ERR;
        }
    }
    return DB_OK;
}

/* Bind the caller's result buffers `out` describes from ap (after the
 * parameters). DB_OK, or DB_ERR with c->errstr on an unknown letter. */
static int bind_results(struct db_conn *c, const char *out, va_list *ap, struct stmt_binds *b)
{
    for (size_t i = 0; out[i]; i++) {
        MYSQL_BIND *rb = &b->rb[i];
        rb->is_null = &b->rnull[i];
        rb->length = &b->rlen[i];
        switch (out[i]) {
        case 'l':
            rb->buffer_type = MYSQL_TYPE_LONGLONG;
            rb->buffer = va_arg(*ap, long long *);
            break;
        case 'i':
            rb->buffer_type = MYSQL_TYPE_LONG;
            rb->buffer = va_arg(*ap, int *);
            break;
        case 's':
            rb->buffer_type = MYSQL_TYPE_STRING;
            rb->buffer = va_arg(*ap, char *);
            rb->buffer_length = va_arg(*ap, size_t);
            break;
        default:
            snprintf(c->errstr, sizeof(c->errstr), "bad result type '%c'", out[i]);
            return c->err = DB_ERR;
        }
    }
    return DB_OK;
}

/* The first row as the caller reads it: NULL columns read as 0 / "", and
 * strings are terminated. */
static void settle_first_row(const char *out, struct stmt_binds *b)
{
    for (size_t i = 0; out[i]; i++) {
        MYSQL_BIND *rb = &b->rb[i];
        if (out[i] == 's') {
            size_t cap = rb->buffer_length;
            size_t n = b->rnull[i] ? 0 : b->rlen[i];
            ((char *)rb->buffer)[n < cap ? n : cap - 1] = '\0';
        } else if (b->rnull[i]) {
            if (out[i] == 'l') *(long long *)rb->buffer = 0;
            else *(int *)rb->buffer = 0;
        }
    }
}

/* Fetch a SELECT's rows into the bound buffers: the row count, or a
 * classified error. */
static long long fetch_rows(struct db_conn *c, MYSQL_STMT *st, const char *out,
                            struct stmt_binds *b)
{
    if (out[0] && mysql_stmt_bind_result(st, b->rb) != 0)
        return classify(c, mysql_stmt_errno(st), mysql_stmt_error(st));
    long long rows = 0;
    int rc;
    while ((rc = mysql_stmt_fetch(st)) == 0 || rc == MYSQL_DATA_TRUNCATED) {
        if (rows == 0)
            settle_first_row(out, b);
        rows++;
    }
    if (rc == 1) {
        int e = classify(c, mysql_stmt_errno(st), mysql_stmt_error(st));
        mysql_stmt_free_result(st);
        return e;
    }
    mysql_stmt_free_result(st);
    return rows;
}

static long long run_once(struct db_conn *c, const char *sql, const char *in,
                          const char *out, va_list args)
{
    if (db_ensure(c) != DB_OK)
        return DB_EUNAVAIL;
    if (strlen(in) > DB_MAX_PARAMS || strlen(out) > DB_MAX_PARAMS) {
        snprintf(c->errstr, sizeof(c->errstr), "too many parameters");
        return c->err = DB_ERR;
    }
    MYSQL_STMT *st = cached_stmt(c, sql);
    if (!st)
        return c->err;
    struct stmt_binds b;
    memset(b.pb, 0, sizeof(b.pb));
    memset(b.rb, 0, sizeof(b.rb));
    va_list ap;
    va_copy(ap, args);
    int bound = bind_params(c, in, &ap, &b) == DB_OK && bind_results(c, out, &ap, &b) == DB_OK;
    va_end(ap);
    if (!bound)
        return c->err;
    if ((in[0] && mysql_stmt_bind_param(st, b.pb) != 0) || mysql_stmt_execute(st) != 0)
        return classify(c, mysql_stmt_errno(st), mysql_stmt_error(st));
    long long result;
    if (mysql_stmt_field_count(st) == 0) {
        result = (long long)mysql_stmt_affected_rows(st);
        c->insert_id = (unsigned long long)mysql_stmt_insert_id(st);
    } else if ((result = fetch_rows(c, st, out, &b)) < 0) {
        return result;
    }
    c->err = DB_OK;
    return result;
}

/* A connection can die between two requests (server restarted). Reading
 * again on a fresh connection is safe when no transaction is open and the
 * statement only reads: nothing was written, nothing can be applied twice. */
static int may_retry(const struct db_conn *c, int rc, int was_connected, const char *sql)
{
    return rc == DB_EUNAVAIL && was_connected && !c->in_txn &&
           strncmp(sql, "SELECT", 6) == 0;
}

long long db_run(struct db_conn *c, const char *sql, const char *in,
                 const char *out, ...)
{
    va_list ap;
    va_start(ap, out);
    int was_connected = c->my != NULL;
    long long rc = run_once(c, sql, in, out, ap);
    va_end(ap);
    if (may_retry(c, (int)rc, was_connected, sql)) {
        va_start(ap, out);
        rc = run_once(c, sql, in, out, ap);
        va_end(ap);
    }
    return rc;
}

int db_exec(struct db_conn *c, const char *sql)
{
    if (db_ensure(c) != DB_OK)
        return DB_EUNAVAIL;
    if (mysql_query(c->my, sql) != 0)
        return classify(c, mysql_errno(c->my), mysql_error(c->my));
    MYSQL_RES *r = mysql_store_result(c->my);
    if (r)
        mysql_free_result(r);
    return c->err = DB_OK;
}

/* The session's marker table (DB_TXN_MARK), once per connection, outside
 * any transaction: a temporary table is the session's own, so no other
 * connection, node or replica ever sees or waits for it. */
static int make_marker(struct db_conn *c)
{
    if (c->mark_ready)
        return DB_OK;
    int rc = db_exec(c, "CREATE TEMPORARY TABLE IF NOT EXISTS " DB_TXN_MARK
                        " (one TINYINT NOT NULL PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB");
    if (rc == DB_OK)
        rc = db_exec(c, "INSERT IGNORE INTO " DB_TXN_MARK " VALUES (1, 0)");
    c->mark_ready = rc == DB_OK;
    if (rc == DB_ERR) {        /* e.g. 1044: an account without the privilege */
        char why[sizeof(c->errstr)];
        snprintf(why, sizeof(why), "%s", c->errstr);
        snprintf(c->errstr, sizeof(c->errstr), "the portable SQL needs CREATE TEMPORARY "
                 "TABLES: %.50s", why);
    }
    return rc;
}

/* The new transaction's number in the marker, as its first statement:
 * before it holds a lock, nothing can abort it. The reply to this very
 * statement says whether it ran inside the transaction (not a flag left
 * from an earlier one), so a marker written in autocommit is refused. */
static int write_marker(struct db_conn *c)
{
    long long n = db_run(c, "UPDATE " DB_TXN_MARK " SET n=? WHERE one=1", "l", "",
                         ++c->txn_seq);
    if (n < 0)
        return (int)n;
    if (n != 1 || !c->my || !(c->my->server_status & SERVER_STATUS_IN_TRANS)) {
        snprintf(c->errstr, sizeof(c->errstr), "the transaction marker was not written "
                 "inside a transaction");
        c->conflicts++;
        return c->err = DB_ERETRY;
    }
    return DB_OK;
}

static int start_transaction(struct db_conn *c)
{
    int rc = DB_OK;
    if (c->dialect == DB_DIALECT_MYSQL)
        rc = make_marker(c);
    if (rc == DB_OK)
        rc = db_exec(c, "START TRANSACTION");
    if (rc == DB_OK && c->dialect == DB_DIALECT_MYSQL)
        rc = write_marker(c);
    return rc;
}

int db_begin(struct db_conn *c)
{
    int was_connected = c->my != NULL;
    c->in_txn = 0;
    if (db_ensure(c) != DB_OK)
        return DB_EUNAVAIL;
    int rc = start_transaction(c);
    if (rc == DB_EUNAVAIL && was_connected)   /* nothing started yet: safe */
        rc = start_transaction(c);
    if (rc != DB_OK && rc != DB_EUNAVAIL)
        db_rollback(c);
    c->in_txn = rc == DB_OK;
    return rc;
}

/* The fault knob's counter is per process: "every Nth commit" is what a
 * flaky network does to the service as a whole. */
static _Atomic long commits_seen;

int db_commit(struct db_conn *c)
{
    int rc = db_exec(c, "COMMIT");
    c->in_txn = 0;
    long every = c->conf->fault_commit_lost;
    if (rc == DB_OK && every > 0 && ++commits_seen % every == 0) {
        /* Applied on the server; the client never hears so. */
        disconnect(c);
        c->my_errno = CR_SERVER_LOST;
        snprintf(c->errstr, sizeof(c->errstr), "COMMIT reply lost (fault-commit-lost)");
        return c->err = DB_EUNAVAIL;
    }
    return rc;
}

void db_rollback(struct db_conn *c)
{
    c->in_txn = 0;
    if (c->my && mysql_query(c->my, "ROLLBACK") != 0)
        disconnect(c);
}

int db_set_lock_wait(struct db_conn *c, long ms)
{
    long s = ms <= 1000 ? 1 : (ms + 999) / 1000;
    if (db_ensure(c) != DB_OK)
        return DB_EUNAVAIL;
    if (s == c->lock_wait_s)
        return DB_OK;
    char sql[80];
    snprintf(sql, sizeof(sql), "SET SESSION innodb_lock_wait_timeout=%ld", s);
    int in_txn = c->in_txn;
    int rc = db_exec(c, sql);
    /* The connection died while idle (a server restart, a KILL, within
     * the window db_thread_conn does not ping): outside a transaction
     * nothing depends on it, so set it once more on a fresh one, as
     * db_begin does; often the first statement of a request (a guard that
     * skips the ledger read), whose sale must not fail for it. */
    if (rc == DB_EUNAVAIL && !in_txn && db_ensure(c) == DB_OK)
        rc = s == c->lock_wait_s ? DB_OK : db_exec(c, sql);
    if (rc == DB_OK)
        c->lock_wait_s = s;
    return rc;
}

int db_ping(struct db_conn *c)
{
    if (db_ensure(c) != DB_OK)
        return DB_EUNAVAIL;
    if (mysql_query(c->my, "SELECT 1") != 0) {
        classify(c, mysql_errno(c->my), mysql_error(c->my));
        return DB_EUNAVAIL;
    }
    MYSQL_RES *r = mysql_store_result(c->my);
    if (r)
        mysql_free_result(r);
    return DB_OK;
}
