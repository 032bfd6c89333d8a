/* rconn_connect's name resolution is bounded by its connect timeout: a
 * Redis named by a host whose resolver never answers (a stopped container
 * under docker-compose) fails within the bound instead of glibc's
 * timeout x attempts. No docker: a child process gets a private network
 * and mount namespace, where /etc/resolv.conf names 127.0.0.1:53 and a UDP
 * socket there takes the queries and never answers. Where namespaces are
 * not allowed the test is skipped, saying so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "locks/rconn.h"
#include "locks/rconn_resolve.h"

#define HUNG_NAME "redis-stopped.lab.invalid"
#define SKIP_RC 77

static long long ms_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* In the child: private namespaces, loopback up, a resolver that never
 * answers. Returns 0, or SKIP_RC when namespaces are not allowed here. */
static int silent_resolver(char *conf, size_t conflen)
{
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWNS | CLONE_NEWNET) != 0) {
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET) != 0)
            return SKIP_RC;
        char map[64];
        snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
        write_file("/proc/self/setgroups", "deny");
        if (write_file("/proc/self/uid_map", map) != 0)
            return SKIP_RC;
        snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
        if (write_file("/proc/self/gid_map", map) != 0)
            return SKIP_RC;
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return SKIP_RC;
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
        return SKIP_RC;
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
        return SKIP_RC;
    /* The "DNS server": bound, never read, so no port-unreachable either. */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0)
        return SKIP_RC;
    snprintf(conf, conflen, "/tmp/rconn-resolv-%ld.conf", (long)getpid());
    if (write_file(conf, "nameserver 127.0.0.1\noptions timeout:2 attempts:1\n") != 0 ||
        mount(conf, "/etc/resolv.conf", NULL, MS_BIND, NULL) != 0)
        return SKIP_RC;
    return 0;   /* s stays open for the child's life */
}

/* The child's checks; its exit code is the verdict (0 pass, SKIP_RC). */
static int child_main(void)
{
    char conf[96];
    int rc = silent_resolver(conf, sizeof conf);
    if (rc != 0)
        return rc;
    unlink(conf);   /* the bind mount keeps it */

    /* Control: the resolver really hangs (getaddrinfo alone takes its 2 s),
     * so the bound below is what makes the difference. */
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    long long t0 = ms_now();
    int gai = getaddrinfo(HUNG_NAME, "6379", &hints, &res);
    long long raw_ms = ms_now() - t0;
    if (gai == 0)
        freeaddrinfo(res);
    fprintf(stderr, "getaddrinfo(%s) unbounded: %lld ms (%s)\n", HUNG_NAME, raw_ms,
            gai ? gai_strerror(gai) : "resolved?!");
    if (gai == 0 || raw_ms < 1500)
        return 2;

    /* The endpoint as a compose service names it: 300 ms to connect. */
    struct rconn_endpoint *ep = rconn_endpoint_new(HUNG_NAME, 6379, NULL, NULL, NULL, 0);
    if (!ep)
        return 3;
    char err[256] = "";
    t0 = ms_now();
    redisContext *c = rconn_connect(ep, 300, 300, err, sizeof err);
    long long took = ms_now() - t0;
    fprintf(stderr, "rconn_connect(%s, 300 ms): %s in %lld ms: %s\n", HUNG_NAME,
            c ? "connected?!" : "failed", took, err);
    if (c)
        return 4;
    if (took > 700)
        return 5;
    if (!strstr(err, "took longer than"))
        return 6;
    /* A second caller while the first lookup still hangs: bounded too. */
    t0 = ms_now();
    c = rconn_connect(ep, 200, 200, err, sizeof err);
    took = ms_now() - t0;
    fprintf(stderr, "again (200 ms): %lld ms: %s\n", took, err);
    if (c || took > 600)
        return 7;
    rconn_endpoint_free(ep);
    /* Numeric addresses need no lookup, in any namespace. */
    char ip[64];
    if (rconn_resolve("127.0.0.1", 1, ip, sizeof ip, err, sizeof err) != 0 ||
        strcmp(ip, "127.0.0.1") != 0)
        return 8;
    if (rconn_resolve("::1", 1, ip, sizeof ip, err, sizeof err) != 0 || strcmp(ip, "::1") != 0)
        return 9;
    return 0;
}

static void test_hung_resolver_is_bounded(void **state)
{
    (void)state;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(child_main());
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) == SKIP_RC) {
        print_message("skipped: no private network/mount namespace allowed here\n");
        skip();
    }
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* A name from /etc/hosts resolves (through the thread), an unknown one
 * fails with the resolver's reason, and a bad argument is refused. */
static void test_resolve_names(void **state)
{
    (void)state;
    char ip[64], err[160];
    assert_int_equal(rconn_resolve("localhost", 2000, ip, sizeof ip, err, sizeof err), 0);
    assert_true(strcmp(ip, "127.0.0.1") == 0 || strcmp(ip, "::1") == 0);
    assert_int_equal(rconn_resolve("", 100, ip, sizeof ip, err, sizeof err), -1);
    assert_int_equal(rconn_resolve("localhost", 100, ip, 8, err, sizeof err), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hung_resolver_is_bounded),
        cmocka_unit_test(test_resolve_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
