/* Human summary (stdout) and machine summary (--json FILE) of a run. */
#ifndef LG_REPORT_H
#define LG_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "lg_run.h"
#include "lg_stats.h"

struct lg_report_info {
    const struct lg_plan *plan;
    double elapsed_s;
    int interrupted;      /* stopped by SIGINT */
    int latency_dist;     /* include the full distribution */
    const struct lg_timeline *timeline;  /* NULL: no "timeline" in the JSON */
};

/* The progress line (\r, cleared): seconds since the start, requests so
 * far, the rate since the last line and the socket errors. */
void lg_report_progress(FILE *out, double t_s, uint64_t requests, double rate, uint64_t errors);

/* Write the human summary. */
void lg_report_text(FILE *out, const struct lg_stats *s, const struct lg_report_info *ri);

/* Write the JSON summary to out (one object, trailing newline). */
void lg_report_json(FILE *out, const struct lg_stats *s, const struct lg_report_info *ri);

/* lg_report_json into path (written to path.tmp, then renamed). Returns 0,
 * or -1 with errno set. */
int lg_report_json_file(const char *path, const struct lg_stats *s,
                        const struct lg_report_info *ri);

#endif
