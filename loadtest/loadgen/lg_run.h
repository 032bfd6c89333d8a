/* The load engine: N threads, each an epoll loop over its share of C
 * keep-alive connections (wrk's model), closed loop or constant rate with
 * latency from the intended send time (wrk2's model). */
#ifndef LG_RUN_H
#define LG_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "lg_stats.h"
#include "lg_timeline.h"
#include "lg_tmpl.h"

struct lg_url {
    char host[256];        /* without brackets for IPv6 literals */
    char port[8];
    char authority[300];   /* Host header value: host[:port], [v6][:port] */
    const char *path;      /* points into the URL text; "/" when empty */
    size_t pathlen;
};

struct lg_target {
    struct lg_url url;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    struct lg_tmpl *head;  /* request line + headers, up to Content-Length: */
};

struct lg_plan {
    int err;
    char errstr[256];
    struct lg_target *targets;
    size_t ntargets;
    struct lg_tmpl *body;  /* NULL when the request has no body */
    int send_clen;         /* head ends in "Content-Length: " */
    int head_method;       /* HEAD: responses carry no body */
    unsigned threads;
    unsigned connections;  /* total, spread over threads */
    uint64_t requests;     /* 0: unbounded */
    uint64_t duration_us;  /* 0: unbounded */
    uint64_t timeout_us;
    uint64_t seq_start;
    double rate;           /* total req/s, 0: closed loop */
    int progress;          /* print a progress line on stderr */
    size_t req_max;        /* bound of one expanded request */
    struct lg_timeline *timeline;  /* NULL, or filled by lg_run (caller frees with lg_tl_free) */
    const char *history;   /* NULL, or --history FILE: every operation, written after join */
    uint64_t seed;         /* random state of {rand}/{zipf}/{uuid}; 0: from the clock */
    unsigned retries;      /* --retries: re-sends of a request that timed out or was reset */
    int retry_new_ids;     /* --retry-new-ids: a retry expands its templates again */
};

/* Run the plan to completion (count, duration, every connection given up,
 * or lg_run_stop). Fills *out with the merged statistics and *elapsed_s with
 * the wall time, and writes plan->history when set. Returns 0, or -1 when
 * threads or memory could not be had, or the history could not be written
 * (errstr in plan is not touched; a message goes to stderr). */
int lg_run(const struct lg_plan *plan, struct lg_stats *out, double *elapsed_s);

/* Ask a running lg_run to stop; async-signal-safe. */
void lg_run_stop(void);

/* Monotonic clock in microseconds. */
uint64_t lg_now_us(void);

#endif
