/* floor: the smallest libmicrohttpd server that answers like the inventory's
 * GET /livez (a ~96-byte JSON body, keep-alive), so `make bench` can show
 * what the library itself does on this machine next to the service.
 * Usage: floor PORT [IO_THREADS]; serves 127.0.0.1:PORT until SIGINT/SIGTERM.
 * Exit 0 on a signal, 2 on bad arguments, 1 when it cannot listen. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static const char BODY[] =
    "{\"ok\":true,\"service\":\"floor\",\"instance\":\"floor-1\",\"uptime_s\":0,\"pad\":\"0123456789\"}";

/* Two phases: MHD 0.9.75 closes the connection when a response is queued on
 * the first callback of a request, so the first call only marks the request
 * as seen and the second one answers. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    static int seen;
    struct MHD_Response *resp = cls;
    (void)url, (void)method, (void)version, (void)upload_data;
    if (!*con_cls) {
        *con_cls = &seen;
        return MHD_YES;
    }
    if (*upload_data_size) {   /* a body is read and dropped */
        *upload_data_size = 0;
        return MHD_YES;
    }
    return MHD_queue_response(conn, MHD_HTTP_OK, resp);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: floor PORT [IO_THREADS]\n");
        return 2;
    }
    long port = strtol(argv[1], NULL, 10), threads = argc > 2 ? strtol(argv[2], NULL, 10) : 2;
    if (port < 1 || port > 65535 || threads < 1 || threads > 64) {
        fprintf(stderr, "floor: PORT 1..65535, IO_THREADS 1..64\n");
        return 2;
    }
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct MHD_Response *resp = MHD_create_response_from_buffer(
        sizeof(BODY) - 1, (void *)BODY, MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return 1;
    MHD_add_response_header(resp, "Content-Type", "application/json");
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_USE_TURBO,
        (uint16_t)port,
        NULL, NULL, on_request, resp, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)threads, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned int)4096, MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned int)1024, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "floor: cannot listen on 127.0.0.1:%ld\n", port);
        MHD_destroy_response(resp);
        return 1;
    }
    fprintf(stderr, "floor listening on 127.0.0.1:%ld, %ld I/O threads\n", port, threads);
    int sig;
    sigwait(&sigs, &sig);
    MHD_stop_daemon(d);
    MHD_destroy_response(resp);
    return 0;
}
