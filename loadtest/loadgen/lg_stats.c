/* Run statistics (see lg_stats.h). */
#include "lg_stats.h"

#include <string.h>

void lg_stats_init(struct lg_stats *s)
{
    memset(s, 0, sizeof *s);
    lg_hist_init(&s->latency);
}

void lg_stats_status(struct lg_stats *s, int status)
{
    if (status < 0 || status >= LG_STATUS_MAX)
        status = 0;
    s->by_status[status]++;
}

static void code_add(struct lg_stats *s, const char *code, uint64_t n)
{
    for (unsigned i = 0; i < s->ncodes; i++) {
        if (strcmp(s->codes[i].name, code) == 0) {
            s->codes[i].count += n;
            return;
        }
    }
    if (s->ncodes == LG_CODES_MAX) {
        s->codes_other += n;
        return;
    }
    struct lg_code_count *c = &s->codes[s->ncodes++];
    size_t l = strlen(code);
    if (l >= LG_CODE_LEN)
        l = LG_CODE_LEN - 1;
    memcpy(c->name, code, l);
    c->name[l] = '\0';
    c->count = n;
}

void lg_stats_code(struct lg_stats *s, const char *code)
{
    code_add(s, code, 1);
}

void lg_stats_merge(struct lg_stats *dst, const struct lg_stats *src)
{
    dst->requests += src->requests;
    for (int i = 0; i < LG_STATUS_MAX; i++)
        dst->by_status[i] += src->by_status[i];
    for (unsigned i = 0; i < src->ncodes; i++)
        code_add(dst, src->codes[i].name, src->codes[i].count);
    dst->codes_other += src->codes_other;
    dst->err_connect += src->err_connect;
    dst->err_read += src->err_read;
    dst->err_write += src->err_write;
    dst->err_timeout += src->err_timeout;
    dst->err_parse += src->err_parse;
    dst->reconnects += src->reconnects;
    dst->retries += src->retries;
    dst->in_flight += src->in_flight;
    dst->bytes_read += src->bytes_read;
    dst->bytes_written += src->bytes_written;
    lg_hist_merge(&dst->latency, &src->latency);
}

uint64_t lg_stats_errors(const struct lg_stats *s)
{
    return s->err_connect + s->err_read + s->err_write + s->err_timeout + s->err_parse;
}
