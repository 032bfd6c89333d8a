/* The operation log behind loadgen --history (see lg_oplog.h). */
#include "lg_oplog.h"

#include <stdlib.h>
#include <string.h>

#include "lg_http.h"

#define LG_OPLOG_FIRST 4096

long lg_oplog_begin(struct lg_oplog *l, uint32_t process, uint64_t seq, uint64_t rng,
                    uint64_t now_us)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : LG_OPLOG_FIRST;
        struct lg_op *ops = realloc(l->ops, cap * sizeof *ops);
        if (!ops) {
            l->dropped++;
            return -1;
        }
        l->ops = ops;
        l->cap = cap;
    }
    struct lg_op *op = &l->ops[l->n];
    memset(op, 0, sizeof *op);
    op->invoke_ns = now_us * 1000u;
    op->process = process;
    op->seq = seq;
    op->rng = rng;
    return (long)l->n++;
}

/* "remaining":<integer> in a JSON body prefix; 1 when found. */
static int find_remaining(const char *body, size_t len, int64_t *out)
{
    static const char key[] = "\"remaining\"";
    const size_t kl = sizeof key - 1;
    for (size_t i = 0; i + kl < len; i++) {
        if (body[i] != '"' || memcmp(body + i, key, kl) != 0)
            continue;
        size_t j = i + kl;
        while (j < len && (body[j] == ' ' || body[j] == ':'))
            j++;
        int neg = j < len && body[j] == '-';
        j += (size_t)neg;
        if (j >= len || body[j] < '0' || body[j] > '9')
            return 0;
        int64_t v = 0;
        while (j < len && body[j] >= '0' && body[j] <= '9')
            v = v * 10 + (body[j++] - '0');
        *out = neg ? -v : v;
        return 1;
    }
    return 0;
}

void lg_oplog_answer(struct lg_oplog *l, long i, uint64_t now_us, int status,
                     const char *body, size_t len)
{
    if (i < 0)
        return;
    struct lg_op *op = &l->ops[i];
    op->complete_ns = now_us * 1000u;
    op->status = (uint16_t)(status > 0 && status < 1000 ? status : 0);
    if (status >= 200 && status < 300)
        op->has_remaining = (uint8_t)find_remaining(body, len, &op->remaining);
    else
        lg_http_error_code(body, len, op->error, sizeof op->error);
}

void lg_oplog_fail(struct lg_oplog *l, long i, uint64_t now_us, enum lg_op_fail why)
{
    if (i < 0)
        return;
    l->ops[i].complete_ns = why == LG_OP_IN_FLIGHT ? 0 : now_us * 1000u;
    l->ops[i].fail = (uint8_t)why;
}

const char *lg_op_outcome(const struct lg_op *op)
{
    if (op->fail != LG_OP_ANSWERED)
        return "indeterminate";
    if (op->status >= 200 && op->status < 300)
        return "ok";
    if (op->status == 503 && strcmp(op->error, "backend_unavailable") == 0)
        return "indeterminate";
    if ((op->status >= 400 && op->status < 500) || op->status == 503)
        return "refused";
    return "indeterminate";
}

static const char *fail_name(unsigned why)
{
    static const char *names[] = {"", "read", "write", "timeout", "parse", "in_flight"};
    return why < sizeof names / sizeof names[0] ? names[why] : "";
}

/* The raw JSON value of "key" in an object's text: a string with its
 * quotes, or a number; NULL when absent. The body was written by the user
 * as JSON, so a string's escapes can be copied as they are. */
static const char *json_field(const char *s, size_t len, const char *key, size_t *vlen)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i + kl + 2 < len; i++) {
        if (s[i] != '"' || memcmp(s + i + 1, key, kl) != 0 || s[i + kl + 1] != '"')
            continue;
        size_t j = i + kl + 2;
        while (j < len && (s[j] == ' ' || s[j] == ':' || s[j] == '\t'))
            j++;
        size_t k = j;
        if (k < len && s[k] == '"') {
            for (k++; k < len && s[k] != '"'; k++)
                if (s[k] == '\\')
                    k++;
            if (k >= len)
                return NULL;
            k++;
        } else {
            while (k < len && ((s[k] >= '0' && s[k] <= '9') || s[k] == '-'))
                k++;
        }
        if (k == j)
            return NULL;
        *vlen = k - j;
        return s + j;
    }
    return NULL;
}

static void put_field(FILE *out, const char *name, const char *body, size_t blen)
{
    size_t vl = 0;
    const char *v = body ? json_field(body, blen, name, &vl) : NULL;
    if (v)
        fprintf(out, ",\"%s\":%.*s", name, (int)vl, v);
    else
        fprintf(out, ",\"%s\":null", name);
}

int lg_oplog_write(FILE *out, const struct lg_oplog *l, const struct lg_tmpl *body,
                   unsigned thread, char *scratch)
{
    for (size_t i = 0; i < l->n; i++) {
        const struct lg_op *op = &l->ops[i];
        long blen = 0;
        if (body) {
            uint64_t rng = op->rng;
            struct lg_tmpl_vars v = {.seq = op->seq, .thread = thread, .rng = &rng};
            blen = lg_tmpl_expand(body, &v, scratch, body->max_len);
        }
        fprintf(out, "{\"process\":%u,\"invoke_ns\":%llu,", op->process,
                (unsigned long long)op->invoke_ns);
        if (op->complete_ns)
            fprintf(out, "\"complete_ns\":%llu", (unsigned long long)op->complete_ns);
        else
            fprintf(out, "\"complete_ns\":null");
        const char *b = body && blen > 0 ? scratch : NULL;
        put_field(out, "sku", b, (size_t)blen);
        put_field(out, "qty", b, (size_t)blen);
        put_field(out, "order_id", b, (size_t)blen);
        fprintf(out, ",\"outcome\":\"%s\",\"status\":%u", lg_op_outcome(op), op->status);
        if (op->has_remaining)
            fprintf(out, ",\"remaining\":%lld", (long long)op->remaining);
        else
            fprintf(out, ",\"remaining\":null");
        const char *err = op->fail ? fail_name(op->fail) : op->error;
        if (err[0])
            fprintf(out, ",\"error\":\"%s\"}\n", err);
        else
            fprintf(out, ",\"error\":null}\n");
    }
    return ferror(out) ? -1 : 0;
}

int lg_oplog_write_file(const char *path, const struct lg_oplog_part *parts, size_t n,
                        const struct lg_tmpl *body)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int rc = f ? 0 : -1;
    uint64_t dropped = 0;
    for (size_t i = 0; f && rc == 0 && i < n; i++) {
        rc = lg_oplog_write(f, parts[i].log, body, parts[i].thread, parts[i].scratch);
        dropped += parts[i].log->dropped;
    }
    if (f && fclose(f) != 0)
        rc = -1;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -1;
    if (rc != 0) {
        fprintf(stderr, "loadgen: cannot write --history %s\n", path);
        remove(tmp);
    } else if (dropped) {
        fprintf(stderr, "loadgen: --history lacks %llu operations (out of memory)\n",
                (unsigned long long)dropped);
    }
    return rc;
}

void lg_oplog_free(struct lg_oplog *l)
{
    if (!l)
        return;
    free(l->ops);
    l->ops = NULL;
    l->n = l->cap = 0;
}
