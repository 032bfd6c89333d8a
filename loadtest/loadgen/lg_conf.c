/* loadgen options, URL parsing and plan construction (see lg_conf.h). */
#include "lg_conf.h"

#include <ctype.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/config.h"

#define OFF(f) offsetof(struct lg_conf, f)
#define SZ(f) sizeof(((struct lg_conf *)0)->f)

static const char summary[] =
    "HTTP/1.1 keep-alive load generator (epoll, N threads x C connections).\n"
    "  loadgen [options] URL... | -u URL [-u URL...]   (http:// only; several URLs are\n"
    "  spread round-robin over the connections)\n"
    "Short flags: -t threads -c connections -n requests -d duration -R rate -m method\n"
    "  -H header -b body -u url -h help. Placeholders in the path, headers and body:\n"
    "  {seq} (one unique number per request) {uuid} {rand:A..B} {zipf:N:S} {thread}; \\{ is a literal brace.";

/* The last two rows are repeatable and handled before cfg_parse; they are in
 * the table so that --help shows them. */
static const struct cfg_opt lg_opts[] = {
    {"threads", "LG_THREADS", CFG_INT, "2", 1, 256, OFF(threads), 0, "(-t) worker threads"},
    {"connections", "LG_CONNECTIONS", CFG_INT, "10", 1, 100000, OFF(connections), 0,
     "(-c) keep-alive connections in total"},
    {"requests", "LG_REQUESTS", CFG_INT, "0", 0, 1000000000000L, OFF(requests), 0,
     "(-n) stop after this many requests (0: no bound)"},
    {"duration", "LG_DURATION", CFG_MS, "0", 0, 864000000L, OFF(duration_ms), 0,
     "(-d) stop after this time, e.g. 30s (0: none; 10s when -n is 0 too)"},
    {"rate", "LG_RATE", CFG_INT, "0", 0, 100000000L, OFF(rate), 0,
     "(-R) open loop at this many req/s in total (0: closed loop)"},
    {"method", "LG_METHOD", CFG_STR, "", 0, 0, OFF(method), SZ(method),
     "(-m) HTTP method (default GET, POST when a body is given)"},
    {"body", "LG_BODY", CFG_STR, "", 0, 0, OFF(body), SZ(body), "(-b) request body template"},
    {"body-file", "LG_BODY_FILE", CFG_STR, "", 0, 0, OFF(body_file), SZ(body_file),
     "request body template read from a file (max 1 MiB)"},
    {"timeout", "LG_TIMEOUT", CFG_MS, "10s", 1, 3600000L, OFF(timeout_ms), 0,
     "socket timeout per request or connect, counted as an error"},
    {"seq-start", "LG_SEQ_START", CFG_INT, "0", 0, 4000000000000000000L, OFF(seq_start), 0,
     "first {seq} value"},
    {"json", "LG_JSON", CFG_STR, "", 0, 0, OFF(json), SZ(json),
     "also write a machine-readable summary to this file"},
    {"history", "LG_HISTORY", CFG_STR, "", 0, 0, OFF(history), SZ(history),
     "write every request as one JSON line to this file (process, invoke_ns, complete_ns, "
     "sku, qty, order_id, outcome ok|refused|indeterminate, status, remaining, error)"},
    {"seed", "LG_SEED", CFG_INT, "0", 0, 4000000000000000000L, OFF(seed), 0,
     "random seed of {rand}, {zipf} and {uuid} (0: from the clock); the same seed, the same values"},
    {"latency-dist", NULL, CFG_BOOL, "false", 0, 0, OFF(latency_dist), 0,
     "print (and put in --json) the full latency distribution"},
    {"progress", "LG_PROGRESS", CFG_STR, "auto", 0, 0, OFF(progress), SZ(progress),
     "progress line on stderr: auto (when a terminal), on, off"},
    {"retries", "LG_RETRIES", CFG_INT, "0", 0, 100, OFF(retries), 0,
     "re-send a request that timed out or whose connection was reset, at most N times, on a "
     "new connection (the same bytes: the same {seq}, order_id and Idempotency-Key)"},
    {"retry-new-ids", NULL, CFG_BOOL, "false", 0, 0, OFF(retry_new_ids), 0,
     "with --retries: each retry expands the templates again, the same {seq} but new "
     "{uuid}/{rand}/{zipf} draws: a careless client whose retry carries a new order_id "
     "(e.g. \"order_id\":\"o-{uuid}\")"},
    {"url", NULL, CFG_STR, "", 0, 0, OFF(repeat_shown), SZ(repeat_shown),
     "(-u) target URL, repeatable; positional URLs work too"},
    {"header", NULL, CFG_STR, "", 0, 0, OFF(repeat_shown), SZ(repeat_shown),
     "(-H) 'Name: value' request header, repeatable"},
};
#define NOPTS (sizeof lg_opts / sizeof lg_opts[0])
#define NPARSED (NOPTS - 2)

