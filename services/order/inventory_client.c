/* libcurl easy handle per thread, reset between calls but kept alive. */
#include "inventory_client.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static pthread_key_t curl_key;
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void free_handle(void *h) { curl_easy_cleanup(h); }
static void make_key(void) { pthread_key_create(&curl_key, free_handle); }

int invc_global_init(void)
{
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

void invc_global_end(void) { curl_global_cleanup(); }

static CURL *thread_handle(void)
{
    pthread_once(&curl_once, make_key);
    CURL *h = pthread_getspecific(curl_key);
    if (!h) {
        h = curl_easy_init();
        if (h)
            pthread_setspecific(curl_key, h);
    } else {
        curl_easy_reset(h);   /* keeps the connection cache */
    }
    return h;
}

static size_t on_body(char *data, size_t size, size_t n, void *userp)
{
    struct invc_answer *a = userp;
    size_t len = size * n, room = sizeof(a->body) - 1 - a->len;
    size_t take = len < room ? len : room;
    memcpy(a->body + a->len, data, take);
    a->len += take;
    a->body[a->len] = '\0';
    return len;                 /* drop the excess rather than fail */
}

static size_t on_header(char *data, size_t size, size_t n, void *userp)
{
    struct invc_answer *a = userp;
    size_t len = size * n;
    static const char key[] = "retry-after:";
    if (len > sizeof(key) && strncasecmp(data, key, sizeof(key) - 1) == 0) {
        const char *v = data + sizeof(key) - 1;
        while (*v == ' ')
            v++;
        size_t vl = strcspn(v, "\r\n");
        if (vl >= sizeof(a->retry_after))
            vl = sizeof(a->retry_after) - 1;
        memcpy(a->retry_after, v, vl);
        a->retry_after[vl] = '\0';
    }
    return len;
}

int invc_call(const char *base, const char *path, const char *json,
              const char *const *headers, long timeout_ms, long connect_timeout_ms,
              struct invc_answer *a)
{
    memset(a, 0, sizeof(*a));
    CURL *h = thread_handle();
    if (!h) {
        snprintf(a->error, sizeof(a->error), "curl_easy_init failed");
        return -1;
    }
    char url[512];
    snprintf(url, sizeof(url), "%s%s", base, path);
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    for (size_t i = 0; hdrs && headers && headers[i]; i++) {
        struct curl_slist *more = curl_slist_append(hdrs, headers[i]);
        if (!more) {
            curl_slist_free_all(hdrs);
            hdrs = NULL;
        }
        hdrs = more;
    }
    if (!hdrs) {
        snprintf(a->error, sizeof(a->error), "out of memory for request headers");
        return -1;
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
    if (json)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(hdrs);
    if (rc != CURLE_OK) {
        a->connected = rc != CURLE_COULDNT_CONNECT && rc != CURLE_COULDNT_RESOLVE_HOST;
        if (rc == CURLE_OPERATION_TIMEDOUT) {
            /* A timeout before the connection existed is a connect failure. */
            double t_connect = 0;
            curl_easy_getinfo(h, CURLINFO_CONNECT_TIME, &t_connect);
            a->connected = t_connect > 0;
        }
        snprintf(a->error, sizeof(a->error), "%.180s: %.60s", url, curl_easy_strerror(rc));
        return -1;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
    a->connected = 1;
    return 0;
}
