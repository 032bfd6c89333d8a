/* Run summaries (see lg_report.h). */
#include "lg_report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static double ms(uint64_t us) { return (double)us / 1000.0; }

static double rps(const struct lg_stats *s, const struct lg_report_info *ri)
{
    return ri->elapsed_s > 0 ? (double)s->requests / ri->elapsed_s : 0.0;
}

static void dist_text(void *arg, uint64_t us, uint64_t count, uint64_t cum)
{
    FILE *out = ((void **)arg)[0];
    const struct lg_stats *s = ((void **)arg)[1];
    double frac = (double)cum / (double)s->latency.count;
    double inv = frac < 1.0 ? 1.0 / (1.0 - frac) : 0.0;
    fprintf(out, "  %12.3f  %10.6f  %12llu  %12llu", ms(us), frac,
            (unsigned long long)cum, (unsigned long long)count);
    if (frac < 1.0)
        fprintf(out, "  %12.2f\n", inv);
    else
        fprintf(out, "           inf\n");
}

void lg_report_text(FILE *out, const struct lg_stats *s, const struct lg_report_info *ri)
{
    const struct lg_plan *p = ri->plan;
    const struct lg_hist *h = &s->latency;
    fprintf(out, "loadgen: %u threads, %u connections, %zu URL%s, %s",
            p->threads, p->connections, p->ntargets, p->ntargets == 1 ? "" : "s",
            p->rate > 0 ? "open loop" : "closed loop");
    if (p->rate > 0)
        fprintf(out, " at %.0f req/s", p->rate);
    fprintf(out, "%s\n", ri->interrupted ? " (interrupted)" : "");
    for (size_t i = 0; i < p->ntargets; i++)
        fprintf(out, "  target        http://%s%s%.*s\n", p->targets[i].url.authority,
                p->targets[i].url.path[0] == '?' ? "/" : "", (int)p->targets[i].url.pathlen,
                p->targets[i].url.path);
    fprintf(out, "  requests      %llu in %.2f s = %.1f req/s\n",
            (unsigned long long)s->requests, ri->elapsed_s, rps(s, ri));
    fprintf(out, "  latency ms    mean %.3f  p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n",
            lg_hist_mean(h) / 1000.0, ms(lg_hist_percentile(h, 50)),
            ms(lg_hist_percentile(h, 90)), ms(lg_hist_percentile(h, 99)),
            ms(lg_hist_percentile(h, 99.9)), ms(h->max));
    if (p->rate > 0)
        fprintf(out, "                (measured from each request's intended send time)\n");
    fprintf(out, "  by status    ");
    int any = 0;
    for (int i = 0; i < LG_STATUS_MAX; i++) {
        if (!s->by_status[i])
            continue;
        fprintf(out, " %s%d: %llu", any ? " " : "", i, (unsigned long long)s->by_status[i]);
        any = 1;
    }
    fprintf(out, "%s\n", any ? "" : " none");
    if (s->ncodes || s->codes_other) {
        fprintf(out, "  by error     ");
        for (unsigned i = 0; i < s->ncodes; i++)
            fprintf(out, " %s%s: %llu", i ? " " : "", s->codes[i].name,
                    (unsigned long long)s->codes[i].count);
        if (s->codes_other)
            fprintf(out, "  other: %llu", (unsigned long long)s->codes_other);
        fprintf(out, "\n");
    }
    fprintf(out, "  socket errors connect %llu, read %llu, write %llu, timeout %llu, parse %llu; reconnects %llu\n",
            (unsigned long long)s->err_connect, (unsigned long long)s->err_read,
            (unsigned long long)s->err_write, (unsigned long long)s->err_timeout,
            (unsigned long long)s->err_parse, (unsigned long long)s->reconnects);
    if (s->retries)
        fprintf(out, "  retries %llu (requests sent again after a timeout or a reset)\n",
                (unsigned long long)s->retries);
    if (s->in_flight)
        fprintf(out, "  in flight at the end %llu (sent, never answered: they may still take effect)\n",
                (unsigned long long)s->in_flight);
    if (ri->latency_dist && h->count) {
        fprintf(out, "  latency distribution (ms, one row per histogram bucket):\n");
        fprintf(out, "  %12s  %10s  %12s  %12s  %12s\n", "value", "percentile", "total",
                "count", "1/(1-p)");
        void *arg[2] = {out, (void *)s};
        lg_hist_foreach(h, dist_text, arg);
    }
}

static void json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

static void dist_json(void *arg, uint64_t us, uint64_t count, uint64_t cum)
{
    FILE *out = ((void **)arg)[0];
    const struct lg_stats *s = ((void **)arg)[1];
    int *first = ((void **)arg)[2];
    fprintf(out, "%s[%.3f,%.6f,%llu]", *first ? "" : ",", ms(us),
            (double)cum / (double)s->latency.count, (unsigned long long)count);
    *first = 0;
}

/* "timeline": one row per second since the start: ok (2xx), errors (other
 * statuses and socket errors), sent, p99_ms of the responses completed in
 * it; open loop also "offered" (what the rate asked for in that second)
 * and, for the whole run, never_sent (offered but never written: the
 * generator or the connections could not keep up). */