void lg_conf_usage(FILE *out, const char *prog)
{
    cfg_usage(out, prog, summary, lg_opts, NOPTS);
}

static const struct {
    char flag;
    const char *name, *dashed;
} lg_short[] = {
    {'t', "threads", "--threads"}, {'c', "connections", "--connections"},
    {'n', "requests", "--requests"}, {'d', "duration", "--duration"},
    {'R', "rate", "--rate"}, {'m', "method", "--method"}, {'b', "body", "--body"},
    {'u', "url", "--url"}, {'H', "header", "--header"},
};

static int short_index(char c)
{
    for (size_t i = 0; i < sizeof lg_short / sizeof lg_short[0]; i++)
        if (lg_short[i].flag == c)
            return (int)i;
    return -1;
}

static int is_bool_opt(const char *name, size_t n)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (lg_opts[i].type == CFG_BOOL && strlen(lg_opts[i].name) == n &&
            memcmp(lg_opts[i].name, name, n) == 0)
            return 1;
    return 0;
}

static int add_repeat(struct lg_conf *c, const char *name, const char *val,
                      char *err, size_t errlen)
{
    if (strcmp(name, "url") == 0) {
        if (c->nurls == LG_MAX_URLS) {
            snprintf(err, errlen, "more than %d URLs", LG_MAX_URLS);
            return CFG_ERR;
        }
        c->urls[c->nurls++] = val;
    } else {
        if (c->nheaders == LG_MAX_HEADERS) {
            snprintf(err, errlen, "more than %d headers", LG_MAX_HEADERS);
            return CFG_ERR;
        }
        c->headers[c->nheaders++] = val;
    }
    return CFG_OK;
}

