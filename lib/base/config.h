/* Option tables: one row per option (flag, env twin, default, bounds), parsed
 * in the order default < environment < command line, as redis config.c and
 * wrk's scan_time do. Shared by every binary so `--help` always matches. */
#ifndef LAB_CONFIG_H
#define LAB_CONFIG_H

#include <stddef.h>
#include <stdio.h>

enum cfg_type {
    CFG_STR,   /* char[size] inside the config struct, bounded copy */
    CFG_INT,   /* long; accepts k/m suffixes (1k = 1000) */
    CFG_MS,    /* long milliseconds; accepts ms, s, m suffixes (bare = ms) */
    CFG_BOOL,  /* int 0/1; accepts 1/0/true/false/yes/no/on/off */
};

struct cfg_opt {
    const char *name;    /* long flag without dashes: "port" -> --port */
    const char *env;     /* environment twin, NULL for none */
    enum cfg_type type;
    const char *def;     /* default, as text, parsed like user input */
    long min, max;       /* bounds for CFG_INT / CFG_MS */
    size_t offset;       /* offsetof(struct your_conf, field) */
    size_t size;         /* buffer size for CFG_STR */
    const char *help;
};

/* Several tables parsed as one (a service's own and its plug-ins'): each
 * row's offset applies to its group's conf. */
struct cfg_group {
    const struct cfg_opt *opts;
    size_t nopts;
    void *conf;
};

#define CFG_OK    0
#define CFG_ERR  -1
#define CFG_HELP  1

/* Fill `conf` from defaults, then environment, then argv. Returns CFG_OK,
 * CFG_HELP after printing usage to stdout (caller exits 0), or CFG_ERR with a
 * one-line reason in err (caller prints it and exits 2). Leftover positional
 * arguments are an error. */
int cfg_parse(const struct cfg_opt *opts, size_t nopts, void *conf,
              int argc, char **argv, const char *summary,
              char *err, size_t errlen);

/* cfg_parse over several groups: one --help table, one namespace of flags
 * (a name in two groups is CFG_ERR). */
int cfg_parse_groups(const struct cfg_group *groups, size_t ngroups, int argc, char **argv,
                     const char *summary, char *err, size_t errlen);

/* Print the option table (flag, env twin, default, help). */
void cfg_usage(FILE *out, const char *prog, const char *summary,
               const struct cfg_opt *opts, size_t nopts);

/* Parse one value of the given type into *out (CFG_STR not accepted).
 * Returns CFG_OK or CFG_ERR (bad syntax or overflow); bounds not checked. */
int cfg_parse_number(const char *text, enum cfg_type type, long *out);

#endif