static void timeline_json(FILE *out, const struct lg_report_info *ri)
{
    const struct lg_timeline *t = ri->timeline;
    const struct lg_plan *p = ri->plan;
    uint64_t sent = 0;
    double offered_total = 0;
    fprintf(out, ",\"timeline\":{\"bucket_s\":1,\"seconds\":[");
    for (size_t i = 0; i < t->used; i++) {
        const struct lg_tl_sec *s = &t->sec[i];
        sent += s->sent;
        fprintf(out, "%s{\"t\":%zu,\"ok\":%u,\"errors\":%u,\"sent\":%u,\"p99_ms\":%.3f",
                i ? "," : "", i, s->ok, s->errors, s->sent,
                (double)lg_tl_percentile(s, 99) / 1000.0);
        if (p->rate > 0) {
            /* the last second may be partial */
            double span = ri->elapsed_s - (double)i;
            double offered = p->rate * (span < 1.0 ? (span > 0 ? span : 0) : 1.0);
            /* a count-bounded run offers no more than its requests */
            if (p->requests && offered_total + offered > (double)p->requests)
                offered = (double)p->requests - offered_total;
            offered_total += offered;
            fprintf(out, ",\"offered\":%.0f", offered);
        }
        fputc('}', out);
    }
    fputc(']', out);
    if (p->rate > 0) {
        if (p->requests && offered_total > (double)p->requests)
            offered_total = (double)p->requests;
        double never = offered_total - (double)sent;
        fprintf(out, ",\"offered\":%.0f,\"never_sent\":%.0f", offered_total,
                never > 0 ? never : 0);
    }
    fprintf(out, "%s}", t->oom ? ",\"truncated\":true" : "");
}

void lg_report_json(FILE *out, const struct lg_stats *s, const struct lg_report_info *ri)
{
    const struct lg_plan *p = ri->plan;
    const struct lg_hist *h = &s->latency;
    fprintf(out, "{\"requests\":%llu,\"duration_s\":%.3f,\"rps\":%.1f,",
            (unsigned long long)s->requests, ri->elapsed_s, rps(s, ri));
    fprintf(out, "\"threads\":%u,\"connections\":%u,\"rate\":%.0f,\"interrupted\":%s,",
            p->threads, p->connections, p->rate, ri->interrupted ? "true" : "false");
    fprintf(out, "\"urls\":[");
    for (size_t i = 0; i < p->ntargets; i++) {
        char url[8192];
        snprintf(url, sizeof url, "http://%s%s%.*s", p->targets[i].url.authority,
                 p->targets[i].url.path[0] == '?' ? "/" : "", (int)p->targets[i].url.pathlen,
                 p->targets[i].url.path);
        if (i)
            fputc(',', out);
        json_str(out, url);
    }
    fprintf(out, "],\"by_status\":{");
    int any = 0;
    for (int i = 0; i < LG_STATUS_MAX; i++) {
        if (!s->by_status[i])
            continue;
        fprintf(out, "%s\"%d\":%llu", any ? "," : "", i, (unsigned long long)s->by_status[i]);
        any = 1;
    }
    fprintf(out, "},\"by_error\":{");
    for (unsigned i = 0; i < s->ncodes; i++) {
        if (i)
            fputc(',', out);
        json_str(out, s->codes[i].name);
        fprintf(out, ":%llu", (unsigned long long)s->codes[i].count);
    }
    if (s->codes_other)
        fprintf(out, "%s\"other\":%llu", s->ncodes ? "," : "",
                (unsigned long long)s->codes_other);
    fprintf(out, "},\"errors\":{\"connect\":%llu,\"read\":%llu,\"write\":%llu,"
                 "\"timeout\":%llu,\"parse\":%llu},\"reconnects\":%llu,\"in_flight\":%llu,"
                 "\"retries\":%llu,",
            (unsigned long long)s->err_connect, (unsigned long long)s->err_read,
            (unsigned long long)s->err_write, (unsigned long long)s->err_timeout,
            (unsigned long long)s->err_parse, (unsigned long long)s->reconnects,
            (unsigned long long)s->in_flight, (unsigned long long)s->retries);
    fprintf(out, "\"bytes\":{\"read\":%llu,\"written\":%llu},",
            (unsigned long long)s->bytes_read, (unsigned long long)s->bytes_written);
    fprintf(out, "\"latency_ms\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"p999\":%.3f,"
                 "\"max\":%.3f,\"mean\":%.3f,\"min\":%.3f}",
            ms(lg_hist_percentile(h, 50)), ms(lg_hist_percentile(h, 90)),
            ms(lg_hist_percentile(h, 99)), ms(lg_hist_percentile(h, 99.9)), ms(h->max),
            lg_hist_mean(h) / 1000.0, ms(h->min));
    if (ri->timeline)
        timeline_json(out, ri);
    if (ri->latency_dist) {
        int first = 1;
        void *arg[3] = {out, (void *)s, &first};
        fprintf(out, ",\"latency_dist\":[");
        lg_hist_foreach(h, dist_json, arg);
        fprintf(out, "]");
    }
    fprintf(out, "}\n");
}

int lg_report_json_file(const char *path, const struct lg_stats *s,
                        const struct lg_report_info *ri)
{
    size_t n = strlen(path) + 5;
    char *tmp = malloc(n);
    if (!tmp)
        return -1;
    snprintf(tmp, n, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        goto err;
    lg_report_json(f, s, ri);
    if (fclose(f) != 0)
        goto err_unlink;
    if (rename(tmp, path) != 0)
        goto err_unlink;
    free(tmp);
    return 0;
err_unlink:
    {
        int e = errno;
        remove(tmp);
        errno = e;
    }
err:
    free(tmp);
    return -1;
}

void lg_report_progress(FILE *out, double t_s, uint64_t requests, double rate, uint64_t errors)
{
    fprintf(out, "\r\033[K  %6.1fs  %12llu requests  %10.0f req/s  %llu errors", t_s,
            (unsigned long long)requests, rate, (unsigned long long)errors);
    fflush(out);
}
