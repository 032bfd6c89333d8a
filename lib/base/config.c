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

/* One row of the flattened groups. */
struct cfg_row {
    const struct cfg_opt *opt;
    void *conf;
};

static void print_row(FILE *out, const struct cfg_opt *o)
{
    fprintf(out, "  --%-20s %-22s %-16s %s\n", o->name, o->env ? o->env : "-",
            o->def && *o->def ? o->def : "\"\"", o->help);
}

static void usage_rows(FILE *out, const char *prog, const char *summary,
                       const struct cfg_row *rows, size_t n)
{
    fprintf(out, "usage: %s [options]\n%s\n\noptions (flag / environment / default):\n",
            prog, summary ? summary : "");
    for (size_t i = 0; i < n; i++)
        print_row(out, rows[i].opt);
    fprintf(out, "  --%-20s %-22s %-16s %s\n", "help", "-", "-", "print this table");
}

void cfg_usage(FILE *out, const char *prog, const char *summary,
               const struct cfg_opt *opts, size_t nopts)
{
    struct cfg_row rows[CFG_MAX_OPTS];
    size_t n = nopts < CFG_MAX_OPTS ? nopts : CFG_MAX_OPTS;
    for (size_t i = 0; i < n; i++)
        rows[i] = (struct cfg_row){&opts[i], NULL};
    usage_rows(out, prog, summary, rows, n);
}

static int parse_rows(const struct cfg_row *rows, size_t n, int argc, char **argv,
                      const char *summary, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++)
        if (set_one(rows[i].opt, rows[i].conf, rows[i].opt->def ? rows[i].opt->def : "",
                    "default", err, errlen) != CFG_OK)
            return CFG_ERR;
    for (size_t i = 0; i < n; i++) {
        const char *v = rows[i].opt->env ? getenv(rows[i].opt->env) : NULL;
        if (v && set_one(rows[i].opt, rows[i].conf, v, rows[i].opt->env, err, errlen) != CFG_OK)
            return CFG_ERR;
    }

    struct option longopts[CFG_MAX_OPTS + 2];
    for (size_t i = 0; i < n; i++)
        longopts[i] = (struct option){rows[i].opt->name, required_argument, NULL, (int)i + 256};
    longopts[n] = (struct option){"help", no_argument, NULL, 'h'};
    longopts[n + 1] = (struct option){0, 0, 0, 0};

    optind = 0;   /* 0, not 1: also resets glibc's state from an earlier parse */
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        if (c == 'h') {
            usage_rows(stdout, argv[0], summary, rows, n);
            return CFG_HELP;
        }
        if (c < 256 || (size_t)(c - 256) >= n) {
            snprintf(err, errlen, "unknown or incomplete option '%s' (see --help)",
                     argv[optind - 1]);
            return CFG_ERR;
        }
        if (set_one(rows[c - 256].opt, rows[c - 256].conf, optarg, "flag", err, errlen) != CFG_OK)
            return CFG_ERR;
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
        return CFG_ERR;
    }
    return CFG_OK;
}

int cfg_parse_groups(const struct cfg_group *groups, size_t ngroups, int argc, char **argv,
                     const char *summary, char *err, size_t errlen)
{
    struct cfg_row rows[CFG_MAX_OPTS];
    size_t n = 0;
    for (size_t g = 0; g < ngroups; g++) {
        for (size_t i = 0; i < groups[g].nopts; i++) {
            if (n == CFG_MAX_OPTS) {
                snprintf(err, errlen, "too many options (more than %d)", CFG_MAX_OPTS);
                return CFG_ERR;
            }
            for (size_t k = 0; k < n; k++) {
                if (strcmp(rows[k].opt->name, groups[g].opts[i].name) == 0) {
                    snprintf(err, errlen, "option --%s is defined twice",
                             groups[g].opts[i].name);
                    return CFG_ERR;
                }
            }
            rows[n++] = (struct cfg_row){&groups[g].opts[i], groups[g].conf};
        }
    }
    return parse_rows(rows, n, argc, argv, summary, err, errlen);
}

int cfg_parse(const struct cfg_opt *opts, size_t nopts, void *conf,
              int argc, char **argv, const char *summary,
              char *err, size_t errlen)
{
    struct cfg_group one = {opts, nopts, conf};
    return cfg_parse_groups(&one, 1, argc, argv, summary, err, errlen);
}
