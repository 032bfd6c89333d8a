/* Edge rules (see edge.h): pure, bounded, allocation-free. */
#include "edge.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

int edge_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    if (!s)
        return n == 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned int cp;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            cp = c & 0x07;
        } else {
            return 0;   /* continuation byte first, C0/C1 overlong lead, F5+ */
        }
        if (n - i < len)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

void edge_utf8_scrub(char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                   : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (len && len <= n - i && edge_utf8_valid(s + i, len)) {
            i += len;
        } else {
            s[i] = '?';
            i++;
        }
    }
}

int edge_is_json_type(const char *ct)
{
    static const char want[] = "application/json";
    if (!ct)
        return 0;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    if (strncasecmp(ct, want, sizeof(want) - 1) != 0)
        return 0;
    ct += sizeof(want) - 1;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return *ct == '\0' || *ct == ';';
}

int edge_method_has_body(const char *method)
{
    return method && (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0);
}

static int verdict(struct edge_verdict *v, int status, const char *code, const char *detail)
{
    v->status = status;
    v->code = code;
    /* Called for every header of every request: no snprintf for "ok". */
    if (!detail[0])
        v->detail[0] = '\0';
    else
        snprintf(v->detail, sizeof(v->detail), "%s", detail);
    return status;
}

int edge_check_text(const char *what, const char *s, size_t n, struct edge_verdict *v)
{
    if (edge_utf8_valid(s, n))
        return verdict(v, 0, NULL, "");
    /* `what` is ours (a route's field or a header name MHD parsed); keep
     * only printable ASCII of it so the detail stays valid UTF-8. */
    char name[64];
    size_t k = 0;
    for (size_t i = 0; what && what[i] && k + 1 < sizeof(name); i++) {
        unsigned char c = (unsigned char)what[i];
        name[k++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    name[k] = '\0';
    char detail[160];
    snprintf(detail, sizeof(detail), "%s is not valid UTF-8", name);
    return verdict(v, 400, "bad_request", detail);
}

int edge_check_body(const char *method, const char *content_type, const char *body,
                    size_t len, struct edge_verdict *v)
{
    if (edge_method_has_body(method) && !edge_is_json_type(content_type))
        return verdict(v, 415, "unsupported_media_type",
                       "POST and PUT need Content-Type: application/json");
    return edge_check_text("body", body, len, v);
}

int edge_bearer_check(const char *authorization, const char *token)
{
    static const char scheme[] = "Bearer ";
    if (!token || !*token)
        return EDGE_AUTH_OK;
    if (!authorization || strncasecmp(authorization, scheme, sizeof(scheme) - 1) != 0)
        return EDGE_AUTH_MISSING;
    const char *got = authorization + sizeof(scheme) - 1;
    size_t gn = strlen(got), tn = strlen(token);
    /* Walk the configured token's length whatever was sent, so the time
     * taken does not tell how many leading bytes were right. */
    unsigned char diff = (unsigned char)(gn != tn);
    for (size_t i = 0; i < tn; i++)
        diff |= (unsigned char)(token[i] ^ (i < gn ? got[i] : 0));
    return diff ? EDGE_AUTH_WRONG : EDGE_AUTH_OK;
}
