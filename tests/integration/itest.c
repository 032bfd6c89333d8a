/* Integration test helpers (see itest.h). */
#include "itest.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <hiredis/hiredis.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "locks/rlock.h"

struct it_env it;

int it_setup(void)
{
    const char *inv = getenv("LAB_INVENTORY_URLS"), *ord = getenv("LAB_ORDER_URL"),
               *root = getenv("LAB_ROOT"), *dir = getenv("LAB_STACK_DIR"),
               *mp = getenv("LAB_MYSQL_PORT"), *rp = getenv("LAB_REDIS_PORT");
    if (!inv || !ord || !root || !dir || !mp || !rp) {
        fprintf(stderr, "run me through tests/run (LAB_* addresses missing)\n");
        return -1;
    }
    const char *comma = strchr(inv, ',');
    if (!comma) {
        fprintf(stderr, "LAB_INVENTORY_URLS needs two instances\n");
        return -1;
    }
    snprintf(it.inventory[0], sizeof(it.inventory[0]), "%.*s", (int)(comma - inv), inv);
    snprintf(it.inventory[1], sizeof(it.inventory[1]), "%s", comma + 1);
    snprintf(it.order, sizeof(it.order), "%s", ord);
    snprintf(it.root, sizeof(it.root), "%s", root);
    snprintf(it.stack_dir, sizeof(it.stack_dir), "%s", dir);
    it.mysql_port = atol(mp);
    it.redis_port = atol(rp);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return 0;
}

struct sink { char *buf; size_t cap, len; };

static size_t on_body(char *d, size_t s, size_t n, void *u)
{
    struct sink *k = u;
    size_t len = s * n;
    if (!k->buf)
        return len;
    size_t room = k->cap - 1 - k->len, take = len < room ? len : room;
    memcpy(k->buf + k->len, d, take);
    k->len += take;
    k->buf[k->len] = '\0';
    return len;
}

static long perform(CURL *h, const char *method, const char *url, const char *body,
                    struct sink *k)
{
    curl_easy_reset(h);
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, k);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hd);
    return status;
}

long it_http(const char *method, const char *url, const char *body, struct it_resp *r)
{
    memset(r, 0, sizeof(*r));
    CURL *h = curl_easy_init();
    if (!h)
        return 0;
    struct sink k = {r->body, sizeof(r->body), 0};
    r->status = perform(h, method, url, body, &k);
    curl_easy_cleanup(h);
    r->json = r->body[0] ? json_loads(r->body, 0, NULL) : NULL;
    return r->status;
}

void it_resp_free(struct it_resp *r)
{
    if (r && r->json) {
        json_decref(r->json);
        r->json = NULL;
    }
}

long it_status(const char *method, const char *url, const char *body)
{
    struct it_resp r;
    long s = it_http(method, url, body, &r);
    it_resp_free(&r);
    return s;
}

long it_seed(const char *sku, long long stock)
{
    char url[512], body[128];
    snprintf(url, sizeof(url), "%s/inventory/%s", it.inventory[0], sku);
    snprintf(body, sizeof(body), "{\"stock\":%lld,\"segments\":4}", stock);
    return it_status("PUT", url, body);
}

int it_audit(const char *sku, struct it_audit *a)
{
    char url[512];
    snprintf(url, sizeof(url), "%s/inventory/%s/audit", it.inventory[0], sku);
    struct it_resp r;
    memset(a, 0, sizeof(*a));
    if (it_http("GET", url, NULL, &r) != 200 || !r.json) {
        it_resp_free(&r);
        return -1;
    }
    json_int_t i, s, so, o, l;
    int c;
    int rc = json_unpack(r.json, "{s:I,s:I,s:I,s:I,s:I,s:b}", "initial", &i, "stock", &s,
                         "sold", &so, "oversold", &o, "lost_updates", &l, "consistent", &c);
    it_resp_free(&r);
    if (rc)
        return -1;
    *a = (struct it_audit){i, s, so, o, l, c};
    return 0;
}

