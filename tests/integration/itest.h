/* Helpers for integration tests against the stack tests/run started:
 * addresses from the environment, HTTP with libcurl, concurrent load with
 * one curl handle per thread, audits, stack process control. */
#ifndef ITEST_H
#define ITEST_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>

struct redisContext;   /* hiredis; a test that uses it includes <hiredis/hiredis.h> */
struct rlock_client;   /* locks/rlock.h */

struct it_env {
    char inventory[2][128];   /* LAB_INVENTORY_URLS */
    char order[128];          /* LAB_ORDER_URL */
    char root[512];           /* LAB_ROOT */
    char stack_dir[512];      /* LAB_STACK_DIR */
    long mysql_port;
    long redis_port;
};

extern struct it_env it;

/* Read the environment; returns -1 (and prints why) when not run by tests/run. */
int it_setup(void);

struct it_resp {
    long status;              /* 0 on transport failure */
    char body[131072];
    json_t *json;             /* parsed body or NULL; freed by it_resp_free */
};

/* One request (body NULL: no body). Returns status (0 transport failure). */
long it_http(const char *method, const char *url, const char *body, struct it_resp *r);
void it_resp_free(struct it_resp *r);
/* Status only; the body is discarded. */
long it_status(const char *method, const char *url, const char *body);

/* PUT /inventory/{sku} on the first instance; returns the HTTP status. */
long it_seed(const char *sku, long long stock);

struct it_audit { long long initial, stock, sold, oversold, lost_updates; int consistent; };
/* GET audit; 0 on success. */
int it_audit(const char *sku, struct it_audit *a);

/* Fire `total` requests from `clients` threads. body_fmt is a printf format
 * taking one int (the request number) to make order ids unique; urls are
 * used round-robin per request. Counts answers by status. */
struct it_load {
    int total;
    int clients;
    const char *const *urls;
    int nurls;
    const char *method;
    const char *body_fmt;
    int by_status[600];       /* index = HTTP status, [0] = transport failures */
};
void it_hammer(struct it_load *l);

/* deploy/local/stack VERB NAME on the test stack; returns the exit status. */
int it_stack(const char *verb, const char *name);
/* Poll GET url until it answers `status` or timeout_ms passes; 0 on success. */
int it_wait_status(const char *url, long status, long timeout_ms);
/* A metric's value on inventory instance i (it.inventory[i]/metrics, summed
 * over its label sets); -1 when absent or the page cannot be read. */
double it_metric(int i, const char *name);
/* Run one SQL statement with the mariadb client on the test MariaDB. */
int it_sql(const char *sql);
/* Integer result of a one-value SQL query, or -1. */
long long it_sql_value(const char *sql);

/* One request with exactly the given headers (NULL-terminated "Name: value"
 * list, NULL for none; "Content-Type:" with nothing after it removes curl's
 * default) and a body of body_len bytes (may hold any byte). */
long it_request(const char *method, const char *url, const char *const *headers,
                const char *body, size_t body_len, struct it_resp *r);

/* Send `len` raw bytes to the host:port of base_url ("http://h:p") and read
 * the answer until the server closes or 5 s pass. Returns the status of the
 * HTTP status line, 0 when none came; out holds what came (NUL-terminated). */
long it_raw(const char *base_url, const char *req, size_t len, char *out, size_t outlen);

/* A value from the stack's DIR/stack.env ("APP_DB_PASSWORD", "BIN", ...);
 * 0 when found. */
int it_stack_env(const char *key, char *out, size_t outlen);

/* Integer result of a one-value SQL query as user/password, or -1 (also
 * when the statement fails: a refused privilege is -1). */
long long it_sql_value_as(const char *user, const char *password, const char *sql);

/* Start one more inventory instance on `port` against the stack's MariaDB
 * and Redis, as the stack's service account, with extra "K=V" environment
 * entries (NULL-terminated list, may be NULL) and extra flags (same). Waits
 * up to 30 s for /healthz; returns its pid, or -1 (it is stopped then).
 * Log: LAB_STACK_DIR/logs/<name>.log. */
int it_start_inventory(const char *name, long port, const char *const *env,
                       const char *const *args);
/* SIGTERM, wait up to 10 s, then SIGKILL; accepts pid <= 0. */
void it_stop_pid(int pid);

/* it_http with extra request headers ("Name: value", NULL-terminated list;
 * NULL means none). Returns status (0 transport failure). */
