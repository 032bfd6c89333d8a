/* TEST ONLY: a whole-process pause at a named point (fault_point.h). */
#include "fault_point.h"

#include "base/metrics.h"

#include <errno.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int fault_point_pause(long ms)
{
    if (ms <= 0)
        return 0;
    pid_t self = getpid();
    pid_t child = fork();
    if (child < 0)
        return -1;
    if (child == 0) {
        /* Only async-signal-safe calls in the child of a threaded process.
         * SIGSTOP and SIGCONT come from the same sender, in that order: the
         * process cannot be left stopped by a SIGCONT that overtook it. */
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        kill(self, SIGSTOP);
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        kill(self, SIGCONT);
        _exit(0);
    }
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
        ;
    metrics_add("lab_test_pauses_total", "", 1);
    return 0;
}
