/* loadgen: parse options, build the plan, run, print the summary. Exit 0
 * when the run completed (HTTP errors are statistics), 2 on bad arguments,
 * 1 when it could not run at all. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "lg_conf.h"
#include "lg_report.h"
#include "lg_run.h"

static volatile sig_atomic_t lg_interrupted;

static void on_signal(int sig)
{
    (void)sig;
    lg_interrupted = 1;
    lg_run_stop();
}

int main(int argc, char **argv)
{
    static struct lg_conf conf;   /* big (inline body): keep it off the stack */
    char err[512];
    int rc = lg_conf_parse(&conf, argc, argv, err, sizeof err);
    if (rc == CFG_HELP)
        return 0;
    if (rc != CFG_OK) {
        fprintf(stderr, "loadgen: %s\n", err);
        return 2;
    }
    struct lg_plan *plan = lg_plan_create(&conf, 1);
    if (!plan) {
        fprintf(stderr, "loadgen: out of memory\n");
        return 1;
    }
    if (plan->err) {
        fprintf(stderr, "loadgen: %s\n", plan->errstr);
        lg_plan_free(plan);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;   /* a second Ctrl-C kills */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    static struct lg_stats stats;
    static struct lg_timeline timeline;
    plan->timeline = &timeline;
    double elapsed;
    if (lg_run(plan, &stats, &elapsed) != 0) {
        lg_tl_free(&timeline);
        lg_plan_free(plan);
        return 1;
    }
    struct lg_report_info ri = {plan, elapsed, lg_interrupted != 0, conf.latency_dist,
                                &timeline};
    lg_report_text(stdout, &stats, &ri);
    fflush(stdout);
    rc = 0;
    if (conf.json[0] && lg_report_json_file(conf.json, &stats, &ri) != 0) {
        fprintf(stderr, "loadgen: cannot write %s: %s\n", conf.json, strerror(errno));
        rc = 1;
    }
    lg_tl_free(&timeline);
    lg_plan_free(plan);
    return rc;
}
