/* Per-thread run statistics: responses by status and by JSON error code,
 * socket errors and the latency histogram; summed after join. */
#ifndef LG_STATS_H
#define LG_STATS_H

#include <stdint.h>

#include "lg_hist.h"

#define LG_STATUS_MAX 600   /* by_status index; 0 holds out-of-range codes */
#define LG_CODES_MAX  32    /* distinct error codes kept, the rest are "other" */
#define LG_CODE_LEN   48

struct lg_code_count {
    char name[LG_CODE_LEN];
    uint64_t count;
};

struct lg_stats {
    uint64_t requests;        /* complete responses, any status */
    uint64_t by_status[LG_STATUS_MAX];
    struct lg_code_count codes[LG_CODES_MAX];
    unsigned ncodes;
    uint64_t codes_other;     /* responses whose code did not fit the table */
    uint64_t err_connect, err_read, err_write, err_timeout, err_parse;
    uint64_t reconnects;      /* new connections after the first, any cause */
    uint64_t retries;         /* requests sent again after a timeout or a reset (--retries) */
    uint64_t in_flight;       /* requests still unanswered when the run ended */
    uint64_t bytes_read, bytes_written;
    struct lg_hist latency;   /* microseconds */
};

void lg_stats_init(struct lg_stats *s);

/* Count one response's status (out-of-range goes to slot 0). */
void lg_stats_status(struct lg_stats *s, int status);

/* Count one response's JSON error code (NUL-terminated, non-empty). */
void lg_stats_code(struct lg_stats *s, const char *code);

/* Add src into dst; codes are matched by name. */
void lg_stats_merge(struct lg_stats *dst, const struct lg_stats *src);

/* Sum of the socket error counters. */
uint64_t lg_stats_errors(const struct lg_stats *s);

#endif