struct worker { struct it_load *l; atomic_int *next; int by_status[600]; };

static void *hammer_thread(void *p)
{
    struct worker *w = p;
    CURL *h = curl_easy_init();
    char body[1024];
    struct sink k = {0};
    for (;;) {
        int n = atomic_fetch_add(w->next, 1);
        if (n >= w->l->total || !h)
            break;
        snprintf(body, sizeof(body), w->l->body_fmt, n);
        long s = perform(h, w->l->method, w->l->urls[n % w->l->nurls],
                         w->l->body_fmt[0] ? body : NULL, &k);
        w->by_status[s >= 0 && s < 600 ? s : 0]++;
    }
    curl_easy_cleanup(h);
    return NULL;
}

void it_hammer(struct it_load *l)
{
    memset(l->by_status, 0, sizeof(l->by_status));
    atomic_int next = 0;
    int n = l->clients;
    struct worker *w = calloc((size_t)n, sizeof(*w));
    pthread_t *t = calloc((size_t)n, sizeof(*t));
    if (!w || !t) {
        free(w);
        free(t);
        return;
    }
    for (int i = 0; i < n; i++) {
        w[i].l = l;
        w[i].next = &next;
        pthread_create(&t[i], NULL, hammer_thread, &w[i]);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        for (int s = 0; s < 600; s++)
            l->by_status[s] += w[i].by_status[s];
    }
    free(w);
    free(t);
}

int it_stack(const char *verb, const char *name)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "'%s/deploy/local/stack' %s %s --dir '%s' >/dev/null 2>&1",
             it.root, verb, name, it.stack_dir);
    return system(cmd);
}

double it_metric(int i, const char *name)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/metrics", it.inventory[i]);
    struct it_resp r;
    double v = -1;
    if (it_http("GET", url, NULL, &r) == 200) {
        size_t len = strlen(name);
        for (char *l = r.body; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
            if (strncmp(l, name, len) == 0 && (l[len] == ' ' || l[len] == '{')) {
                char *sp = strchr(l, ' ');
                v = (v < 0 ? 0 : v) + (sp ? atof(sp + 1) : 0);
            }
    }
    it_resp_free(&r);
    return v;
}

int it_wait_status(const char *url, long status, long timeout_ms)
{
    struct timespec nap = {0, 100 * 1000000L};
    for (long waited = 0; waited <= timeout_ms; waited += 100) {
        if (it_status("GET", url, NULL) == status)
            return 0;
        nanosleep(&nap, NULL);
    }
    return -1;
}

int it_sql(const char *sql)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "mariadb --no-defaults -h127.0.0.1 -P%ld -uroot -e \"%s\" >/dev/null 2>&1",
             it.mysql_port, sql);
    return system(cmd);
}

long long it_sql_value(const char *sql)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "mariadb --no-defaults -h127.0.0.1 -P%ld -uroot -N -B -e \"%s\" 2>/dev/null",
             it.mysql_port, sql);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    long long v = -1;
    if (fscanf(p, "%lld", &v) != 1)
        v = -1;
    pclose(p);
    return v;
}

long it_request(const char *method, const char *url, const char *const *headers,
                const char *body, size_t body_len, struct it_resp *r)
{
    memset(r, 0, sizeof(*r));
    CURL *h = curl_easy_init();
    if (!h)
        return 0;
    struct curl_slist *hd = NULL;
    for (size_t i = 0; headers && headers[i]; i++)
        hd = curl_slist_append(hd, headers[i]);
    struct sink k = {r->body, sizeof(r->body), 0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &k);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)body_len);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    }
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    r->json = r->body[0] ? json_loads(r->body, 0, NULL) : NULL;
    return r->status;
}

