/* Option-table parsing shared by all binaries (see config.h). */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CFG_MAX_OPTS 64

int cfg_parse_number(const char *text, enum cfg_type type, long *out)
{
    if (!text || !*text)
        return CFG_ERR;
    if (type == CFG_BOOL) {
        static const char *yes[] = {"1", "true", "yes", "on"};
        static const char *no[] = {"0", "false", "no", "off"};
        for (size_t i = 0; i < 4; i++) {
            if (strcasecmp(text, yes[i]) == 0) { *out = 1; return CFG_OK; }
            if (strcasecmp(text, no[i]) == 0) { *out = 0; return CFG_OK; }
        }
        return CFG_ERR;
    }
    errno = 0;
    char *end;
    long v = strtol(text, &end, 10);
    if (errno || end == text)
        return CFG_ERR;
    long mul = 1;
    if (type == CFG_INT) {
        if (*end == 'k' || *end == 'K') { mul = 1000; end++; }
        else if (*end == 'm' || *end == 'M') { mul = 1000000; end++; }
    } else if (type == CFG_MS) {
        if (strcmp(end, "ms") == 0) { end += 2; }
        else if (strcmp(end, "s") == 0) { mul = 1000; end++; }
        else if (strcmp(end, "m") == 0) { mul = 60000; end++; }
    } else {
        return CFG_ERR;
    }
    if (*end)
        return CFG_ERR;
    if (v > LONG_MAX / mul || v < LONG_MIN / mul)
        return CFG_ERR;
    *out = v * mul;
    return CFG_OK;
}

static int set_one(const struct cfg_opt *o, void *conf, const char *val,
                   const char *origin, char *err, size_t errlen)
{
    char *field = (char *)conf + o->offset;
    if (o->type == CFG_STR) {
        size_t n = strlen(val);
        if (n >= o->size) {
            snprintf(err, errlen, "%s --%s: value longer than %zu bytes",
                     origin, o->name, o->size - 1);
            return CFG_ERR;
        }
        memcpy(field, val, n + 1);
        return CFG_OK;
    }
    long v;
    if (cfg_parse_number(val, o->type, &v) != CFG_OK) {
        snprintf(err, errlen, "%s --%s: cannot parse '%s'%s", origin, o->name,
                 val, o->type == CFG_MS ? " (use e.g. 500ms, 2s, 1m)" :
                      o->type == CFG_BOOL ? " (use true/false)" : "");
        return CFG_ERR;
    }
    if (o->type == CFG_BOOL) {
        *(int *)field = (int)v;
        return CFG_OK;
    }
    if (v < o->min || v > o->max) {
        snprintf(err, errlen, "%s --%s: %ld is outside %ld..%ld", origin,
                 o->name, v, o->min, o->max);
        return CFG_ERR;
    }
    *(long *)field = v;
    return CFG_OK;
}

void cfg_usage(FILE *out, const char *prog, const char *summary,
               const struct cfg_opt *opts, size_t nopts)
{
    fprintf(out, "usage: %s [options]\n%s\n\noptions (flag / environment / default):\n",
            prog, summary ? summary : "");
    for (size_t i = 0; i < nopts; i++) {
        const struct cfg_opt *o = &opts[i];
        fprintf(out, "  --%-20s %-22s %-16s %s\n", o->name,
                o->env ? o->env : "-", o->def && *o->def ? o->def : "\"\"",
                o->help);
    }
    fprintf(out, "  --%-20s %-22s %-16s %s\n", "help", "-", "-", "print this table");
}

int cfg_parse(const struct cfg_opt *opts, size_t nopts, void *conf,
              int argc, char **argv, const char *summary,
              char *err, size_t errlen)
{
    if (nopts > CFG_MAX_OPTS) {
        snprintf(err, errlen, "too many options (%zu)", nopts);
        return CFG_ERR;
    }
    for (size_t i = 0; i < nopts; i++)
        if (set_one(&opts[i], conf, opts[i].def ? opts[i].def : "", "default",
                    err, errlen) != CFG_OK)
            return CFG_ERR;
    for (size_t i = 0; i < nopts; i++) {
        const char *v = opts[i].env ? getenv(opts[i].env) : NULL;
        if (v && set_one(&opts[i], conf, v, opts[i].env, err, errlen) != CFG_OK)
            return CFG_ERR;
    }

    struct option longopts[CFG_MAX_OPTS + 2];
    for (size_t i = 0; i < nopts; i++)
        longopts[i] = (struct option){opts[i].name, required_argument, NULL, (int)i + 256};
    longopts[nopts] = (struct option){"help", no_argument, NULL, 'h'};
    longopts[nopts + 1] = (struct option){0, 0, 0, 0};

    optind = 0;   /* 0, not 1: also resets glibc's state from an earlier parse */
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        if (c == 'h') {
            cfg_usage(stdout, argv[0], summary, opts, nopts);
            return CFG_HELP;
        }
        if (c < 256 || (size_t)(c - 256) >= nopts) {
            snprintf(err, errlen, "unknown or incomplete option '%s' (see --help)",
                     argv[optind - 1]);
            return CFG_ERR;
        }
        if (set_one(&opts[c - 256], conf, optarg, "flag", err, errlen) != CFG_OK)
            return CFG_ERR;
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
        return CFG_ERR;
    }
    return CFG_OK;
}
