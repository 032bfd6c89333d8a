/* Option tables: number syntax (suffixes, bools, overflow), precedence
 * default < environment < flag, bounds, long strings, bad arguments, --help.
 * Environment names are unusual so a developer's shell cannot interfere. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/config.h"

/* ---- cfg_parse_number -------------------------------------------------- */

static void test_parse_number(void **state)
{
    (void)state;
    static const struct {
        const char *label, *text;
        enum cfg_type type;
        int rc;
        long want;
    } cases[] = {
        {"int zero",                 "0",     CFG_INT, CFG_OK, 0},
        {"int plain",                "42",    CFG_INT, CFG_OK, 42},
        {"int negative",             "-7",    CFG_INT, CFG_OK, -7},
        {"int 1k",                   "1k",    CFG_INT, CFG_OK, 1000},
        {"int 1K",                   "1K",    CFG_INT, CFG_OK, 1000},
        {"int 16k",                  "16k",   CFG_INT, CFG_OK, 16000},
        {"int 2m",                   "2m",    CFG_INT, CFG_OK, 2000000},
        {"int 3M",                   "3M",    CFG_INT, CFG_OK, 3000000},
        {"int -2k",                  "-2k",   CFG_INT, CFG_OK, -2000},
        {"int LONG_MAX",             "9223372036854775807", CFG_INT, CFG_OK, LONG_MAX},
        {"int LONG_MIN",             "-9223372036854775808", CFG_INT, CFG_OK, LONG_MIN},
        {"int overflow",             "9223372036854775808", CFG_INT, CFG_ERR, 0},
        {"int underflow",            "-9223372036854775809", CFG_INT, CFG_ERR, 0},
        {"int k overflow",           "9223372036854776k", CFG_INT, CFG_ERR, 0},
        {"int m overflow",           "9223372036855m", CFG_INT, CFG_ERR, 0},
        {"int largest k",            "9223372036854775k", CFG_INT, CFG_OK, 9223372036854775000L},
        {"int fraction",             "1.5",   CFG_INT, CFG_ERR, 0},
        {"int fraction k",           "1.5k",  CFG_INT, CFG_ERR, 0},
        {"int suffix only",          "k",     CFG_INT, CFG_ERR, 0},
        {"int garbage",              "abc",   CFG_INT, CFG_ERR, 0},
        {"int trailing garbage",     "12abc", CFG_INT, CFG_ERR, 0},
        {"int double suffix",        "1kk",   CFG_INT, CFG_ERR, 0},
        {"int ms is not an int suffix", "1ms", CFG_INT, CFG_ERR, 0},
        {"int s is not an int suffix",  "1s",  CFG_INT, CFG_ERR, 0},
        {"int hex",                  "0x10",  CFG_INT, CFG_ERR, 0},
        {"int trailing space",       "5 ",    CFG_INT, CFG_ERR, 0},
        {"int empty",                "",      CFG_INT, CFG_ERR, 0},
        {"int NULL",                 NULL,    CFG_INT, CFG_ERR, 0},
        {"ms bare",                  "250",   CFG_MS,  CFG_OK, 250},
        {"ms suffix",                "250ms", CFG_MS,  CFG_OK, 250},
        {"ms seconds",               "2s",    CFG_MS,  CFG_OK, 2000},
        {"ms minutes",               "1m",    CFG_MS,  CFG_OK, 60000},
        {"ms zero seconds",          "0s",    CFG_MS,  CFG_OK, 0},
        {"ms 90s",                   "90s",   CFG_MS,  CFG_OK, 90000},
        {"ms negative",              "-5ms",  CFG_MS,  CFG_OK, -5},
        {"ms hours unsupported",     "1h",    CFG_MS,  CFG_ERR, 0},
        {"ms k is not a time",       "1k",    CFG_MS,  CFG_ERR, 0},
        {"ms fraction",              "1.5s",  CFG_MS,  CFG_ERR, 0},
        {"ms suffix only",           "ms",    CFG_MS,  CFG_ERR, 0},
        {"ms reversed suffix",       "1sm",   CFG_MS,  CFG_ERR, 0},
        {"ms s overflow",            "9223372036854776s", CFG_MS, CFG_ERR, 0},
        {"ms m overflow",            "153722867280913m", CFG_MS, CFG_ERR, 0},
        {"ms largest m",             "153722867280912m", CFG_MS, CFG_OK, 153722867280912L * 60000},
        {"ms empty",                 "",      CFG_MS,  CFG_ERR, 0},
        {"bool 1",                   "1",     CFG_BOOL, CFG_OK, 1},
        {"bool true",                "true",  CFG_BOOL, CFG_OK, 1},
        {"bool TRUE",                "TRUE",  CFG_BOOL, CFG_OK, 1},
        {"bool yes",                 "yes",   CFG_BOOL, CFG_OK, 1},
        {"bool on",                  "on",    CFG_BOOL, CFG_OK, 1},
        {"bool 0",                   "0",     CFG_BOOL, CFG_OK, 0},
        {"bool false",               "false", CFG_BOOL, CFG_OK, 0},
        {"bool no",                  "no",    CFG_BOOL, CFG_OK, 0},
        {"bool Off",                 "Off",   CFG_BOOL, CFG_OK, 0},
        {"bool 2",                   "2",     CFG_BOOL, CFG_ERR, 0},
        {"bool y",                   "y",     CFG_BOOL, CFG_ERR, 0},
        {"bool truex",               "truex", CFG_BOOL, CFG_ERR, 0},
        {"bool empty",               "",      CFG_BOOL, CFG_ERR, 0},
        {"string type refused",      "5",     CFG_STR, CFG_ERR, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long v = -12345;
        int rc = cfg_parse_number(cases[i].text, cases[i].type, &v);
        if (rc != cases[i].rc)
            fail_msg("%s: \"%s\" rc %d, want %d", cases[i].label,
                     cases[i].text ? cases[i].text : "(null)", rc, cases[i].rc);
        if (rc == CFG_OK && v != cases[i].want)
            fail_msg("%s: \"%s\" = %ld, want %ld", cases[i].label, cases[i].text, v,
                     cases[i].want);
    }
}

/* cfg_parse restarts getopt with optind = 1, which in glibc does not clear
 * its private "next short option character" pointer: after a run that ended
 * inside a short-option group ("-x", "-h") the next cfg_parse resumes from
 * that stale pointer into the previous argv. Reported, not fixed here (lib/
 * belongs to someone else); until then every parse starts from a clean
 * getopt, the way a fresh process would. */
static void getopt_reset(void)
{
    static char prog[] = "reset";
    char *av[] = {prog, NULL};
    optind = 0;                  /* glibc: full reinitialisation */
    opterr = 0;
    (void)getopt(1, av, "+");
}

static int parse(const struct cfg_opt *opts, size_t nopts, void *conf, int argc,
                 char **argv, const char *summary, char *err, size_t errlen)
{
    getopt_reset();
    return cfg_parse(opts, nopts, conf, argc, argv, summary, err, errlen);
}

/* ---- cfg_parse: a table of our own ------------------------------------ */

struct ut_conf {
    long port;
    long timeout_ms;
    char name[8];
    int verbose;
    long count;
};

#define ENV_PORT    "LAB_UT_CFG_Q7_PORT"
#define ENV_TIMEOUT "LAB_UT_CFG_Q7_TIMEOUT"
#define ENV_NAME    "LAB_UT_CFG_Q7_NAME"
#define ENV_VERBOSE "LAB_UT_CFG_Q7_VERBOSE"
#define N(f) offsetof(struct ut_conf, f)

static const struct cfg_opt ut_opts[] = {
    {"ut-port",    ENV_PORT,    CFG_INT,  "8001",  1, 65535,   N(port), 0,       "listen port"},
    {"ut-timeout", ENV_TIMEOUT, CFG_MS,   "2s",    0, 60000,   N(timeout_ms), 0, "timeout"},
    {"ut-name",    ENV_NAME,    CFG_STR,  "inv",   0, 0,       N(name), sizeof(((struct ut_conf *)0)->name), "instance name"},
    {"ut-verbose", ENV_VERBOSE, CFG_BOOL, "false", 0, 1,       N(verbose), 0,    "chatty logs"},
    {"ut-count",   NULL,        CFG_INT,  "1k",    0, 1000000, N(count), 0,      "how many"},
};
#define UT_NOPTS (sizeof ut_opts / sizeof ut_opts[0])

static const char *const env_names[] = {ENV_PORT, ENV_TIMEOUT, ENV_NAME, ENV_VERBOSE};

#define MAXARGS 8

struct parse_case {
    const char *label;
    const char *env[4];          /* port, timeout, name, verbose; NULL = unset */
    const char *args[MAXARGS];   /* after argv[0], NULL-terminated */
    int rc;
    long port, timeout_ms;
    const char *name;
    int verbose;
    long count;
    const char *mention;         /* CFG_ERR: a word the reason must contain */
};

static const struct parse_case parse_cases[] = {
    {"defaults only", {0}, {0},
     CFG_OK, 8001, 2000, "inv", 0, 1000, NULL},
    {"environment over default", {"9000", "1m", "envnm", "yes"}, {0},
     CFG_OK, 9000, 60000, "envnm", 1, 1000, NULL},
    {"flag over environment", {"9000", "1m", "envnm", "yes"},
     {"--ut-port", "9100", "--ut-timeout", "500ms", "--ut-name", "flagnm", "--ut-verbose", "off"},
     CFG_OK, 9100, 500, "flagnm", 0, 1000, NULL},
    {"flag over default, env unset", {0}, {"--ut-count", "2k"},
     CFG_OK, 8001, 2000, "inv", 0, 2000, NULL},
    {"flag=value form", {"9000"}, {"--ut-port=7", "--ut-verbose=1"},
     CFG_OK, 7, 2000, "inv", 1, 1000, NULL},
    {"last flag wins", {0}, {"--ut-port", "1", "--ut-port", "2"},
     CFG_OK, 2, 2000, "inv", 0, 1000, NULL},
    {"env only for one option", {NULL, "3s"}, {0},
     CFG_OK, 8001, 3000, "inv", 0, 1000, NULL},
    {"bounds inclusive", {"65535", "0"}, {"--ut-count", "1m"},
     CFG_OK, 65535, 0, "inv", 0, 1000000, NULL},
    {"string of size-1 bytes fits", {0}, {"--ut-name", "1234567"},
     CFG_OK, 8001, 2000, "1234567", 0, 1000, NULL},
    {"empty string value", {NULL, NULL, ""}, {0},
     CFG_OK, 8001, 2000, "", 0, 1000, NULL},
    {"double dash ends options", {0}, {"--ut-port", "5", "--"},
     CFG_OK, 5, 2000, "inv", 0, 1000, NULL},

    {"env below minimum", {"0"}, {0}, CFG_ERR, 0, 0, NULL, 0, 0, "ut-port"},
    {"flag above maximum", {0}, {"--ut-port", "65536"}, CFG_ERR, 0, 0, NULL, 0, 0, "ut-port"},
    {"flag negative", {0}, {"--ut-port", "-1"}, CFG_ERR, 0, 0, NULL, 0, 0, "ut-port"},
    {"ms above maximum", {0}, {"--ut-timeout", "61s"}, CFG_ERR, 0, 0, NULL, 0, 0, "ut-timeout"},
    {"suffix pushes past maximum", {0}, {"--ut-count", "2m"}, CFG_ERR, 0, 0, NULL, 0, 0, "ut-count"},
    {"flag garbage", {0}, {"--ut-port", "abc"}, CFG_ERR, 0, 0, NULL, 0, 0, "ut-port"},
    {"env garbage", {NULL, "soon"}, {0}, CFG_ERR, 0, 0, NULL, 0, 0, ENV_TIMEOUT},
    {"env empty number", {""}, {0}, CFG_ERR, 0, 0, NULL, 0, 0, "ut-port"},
    {"bool garbage", {0}, {"--ut-verbose", "maybe"}, CFG_ERR, 0, 0, NULL, 0, 0, "ut-verbose"},
    {"string too long (flag)", {0}, {"--ut-name", "12345678"}, CFG_ERR, 0, 0, NULL, 0, 0, "ut-name"},
    {"string too long (env)", {NULL, NULL, "far-too-long"}, {0}, CFG_ERR, 0, 0, NULL, 0, 0, "ut-name"},
    {"unknown flag", {0}, {"--nope", "1"}, CFG_ERR, 0, 0, NULL, 0, 0, "--nope"},
    {"unknown short flag", {0}, {"-x"}, CFG_ERR, 0, 0, NULL, 0, 0, "-x"},
    {"missing value", {0}, {"--ut-port"}, CFG_ERR, 0, 0, NULL, 0, 0, "ut-port"},
    {"positional leftover", {0}, {"extra"}, CFG_ERR, 0, 0, NULL, 0, 0, "extra"},
    {"positional after flags", {0}, {"--ut-port", "5", "stray"}, CFG_ERR, 0, 0, NULL, 0, 0, "stray"},
    {"positional after --", {0}, {"--", "stray"}, CFG_ERR, 0, 0, NULL, 0, 0, "stray"},
};

/* cfg_parse wants char **: give it writable copies. */
struct argv_buf {
    char store[MAXARGS + 1][64];
    char *argv[MAXARGS + 2];
    int argc;
};

static void build_argv(struct argv_buf *b, const char *const *args)
{
    memset(b, 0, sizeof(*b));
    snprintf(b->store[0], sizeof b->store[0], "test_config");
    b->argv[0] = b->store[0];
    b->argc = 1;
    for (int i = 0; i < MAXARGS && args[i]; i++) {
        snprintf(b->store[b->argc], sizeof b->store[0], "%s", args[i]);
        b->argv[b->argc] = b->store[b->argc];
        b->argc++;
    }
    b->argv[b->argc] = NULL;
}

static void set_env(const char *const *values)
{
    for (size_t i = 0; i < 4; i++) {
        if (values[i])
            assert_int_equal(setenv(env_names[i], values[i], 1), 0);
        else
            assert_int_equal(unsetenv(env_names[i]), 0);
    }
}

static int clear_env(void **state)
{
    (void)state;
    static const char *const none[4] = {0};
    set_env(none);
    return 0;
}

static void test_parse_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof parse_cases / sizeof parse_cases[0]; i++) {
        const struct parse_case *c = &parse_cases[i];
        struct ut_conf conf;
        struct argv_buf a;
        char err[256] = "";
        memset(&conf, 0x5a, sizeof conf);
        set_env(c->env);
        build_argv(&a, c->args);
        int rc = parse(ut_opts, UT_NOPTS, &conf, a.argc, a.argv, "unit test",
                           err, sizeof err);
        if (rc != c->rc)
            fail_msg("%s: rc %d, want %d (err: %s)", c->label, rc, c->rc, err);
        if (rc == CFG_ERR) {
            if (!strstr(err, c->mention))
                fail_msg("%s: reason \"%s\" does not mention %s", c->label, err, c->mention);
            if (strchr(err, '\n'))
                fail_msg("%s: reason is not one line: %s", c->label, err);
            continue;
        }
        if (conf.port != c->port || conf.timeout_ms != c->timeout_ms ||
            strcmp(conf.name, c->name) != 0 || conf.verbose != c->verbose ||
            conf.count != c->count)
            fail_msg("%s: port %ld timeout %ld name '%s' verbose %d count %ld", c->label,
                     conf.port, conf.timeout_ms, conf.name, conf.verbose, conf.count);
    }
    clear_env(NULL);
}