long it_raw(const char *base_url, const char *req, size_t len, char *out, size_t outlen)
{
    char host[64] = "";
    long port = 0;
    out[0] = '\0';
    if (sscanf(base_url, "http://%63[^:]:%ld", host, &port) != 2)
        return 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    size_t got = 0;
    if (inet_pton(AF_INET, host, &sa.sin_addr) == 1 &&
        connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        size_t sent = 0;
        while (sent < len) {
            ssize_t w = send(fd, req + sent, len - sent, MSG_NOSIGNAL);
            if (w <= 0)
                break;
            sent += (size_t)w;
        }
        while (got + 1 < outlen) {
            ssize_t n = recv(fd, out + got, outlen - 1 - got, 0);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
    }
    close(fd);
    out[got] = '\0';
    long status = 0;
    if (sscanf(out, "HTTP/1.%*d %ld", &status) != 1)
        status = 0;
    return status;
}

int it_stack_env(const char *key, char *out, size_t outlen)
{
    char path[700], line[1024];
    snprintf(path, sizeof(path), "%s/stack.env", it.stack_dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t kl = strlen(key);
    int rc = -1;
    /* Lines hold one or more KEY=VALUE words. */
    while (rc != 0 && fgets(line, sizeof(line), f)) {
        for (char *w = strtok(line, " \n"); w; w = strtok(NULL, " \n"))
            if (strncmp(w, key, kl) == 0 && w[kl] == '=') {
                snprintf(out, outlen, "%s", w + kl + 1);
                rc = 0;
                break;
            }
    }
    fclose(f);
    return rc;
}

long long it_sql_value_as(const char *user, const char *password, const char *sql)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "MYSQL_PWD='%s' mariadb --no-defaults -h127.0.0.1 -P%ld -u'%s' -N -B -e \"%s\" "
             "2>/dev/null",
             password, it.mysql_port, user, sql);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    long long v = -1;
    if (fscanf(p, "%lld", &v) != 1)
        v = -1;
    if (pclose(p) != 0)
        v = -1;
    return v;
}