int lg_conf_parse(struct lg_conf *c, int argc, char **argv, char *err, size_t errlen)
{
    /* Rewrite argv into long options only, pulling out what cfg_parse cannot
     * hold (repeatables, positionals), then let cfg_parse do defaults, env,
     * syntax and bounds. */
    c->nurls = c->nheaders = 0;
    char **nargv = calloc((size_t)argc * 2 + 2, sizeof *nargv);
    if (!nargv) {
        snprintf(err, errlen, "out of memory");
        return CFG_ERR;
    }
    int nargc = 0, rc = CFG_ERR, only_pos = 0;
    nargv[nargc++] = argv[0];
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            if (add_repeat(c, "url", a, err, errlen))
                goto out;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            lg_conf_usage(stdout, argv[0]);
            rc = CFG_HELP;
            goto out;
        }
        const char *name;
        char *val = NULL;
        int si = -1;
        char longbuf[64];
        if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t nl = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
            if (nl >= sizeof longbuf) {
                snprintf(err, errlen, "unknown option '%s' (see --help)", a);
                goto out;
            }
            memcpy(longbuf, a + 2, nl);
            longbuf[nl] = '\0';
            name = longbuf;
            if (eq)
                val = (char *)eq + 1;
            if (!eq && is_bool_opt(name, nl)) {
                nargv[nargc++] = a;
                nargv[nargc++] = "true";
                continue;
            }
            if (strcmp(name, "url") != 0 && strcmp(name, "header") != 0) {
                /* cfg_parse handles it; carry the separate value along */
                nargv[nargc++] = a;
                if (!eq && i + 1 < argc)
                    nargv[nargc++] = argv[++i];
                continue;
            }
        } else {
            si = short_index(a[1]);
            name = si >= 0 ? lg_short[si].name : NULL;
            if (!name) {
                snprintf(err, errlen, "unknown option '%s' (see --help)", a);
                goto out;
            }
            if (a[2])
                val = a + 2;
        }
        if (!val) {
            if (i + 1 >= argc) {
                snprintf(err, errlen, "option '%s' needs a value", a);
                goto out;
            }
            val = argv[++i];
        }
        if (strcmp(name, "url") == 0 || strcmp(name, "header") == 0) {
            if (add_repeat(c, name, val, err, errlen))
                goto out;
            continue;
        }
        /* short flag: hand over as "--name" "value" */
        nargv[nargc++] = (char *)lg_short[si].dashed;
        nargv[nargc++] = val;
    }
    rc = cfg_parse(lg_opts, NPARSED, c, nargc, nargv, summary, err, errlen);
    if (rc == CFG_OK && c->nurls == 0) {
        snprintf(err, errlen, "no URL given (see --help)");
        rc = CFG_ERR;
    }
out:
    free(nargv);
    return rc;
}

int lg_url_parse(const char *url, struct lg_url *u, char *err, size_t errlen)
{
    memset(u, 0, sizeof *u);
    if (strncasecmp(url, "http://", 7) != 0) {
        snprintf(err, errlen, "URL '%s': only http:// is supported", url);
        return -1;
    }
    const char *h = url + 7, *hend, *p;
    if (*h == '[') {
        hend = strchr(h, ']');
        if (!hend) {
            snprintf(err, errlen, "URL '%s': unterminated [IPv6] host", url);
            return -1;
        }
        h++;
        p = hend + 1;
    } else {
        hend = h + strcspn(h, ":/?#");
        p = hend;
    }
    size_t hl = (size_t)(hend - h);
    if (hl == 0 || hl >= sizeof u->host) {
        snprintf(err, errlen, "URL '%s': bad host", url);
        return -1;
    }
    memcpy(u->host, h, hl);
    strcpy(u->port, "80");
    if (*p == ':') {
        p++;
        size_t pl = strspn(p, "0123456789");
        long port = pl && pl < 6 ? strtol(p, NULL, 10) : 0;
        if (port < 1 || port > 65535 || (p[pl] && !strchr("/?#", p[pl]))) {
            snprintf(err, errlen, "URL '%s': bad port", url);
            return -1;
        }
        snprintf(u->port, sizeof u->port, "%ld", port);
        p += pl;
    } else if (*p && !strchr("/?#", *p)) {
        snprintf(err, errlen, "URL '%s': bad host", url);
        return -1;
    }
    int v6 = strchr(u->host, ':') != NULL;
    int defport = strcmp(u->port, "80") == 0;
    snprintf(u->authority, sizeof u->authority, "%s%s%s%s%s", v6 ? "[" : "", u->host,
             v6 ? "]" : "", defport ? "" : ":", defport ? "" : u->port);
    size_t pl = strcspn(p, "#");
    for (size_t i = 0; i < pl; i++) {
        if ((unsigned char)p[i] <= ' ' || p[i] == 0x7f) {
            snprintf(err, errlen, "URL '%s': spaces or control characters in the path", url);
            return -1;
        }
    }
    if (pl == 0) {
        u->path = "/";
        u->pathlen = 1;
    } else if (*p == '?') {
        /* "http://h?x=1" means "/?x=1": keep the query, the "/" is added
         * when the head is built */
        u->path = p;
        u->pathlen = pl;
    } else {
        u->path = p;
        u->pathlen = pl;
    }
    return 0;
}