long it_http_hdr(const char *method, const char *url, const char *body,
                 const char *const *headers, struct it_resp *r);

/* The stack's port base (the order service's port, see tests/run): ports
 * base+10..base+40 are free for processes a test starts itself. */
long it_port_base(void);
/* Start one more process of the stack's build, e.g. prog "order", with
 * argv after the program name (NULL-terminated), output appended to
 * LAB_STACK_DIR/logs/<name>.log. Returns its pid, or -1. The caller stops
 * it with it_kill (by that pid only). */
int it_spawn(const char *prog, const char *name, const char *const *args);
/* 1 when `prog --help` of the stack's build lists --option, 0 when not,
 * -1 when it cannot be run: for tests of a feature another branch adds. */
int it_bin_has_option(const char *prog, const char *option);
/* Send sig to pid and reap it, waiting at most wait_ms (then SIGKILL).
 * Returns 0 once the process is gone; accepts pid <= 0 (nothing to do). */
int it_kill(int pid, int sig, long wait_ms);

/* With the stack's Redis stopped: delete its persistence (the append-only
 * folder), so the next start is a Redis that lost its data. 0 on success. */
int it_redis_wipe(void);

/* A connection to the stack's Redis, timeout_ms for the connect and for
 * each command; NULL (and prints why) when it cannot connect. The caller
 * redisFree()s it. */
struct redisContext *it_redis_connect(long timeout_ms);

/* One Redis command (a hiredis format and its arguments) on a connection
 * of its own (2 s timeouts), its reply as a number: a string or integer
 * reply, -1 for nil (or another reply), -2 when Redis cannot be reached. */
long long it_redis_num(const char *fmt, ...);

/* GET key on the stack's Redis up to `tries` times, napping nap_ms after
 * each read that is not `want`; returns the last value read (as
 * it_redis_num: -1 missing, -2 unreachable). */
long long it_redis_get_until(const char *key, long long want, int tries, long nap_ms);

/* it_start_inventory on 127.0.0.1:port with --threads 4, then its
 * /healthz polled for 200 up to 30 s; url gets its base
 * ("http://127.0.0.1:PORT"). Returns its pid, or -1 when it did not come
 * up (it is killed then). */
int it_start_inventory_up(const char *name, long port, char *url, size_t urllen);

/* A POST that runs in its own thread while the test goes on: fill url and
 * body, it_bg_post_start (0 on success), later it_bg_post_join. status is
 * its answer (0: transport failure, e.g. the server was killed). */
struct it_bg_post {
    char url[200];
    char body[256];
    long status;
    pthread_t thread;
};
int it_bg_post_start(struct it_bg_post *p);
/* it_bg_post_start of POST base_url/inventory/deduct with `body` (status
 * -1 until answered); 0 on success. */
int it_bg_deduct(struct it_bg_post *p, const char *base_url, const char *body);
void it_bg_post_join(struct it_bg_post *p);

/* Sleep us microseconds. */
void it_sleep_us(long us);

/* A Redis lock client (locks/rlock.h) on the stack's Redis as `instance`,
 * connect timeout 200 ms, command timeout 1 s; NULL (and prints why) when
 * it cannot be made or has an error. Free with rlock_client_free. */
struct rlock_client *it_rlock_client(const char *instance);

/* A redis-decr sale killed between its Redis decision and its MySQL write:
 * start inventory `name` on port (it_start_inventory_up), seed sku with
 * 10, send it the sale of one unit (order_id, hold_ms) in the background,
 * read stock:{sku} in Redis until 9 (tries reads, 20 ms apart), SIGKILL
 * the instance, collect the sale (*status: its answer, 0 when none).
 * Returns the Redis stock last read (9: decided), or -10 when the instance
 * did not start, -11 the seed failed, -12 no thread, -13 the kill failed. */
long long it_decr_kill_mid_sale(const char *name, long port, const char *sku,
                                const char *order_id, long hold_ms, int tries, long *status);

/* GET sku's audit from inventory `inst` into r (caller frees with
 * it_resp_free). Asserts with cmocka (call it inside a test): fails the
 * test unless it answers 200 with a JSON body. */
void it_audit_json(int inst, const char *sku, struct it_resp *r);
/* An integer field of such an audit; fails the test (cmocka) when absent. */
long long it_audit_field(const struct it_resp *r, const char *name);

#endif
