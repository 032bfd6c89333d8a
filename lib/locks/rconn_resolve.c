/* Bounded name resolution for rconn (see rconn_resolve.h): getaddrinfo in
 * a detached thread, the caller waiting on a condition variable until its
 * own bound. A thread rather than getaddrinfo_a: a request that
 * gai_cancel cannot stop must keep its gaicb alive until glibc is done
 * with it, which needs the same ownership hand-over as a thread, plus a
 * signal or SIGEV_THREAD to learn when. */
#include "rconn_resolve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* One lookup, shared by the caller and the thread; the last to let go
 * (refs 0) frees it. */
struct lookup {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    int done;
    int abandoned;            /* the caller gave up waiting */
    int rc;                   /* getaddrinfo's answer */
    char host[256];
    char ip[INET6_ADDRSTRLEN];
};

static atomic_int pending;    /* lookups whose caller gave up, still running */

static void lookup_unref(struct lookup *l)
{
    pthread_mutex_lock(&l->mu);
    int last = --l->refs == 0;
    pthread_mutex_unlock(&l->mu);
    if (last) {
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
        free(l);
    }
}

static void *lookup_run(void *arg)
{
    struct lookup *l = arg;
    struct addrinfo hints, *res = NULL;
    char ip[INET6_ADDRSTRLEN] = "";

    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(l->host, NULL, &hints, &res);
    if (rc == 0) {
        /* hiredis takes the first address too. */
        void *a = res->ai_family == AF_INET6
                      ? (void *)&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr
                      : (void *)&((struct sockaddr_in *)res->ai_addr)->sin_addr;
        if (!inet_ntop(res->ai_family, a, ip, sizeof ip))
            rc = EAI_FAIL;
        freeaddrinfo(res);
    }
    pthread_mutex_lock(&l->mu);
    l->rc = rc;
    memcpy(l->ip, ip, sizeof ip);
    l->done = 1;
    int abandoned = l->abandoned;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (abandoned)
        atomic_fetch_sub(&pending, 1);
    lookup_unref(l);
    return NULL;
}

static int is_numeric(const char *host)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

int rconn_resolve(const char *host, int timeout_ms, char *ip, size_t iplen, char *err,
                  size_t errlen)
{
    char unused[8];
    if (!err || errlen == 0) {
        err = unused;
        errlen = sizeof unused;
    }
    if (!host || !*host || strlen(host) >= sizeof(((struct lookup *)0)->host) ||
        iplen < INET6_ADDRSTRLEN) {
        snprintf(err, errlen, "bad host name '%.60s'", host ? host : "");
        return -1;
    }
    if (is_numeric(host)) {
        snprintf(ip, iplen, "%s", host);
        return 0;
    }
    if (atomic_load(&pending) >= RCONN_RESOLVE_PENDING_MAX) {
        snprintf(err, errlen, "resolving %.60s: %d earlier lookups still hang", host,
                RCONN_RESOLVE_PENDING_MAX);
        return -1;
    }
    if (timeout_ms < 1)
        timeout_ms = 1;
    struct lookup *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "resolving %.60s: out of memory", host);
        return -1;
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    l->refs = 2;
    snprintf(l->host, sizeof l->host, "%s", host);

    pthread_attr_t ta;
    pthread_t t;
    pthread_attr_init(&ta);
    pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&ta, 256 * 1024);
    int terr = pthread_create(&t, &ta, lookup_run, l);
    pthread_attr_destroy(&ta);
    if (terr) {
        l->refs = 1;
        lookup_unref(l);
        snprintf(err, errlen, "resolving %.60s: cannot start a thread: %s", host, strerror(terr));
        return -1;
    }

    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    int rc = -1;
    pthread_mutex_lock(&l->mu);
    while (!l->done)
        if (pthread_cond_timedwait(&l->cv, &l->mu, &until) == ETIMEDOUT)
            break;
    if (l->done && l->rc == 0) {
        snprintf(ip, iplen, "%s", l->ip);
        rc = 0;
    } else if (l->done) {
        snprintf(err, errlen, "resolving %.60s: %s", host, gai_strerror(l->rc));
    } else {
        /* Counted under the mutex the thread reads `abandoned` with, so
         * it is taken off exactly once. */
        l->abandoned = 1;
        atomic_fetch_add(&pending, 1);
        snprintf(err, errlen, "resolving %.60s took longer than %d ms", host, timeout_ms);
    }
    pthread_mutex_unlock(&l->mu);
    lookup_unref(l);
    return rc;
}