/* Run cfg_parse with stdout sent to a temporary file; returns what it
 * printed (caller frees). */
static char *parse_capturing_stdout(const char *const *args, int *rc)
{
    struct argv_buf a;
    build_argv(&a, args);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(tmp), STDOUT_FILENO) >= 0);
    struct ut_conf conf;
    char err[256] = "";
    *rc = parse(ut_opts, UT_NOPTS, &conf, a.argc, a.argv, "unit test summary",
                    err, sizeof err);
    fflush(stdout);
    assert_true(dup2(saved, STDOUT_FILENO) >= 0);
    close(saved);
    long n = ftell(tmp);
    assert_true(n >= 0);
    char *text = calloc(1, (size_t)n + 1);
    assert_non_null(text);
    rewind(tmp);
    assert_int_equal(fread(text, 1, (size_t)n, tmp), (size_t)n);
    fclose(tmp);
    return text;
}

static void test_help(void **state)
{
    (void)state;
    static const struct { const char *label; const char *args[MAXARGS]; } cases[] = {
        {"--help",                {"--help"}},
        {"-h",                    {"-h"}},
        {"--help after a flag",   {"--ut-port", "5", "--help"}},
        {"--help before garbage", {"--help", "--nope"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc;
        char *out = parse_capturing_stdout(cases[i].args, &rc);
        if (rc != CFG_HELP)
            fail_msg("%s: rc %d, want CFG_HELP", cases[i].label, rc);
        static const char *const want[] = {
            "unit test summary", "--ut-port", ENV_PORT, "8001", "--ut-timeout",
            "2s", "--ut-name", "--ut-verbose", "--ut-count", "--help",
        };
        for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
            if (!strstr(out, want[k]))
                fail_msg("%s: usage lacks \"%s\":\n%s", cases[i].label, want[k], out);
        free(out);
    }
}

static void test_usage_to_stream(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    cfg_usage(f, "prog", NULL, ut_opts, UT_NOPTS);
    fclose(f);
    assert_non_null(strstr(buf, "usage: prog"));
    /* An option without env twin shows a placeholder, one line per option. */
    size_t lines = 0;
    for (char *p = buf; *p; p++)
        lines += *p == '\n';
    assert_true(lines >= UT_NOPTS + 1);
    free(buf);
}

static void test_bad_default(void **state)
{
    (void)state;
    struct ut_conf conf;
    char err[256] = "";
    struct argv_buf a;
    static const char *const noargs[MAXARGS] = {0};
    static const struct { const char *label; struct cfg_opt opt; const char *mention; } cases[] = {
        {"default unparsable",
         {"ut-port", NULL, CFG_INT, "eighty", 1, 65535, N(port), 0, "p"}, "default"},
        {"default out of bounds",
         {"ut-port", NULL, CFG_INT, "0", 1, 65535, N(port), 0, "p"}, "default"},
        {"default string too long",
         {"ut-name", NULL, CFG_STR, "123456789", 0, 0, N(name), 8, "n"}, "default"},
        {"missing number default",
         {"ut-port", NULL, CFG_INT, NULL, 1, 65535, N(port), 0, "p"}, "ut-port"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        build_argv(&a, noargs);
        int rc = parse(&cases[i].opt, 1, &conf, a.argc, a.argv, NULL, err, sizeof err);
        if (rc != CFG_ERR || !strstr(err, cases[i].mention))
            fail_msg("%s: rc %d err \"%s\"", cases[i].label, rc, err);
    }
    /* A NULL string default is the empty string. */
    const struct cfg_opt s = {"ut-name", NULL, CFG_STR, NULL, 0, 0, N(name), 8, "n"};
    build_argv(&a, noargs);
    memset(conf.name, 'x', sizeof conf.name);
    assert_int_equal(parse(&s, 1, &conf, a.argc, a.argv, NULL, err, sizeof err), CFG_OK);
    assert_string_equal(conf.name, "");
}

static void test_too_many_options(void **state)
{
    (void)state;
    static struct cfg_opt many[200];
    for (size_t i = 0; i < 200; i++)
        many[i] = ut_opts[4];
    struct ut_conf conf;
    char err[256] = "";
    struct argv_buf a;
    static const char *const noargs[MAXARGS] = {0};
    build_argv(&a, noargs);
    assert_int_equal(parse(many, 200, &conf, a.argc, a.argv, NULL, err, sizeof err),
                     CFG_ERR);
    assert_true(err[0] != '\0');
}

/* Several tables parsed as one: each row writes into its own group's
 * struct, --help lists them all, one flag name may not appear twice. */
struct plugin_conf {
    long level;
    char where[16];
};

static const struct cfg_opt plugin_opts[] = {
    {"ut-level", NULL, CFG_INT, "3", 0, 9, offsetof(struct plugin_conf, level), 0, "level"},
    {"ut-where", NULL, CFG_STR, "here", 0, 0, offsetof(struct plugin_conf, where),
     sizeof(((struct plugin_conf *)0)->where), "where"},
};

static void test_groups(void **state)
{
    (void)state;
    struct ut_conf conf;
    struct plugin_conf plugin;
    char err[256] = "";
    struct argv_buf a;
    memset(&conf, 0, sizeof conf);
    memset(&plugin, 0, sizeof plugin);
    struct cfg_group groups[] = {{ut_opts, UT_NOPTS, &conf}, {plugin_opts, 2, &plugin}};
    static const char *const args[MAXARGS] = {"--ut-port", "5", "--ut-level", "7"};
    build_argv(&a, args);
    assert_int_equal(cfg_parse_groups(groups, 2, a.argc, a.argv, NULL, err, sizeof err),
                     CFG_OK);
    assert_int_equal(conf.port, 5);
    assert_int_equal(plugin.level, 7);
    assert_string_equal(plugin.where, "here");   /* default, in the plugin's struct */

    /* The same table twice: one name in two groups is refused. */
    struct cfg_group twice[] = {{plugin_opts, 2, &plugin}, {plugin_opts, 2, &plugin}};
    static const char *const noargs[MAXARGS] = {0};
    build_argv(&a, noargs);
    err[0] = '\0';
    assert_int_equal(cfg_parse_groups(twice, 2, a.argc, a.argv, NULL, err, sizeof err),
                     CFG_ERR);
    assert_non_null(strstr(err, "ut-level"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_number),
        cmocka_unit_test_setup_teardown(test_parse_table, clear_env, clear_env),
        cmocka_unit_test_setup_teardown(test_help, clear_env, clear_env),
        cmocka_unit_test(test_usage_to_stream),
        cmocka_unit_test(test_bad_default),
        cmocka_unit_test(test_too_many_options),
        cmocka_unit_test_setup_teardown(test_groups, clear_env, clear_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