static int header_named(const char *h, const char *name)
{
    size_t n = strlen(name);
    return strncasecmp(h, name, n) == 0 && h[n] == ':';
}

static int read_file(const char *path, char **out, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "--body-file %.200s: cannot open", path);
        return -1;
    }
    char *buf = malloc(LG_BODY_FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    size_t n = fread(buf, 1, LG_BODY_FILE_MAX + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || n > LG_BODY_FILE_MAX) {
        free(buf);
        snprintf(err, errlen, "--body-file %.200s: %s", path,
                 bad ? "read error" : "larger than 1 MiB");
        return -1;
    }
    *out = buf;
    *len = n;
    return 0;
}

static int build_head(struct lg_plan *p, struct lg_target *t, const struct lg_conf *c,
                      const char *method, int has_ctype)
{
    size_t cap = 64 + strlen(method) + t->url.pathlen + strlen(t->url.authority);
    for (size_t i = 0; i < c->nheaders; i++)
        cap += strlen(c->headers[i]) + 2;
    cap += 64;
    char *s = malloc(cap);
    if (!s)
        return -1;
    int has_host = 0;
    for (size_t i = 0; i < c->nheaders; i++)
        has_host |= header_named(c->headers[i], "host");
    size_t o = (size_t)snprintf(s, cap, "%s %s%.*s HTTP/1.1\r\n", method,
                                t->url.path[0] == '?' ? "/" : "", (int)t->url.pathlen,
                                t->url.path);
    if (!has_host)
        o += (size_t)snprintf(s + o, cap - o, "Host: %s\r\n", t->url.authority);
    for (size_t i = 0; i < c->nheaders; i++)
        o += (size_t)snprintf(s + o, cap - o, "%s\r\n", c->headers[i]);
    if (p->body && !has_ctype)
        o += (size_t)snprintf(s + o, cap - o, "Content-Type: application/json\r\n");
    o += (size_t)snprintf(s + o, cap - o, "%s", p->send_clen ? "Content-Length: " : "\r\n");
    t->head = lg_tmpl_compile(s, o);
    free(s);
    if (!t->head)
        return -1;
    if (t->head->err) {
        snprintf(p->errstr, sizeof p->errstr, "URL/header template: %s", t->head->errstr);
        p->err = 1;
    }
    return 0;
}

