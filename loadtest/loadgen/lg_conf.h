/* loadgen's options: the cfg_opt table plus what lib/config cannot express
 * (short flags, repeatable -u/-H, positional URLs, bare boolean flags), the
 * URL parser and the construction of a run plan. */
#ifndef LG_CONF_H
#define LG_CONF_H

#include <stddef.h>
#include <stdio.h>

#include "lg_run.h"

#define LG_MAX_URLS    64
#define LG_MAX_HEADERS 64
#define LG_BODY_MAX    65536     /* -b inline body */
#define LG_BODY_FILE_MAX (1u << 20)

struct lg_conf {
    long threads, connections, requests, duration_ms, rate, timeout_ms, seq_start;
    char method[16];
    char body[LG_BODY_MAX];
    char body_file[1024];
    char json[1024];
    char history[1024];
    long seed;
    long retries;              /* re-sends of one request after a timeout or reset */
    int retry_new_ids;         /* a retry re-expands its placeholders (a careless client) */
    int latency_dist;
    char progress[8];          /* auto | on | off */
    char repeat_shown[2];      /* unused target of the -u/-H help rows */
    const char *urls[LG_MAX_URLS];
    size_t nurls;
    const char *headers[LG_MAX_HEADERS];
    size_t nheaders;
};

/* Parse argv into c (defaults < LG_* environment < flags). Returns CFG_OK,
 * CFG_HELP after printing the table to stdout, or CFG_ERR with a reason in
 * err (exit 2). c->urls/headers point into argv. */
int lg_conf_parse(struct lg_conf *c, int argc, char **argv, char *err, size_t errlen);

void lg_conf_usage(FILE *out, const char *prog);

/* Parse "http://host[:port][/path][?query]". Returns 0, or -1 with err. */
int lg_url_parse(const char *url, struct lg_url *u, char *err, size_t errlen);

/* Validate c, resolve the hosts, compile the templates, read --body-file.
 * Returns NULL only when out of memory; check plan->err / errstr (a bad
 * argument: exit 2). Free with lg_plan_free. resolve=0 skips getaddrinfo
 * (tests). */
struct lg_plan *lg_plan_create(const struct lg_conf *c, int resolve);
void lg_plan_free(struct lg_plan *p);

/* Raise RLIMIT_NOFILE to its hard limit when need (+64) descriptors do not
 * fit the soft one (the plan's connections). */
void lg_raise_nofile(unsigned need);

#endif