int it_start_inventory(const char *name, long port, const char *const *env,
                       const char *const *args)
{
    char bin[600], user[64], pw[128], log[700], ports[128], nodes[256] = "", sport[16];
    char myport[16], rport[16];
    if (it_stack_env("BIN", bin, sizeof(bin)) || it_stack_env("APP_DB_USER", user, sizeof(user)) ||
        it_stack_env("APP_DB_PASSWORD", pw, sizeof(pw)))
        return -1;
    snprintf(log, sizeof(log), "%s/logs/%s.log", it.stack_dir, name);
    snprintf(ports, sizeof(ports), "%s", getenv("LAB_REDLOCK_PORTS") ? getenv("LAB_REDLOCK_PORTS") : "");
    for (char *p = strtok(ports, ","); p; p = strtok(NULL, ","))
        snprintf(nodes + strlen(nodes), sizeof(nodes) - strlen(nodes), "%s127.0.0.1:%s",
                 nodes[0] ? "," : "", p);
    snprintf(sport, sizeof(sport), "%ld", port);
    snprintf(myport, sizeof(myport), "%ld", it.mysql_port);
    snprintf(rport, sizeof(rport), "%ld", it.redis_port);
    char exe[640];
    snprintf(exe, sizeof(exe), "%s/inventory", bin);
    const char *argv[32] = {exe, "--port", sport, "--instance", name, "--mysql-port", myport,
                            "--redis-port", rport};
    int ac = 9;
    if (nodes[0]) {
        argv[ac++] = "--redlock-nodes";
        argv[ac++] = nodes;
    }
    for (size_t i = 0; args && args[i] && ac < 31; i++)
        argv[ac++] = args[i];
    argv[ac] = NULL;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        setenv("MYSQL_USER", user, 1);
        setenv("MYSQL_PASSWORD", pw, 1);
        for (size_t i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%ld/healthz", port);
    if (it_wait_status(url, 200, 30000) != 0) {
        it_stop_pid(pid);
        return -1;
    }
    return pid;
}

void it_stop_pid(int pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    struct timespec nap = {0, 50 * 1000000L};
    for (int i = 0; i < 200; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return;
        nanosleep(&nap, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

long it_http_hdr(const char *method, const char *url, const char *body,
                 const char *const *headers, struct it_resp *r)
{
    const char *all[16] = {"Content-Type: application/json"};
    size_t n = 1;
    for (size_t i = 0; headers && headers[i] && n + 1 < sizeof(all) / sizeof(all[0]); i++)
        all[n++] = headers[i];
    return it_request(method, url, all, body, body ? strlen(body) : 0, r);
}

long it_port_base(void)
{
    const char *colon = strrchr(it.order, ':');
    return colon ? atol(colon + 1) : -1;
}

/* BIN=... from the stack's stack.env: the binaries the stack itself runs. */
static int stack_bin_dir(char *out, size_t outlen)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/stack.env", it.stack_dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[1024];
    int found = -1;
    while (found != 0 && fgets(line, sizeof(line), f)) {
        char *save = NULL;
        for (char *tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save))
            if (strncmp(tok, "BIN=", 4) == 0) {
                snprintf(out, outlen, "%s", tok + 4);
                found = 0;
                break;
            }
    }
    fclose(f);
    return found;
}

int it_spawn(const char *prog, const char *name, const char *const *args)
{
    char bin[512], exe[700], log[700];
    if (stack_bin_dir(bin, sizeof(bin)) != 0)
        return -1;
    snprintf(exe, sizeof(exe), "%s/%s", bin, prog);
    snprintf(log, sizeof(log), "%s/logs/%s.log", it.stack_dir, name);
    char *argv[64];
    size_t n = 0;
    argv[n++] = exe;
    for (size_t i = 0; args && args[i] && n < 63; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int nul = open("/dev/null", O_RDONLY);
        if (fd < 0 || nul < 0)
            _exit(127);
        dup2(nul, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        setsid();
        execv(exe, argv);
        _exit(127);
    }
    return (int)pid;
}

int it_bin_has_option(const char *prog, const char *option)
{
    char bin[512], cmd[1200], line[512], want[128];
    if (stack_bin_dir(bin, sizeof(bin)) != 0)
        return -1;
    snprintf(cmd, sizeof(cmd), "'%s/%s' --help 2>/dev/null", bin, prog);
    snprintf(want, sizeof(want), "--%s ", option);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    int found = 0, lines = 0;
    while (fgets(line, sizeof(line), p)) {
        lines++;
        if (strstr(line, want))
            found = 1;
    }
    int rc = pclose(p);
    return rc != 0 || lines == 0 ? -1 : found;
}

int it_kill(int pid, int sig, long wait_ms)
{
    if (pid <= 0)
        return 0;
    kill((pid_t)pid, sig);
    struct timespec nap = {0, 20 * 1000000L};
    for (long waited = 0; waited <= wait_ms; waited += 20) {
        if (waitpid((pid_t)pid, NULL, WNOHANG) == (pid_t)pid)
            return 0;
        nanosleep(&nap, NULL);
    }
    kill((pid_t)pid, SIGKILL);
    return waitpid((pid_t)pid, NULL, 0) == (pid_t)pid ? 0 : -1;
}

int it_redis_wipe(void)
{
    char cmd[700];
    if (!it.stack_dir[0] || strchr(it.stack_dir, '\''))
        return -1;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s/redis/appendonlydir'", it.stack_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A connection to the stack's Redis or NULL, saying nothing: for polls
 * that expect Redis to be away for a while. */
static redisContext *redis_open(long timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", (int)it.redis_port, tv);
    if (!c || c->err) {
        redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    return c;
}

struct redisContext *it_redis_connect(long timeout_ms)
{
    redisContext *c = redis_open(timeout_ms);
    if (!c)
        fprintf(stderr, "itest: cannot connect to redis on port %ld\n", it.redis_port);
    return c;
}

long long it_redis_num(const char *fmt, ...)
{
    redisContext *c = redis_open(2000);
    if (!c)
        return -2;
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    long long v = !r ? -2 : r->type == REDIS_REPLY_STRING ? atoll(r->str)
                  : r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

long long it_redis_get_until(const char *key, long long want, int tries, long nap_ms)
{
    long long v = -1;
    struct timespec nap = {nap_ms / 1000, (nap_ms % 1000) * 1000000L};
    for (int i = 0; i < tries && (v = it_redis_num("GET %s", key)) != want; i++)
        nanosleep(&nap, NULL);
    return v;
}

int it_start_inventory_up(const char *name, long port, char *url, size_t urllen)
{
    static const char *const args[] = {"--threads", "4", NULL};
    char h[256];
    snprintf(url, urllen, "http://127.0.0.1:%ld", port);
    int pid = it_start_inventory(name, port, NULL, args);
    if (pid <= 0)
        return -1;
    snprintf(h, sizeof(h), "%s/healthz", url);
    if (it_wait_status(h, 200, 30000) != 0) {
        fprintf(stderr, "itest: %s did not come up\n", name);
        it_kill(pid, SIGKILL, 2000);
        return -1;
    }
    return pid;
}

static void *bg_post_main(void *arg)
{
    struct it_bg_post *p = arg;
    p->status = it_status("POST", p->url, p->body);
    return NULL;
}

int it_bg_post_start(struct it_bg_post *p)
{
    return pthread_create(&p->thread, NULL, bg_post_main, p) == 0 ? 0 : -1;
}

int it_bg_deduct(struct it_bg_post *p, const char *base_url, const char *body)
{
    snprintf(p->url, sizeof(p->url), "%s/inventory/deduct", base_url);
    snprintf(p->body, sizeof(p->body), "%s", body);
    p->status = -1;
    return it_bg_post_start(p);
}

void it_bg_post_join(struct it_bg_post *p)
{
    pthread_join(p->thread, NULL);
}

void it_sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
    nanosleep(&ts, NULL);
}

struct rlock_client *it_rlock_client(const char *instance)
{
    struct rlock_config cfg = {.port = (int)it.redis_port, .instance = instance,
                               .connect_timeout_ms = 200, .cmd_timeout_ms = 1000};
    struct rlock_client *c = rlock_client_new(&cfg);
    const char *why = "out of memory";
    if (c && rlock_client_err(c, &why) == RLOCK_OK)
        return c;
    fprintf(stderr, "itest: redis lock client %s: %s\n", instance, why ? why : "error");
    rlock_client_free(c);
    return NULL;
}

long long it_decr_kill_mid_sale(const char *name, long port, const char *sku,
                                const char *order_id, long hold_ms, int tries, long *status)
{
    char url[160], body[256], key[160];
    *status = -1;
    int pid = it_start_inventory_up(name, port, url, sizeof(url));
    if (pid <= 0)
        return -10;
    if (it_seed(sku, 10) != 200) {
        it_kill(pid, SIGKILL, 2000);
        return -11;
    }
    snprintf(body, sizeof(body),
             "{\"sku\":\"%s\",\"order_id\":\"%s\",\"guard\":\"redis-decr\","
             "\"hold_ms\":%ld}", sku, order_id, hold_ms);
    struct it_bg_post held;
    if (it_bg_deduct(&held, url, body) != 0) {
        it_kill(pid, SIGKILL, 2000);
        return -12;
    }
    snprintf(key, sizeof(key), "stock:{%s}", sku);
    long long rs = it_redis_get_until(key, 9, tries, 20);
    int killed = it_kill(pid, SIGKILL, 2000);   /* mid hold_ms */
    it_bg_post_join(&held);
    *status = held.status;
    return killed == 0 ? rs : -13;
}

void it_audit_json(int inst, const char *sku, struct it_resp *r)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/inventory/%s/audit", it.inventory[inst], sku);
    assert_int_equal(it_http("GET", url, NULL, r), 200);
    assert_non_null(r->json);
}

long long it_audit_field(const struct it_resp *r, const char *name)
{
    json_t *v = json_object_get(r->json, name);
    if (!json_is_integer(v))
        fail_msg("audit has no integer '%s': %s", name, r->body);
    return json_integer_value(v);
}
