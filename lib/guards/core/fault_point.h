/* TEST ONLY: the stop-the-world pause a lease guard cannot see coming. The
 * lease guards (redlock, etcd, zookeeper) check their lease right before
 * the COMMIT; a pause that starts after that check still commits. Each of
 * them has an option (off by default) that calls fault_point_pause right
 * after a check that passed, so a test or a fault cell can put a pause
 * exactly in that window instead of hoping a SIGSTOP from outside lands
 * there. Never set those options in production. */
#ifndef LAB_FAULT_POINT_H
#define LAB_FAULT_POINT_H

/* Stop this whole process for ms milliseconds, as a garbage collector, a
 * VM migration or SIGSTOP would: every thread, lease watchdogs and the
 * ZooKeeper client's heartbeats included, so leases and sessions run out
 * on their servers while the caller's transaction stays open. A child
 * process sends SIGSTOP, sleeps ms, sends SIGCONT and exits; the calling
 * thread waits for it (bounded by ms plus scheduling). ms <= 0 returns at
 * once. Returns 0, or -1 when the child could not be started (nothing
 * paused). Counted in lab_test_pauses_total. */
int fault_point_pause(long ms);

#endif