struct lg_plan *lg_plan_create(const struct lg_conf *c, int resolve)
{
    struct lg_plan *p = calloc(1, sizeof *p);
    char *fbody = NULL;
    if (!p)
        return NULL;
    p->err = 1;   /* cleared at the end */
    if (c->threads > c->connections) {
        snprintf(p->errstr, sizeof p->errstr, "--threads (%ld) above --connections (%ld)",
                 c->threads, c->connections);
        goto out;
    }
    if ((size_t)c->connections < c->nurls) {
        snprintf(p->errstr, sizeof p->errstr,
                 "%zu URLs need at least as many connections (-c %ld)", c->nurls,
                 c->connections);
        goto out;
    }
    if (strcmp(c->progress, "auto") && strcmp(c->progress, "on") && strcmp(c->progress, "off")) {
        snprintf(p->errstr, sizeof p->errstr, "--progress must be auto, on or off");
        goto out;
    }
    if (c->body[0] && c->body_file[0]) {
        snprintf(p->errstr, sizeof p->errstr, "--body and --body-file are exclusive");
        goto out;
    }
    const char *method = c->method[0] ? c->method : (c->body[0] || c->body_file[0]) ? "POST" : "GET";
    for (const char *m = method; *m; m++) {
        if (!isupper((unsigned char)*m) && *m != '-' && *m != '_') {
            snprintf(p->errstr, sizeof p->errstr, "--method '%s': use an upper-case token", method);
            goto out;
        }
    }
    int has_ctype = 0;
    for (size_t i = 0; i < c->nheaders; i++) {
        const char *h = c->headers[i];
        const char *colon = strchr(h, ':');
        if (!colon || colon == h || strpbrk(h, "\r\n") || strcspn(h, " \t") < (size_t)(colon - h)) {
            snprintf(p->errstr, sizeof p->errstr, "header '%.64s': use 'Name: value'", h);
            goto out;
        }
        if (header_named(h, "content-length") || header_named(h, "transfer-encoding")) {
            snprintf(p->errstr, sizeof p->errstr, "header '%.64s' is set by loadgen", h);
            goto out;
        }
        has_ctype |= header_named(h, "content-type");
    }
    const char *btext = c->body;
    size_t blen = strlen(c->body);
    if (c->body_file[0]) {
        if (read_file(c->body_file, &fbody, &blen, p->errstr, sizeof p->errstr))
            goto out;
        btext = fbody;
    }
    if (blen) {
        p->body = lg_tmpl_compile(btext, blen);
        if (!p->body)
            goto oom;
        if (p->body->err) {
            snprintf(p->errstr, sizeof p->errstr, "body template: %s", p->body->errstr);
            goto out;
        }
    }
    p->head_method = strcmp(method, "HEAD") == 0;
    p->send_clen = blen || !strcmp(method, "POST") || !strcmp(method, "PUT") ||
                   !strcmp(method, "PATCH");
    p->threads = (unsigned)c->threads;
    p->connections = (unsigned)c->connections;
    p->requests = (uint64_t)c->requests;
    p->duration_us = (uint64_t)c->duration_ms * 1000;
    if (!p->requests && !p->duration_us)
        p->duration_us = 10 * 1000000ull;
    p->timeout_us = (uint64_t)c->timeout_ms * 1000;
    p->seq_start = (uint64_t)c->seq_start;
    p->rate = (double)c->rate;
    p->history = c->history[0] ? c->history : NULL;
    p->seed = (uint64_t)c->seed;
    p->retries = (unsigned)c->retries;
    p->retry_new_ids = c->retry_new_ids;
    if (p->retry_new_ids && !p->retries) {
        snprintf(p->errstr, sizeof p->errstr, "--retry-new-ids needs --retries N (N > 0)");
        goto out;
    }
    p->progress = !strcmp(c->progress, "on") || (!strcmp(c->progress, "auto") && isatty(2));
    p->targets = calloc(c->nurls, sizeof *p->targets);
    if (!p->targets)
        goto oom;
    p->ntargets = c->nurls;
    size_t head_max = 0;
    for (size_t i = 0; i < c->nurls; i++) {
        struct lg_target *t = &p->targets[i];
        if (lg_url_parse(c->urls[i], &t->url, p->errstr, sizeof p->errstr))
            goto out;
        if (build_head(p, t, c, method, has_ctype))
            goto oom;
        if (p->err && t->head->err)
            goto out;
        if (t->head->max_len > head_max)
            head_max = t->head->max_len;
        if (!resolve)
            continue;
        struct addrinfo hints = {0}, *res = NULL;
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        int gr = getaddrinfo(t->url.host, t->url.port, &hints, &res);
        if (gr || !res) {
            snprintf(p->errstr, sizeof p->errstr, "cannot resolve '%s': %s", t->url.host,
                     gai_strerror(gr));
            goto out;
        }
        memcpy(&t->addr, res->ai_addr, res->ai_addrlen);
        t->addrlen = res->ai_addrlen;
        freeaddrinfo(res);
    }
    /* head + Content-Length digits + CRLF CRLF + body */
    p->req_max = head_max + 24 + (p->body ? p->body->max_len : 0);
    p->err = 0;
    p->errstr[0] = '\0';
    goto out;
oom:
    snprintf(p->errstr, sizeof p->errstr, "out of memory");
out:
    free(fbody);
    return p;
}

void lg_plan_free(struct lg_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; p->targets && i < p->ntargets; i++)
        lg_tmpl_free(p->targets[i].head);
    free(p->targets);
    lg_tmpl_free(p->body);
    free(p);
}

void lg_raise_nofile(unsigned need)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need + 64) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}
