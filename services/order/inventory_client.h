/* HTTP calls from the order service to inventory instances: one reused
 * libcurl handle per thread, so keep-alive connections survive across
 * requests. */
#ifndef INVENTORY_CLIENT_H
#define INVENTORY_CLIENT_H

#include <stddef.h>

#define INVC_BODY_MAX 8192

struct invc_answer {
    long status;                 /* HTTP status, 0 when no answer */
    int connected;               /* 0: could not connect at all (safe to fail over) */
    char body[INVC_BODY_MAX];    /* truncated beyond INVC_BODY_MAX-1 */
    size_t len;
    char retry_after[16];
    char error[256];             /* transport error text */
};

/* Process-wide setup/teardown (curl_global_init); call from main(). */
int invc_global_init(void);
void invc_global_end(void);

/* POST `json` (NULL: GET) to base+path, with extra request headers
 * ("Name: value", NULL-terminated; NULL for none). Returns 0 when an HTTP
 * answer came back (any status), -1 on a transport failure (see
 * a->connected: 0 means the request surely never reached the service). */
int invc_call(const char *base, const char *path, const char *json,
              const char *const *headers, long timeout_ms, long connect_timeout_ms,
              struct invc_answer *a);

#endif
