/* The HTTP edge's rules as pure functions (no socket, no MHD): UTF-8 of
 * every text a client sends, the JSON media type on writes, the admin
 * bearer token. http.c applies them to each request before any route runs;
 * tests/fuzz/fuzz_edge.c feeds them arbitrary bytes. */
#ifndef LAB_EDGE_H
#define LAB_EDGE_H

#include <stddef.h>

/* 1 when s[0..n) is well-formed UTF-8 (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), else 0. NUL bytes count as valid
 * here; C strings cannot carry them past MHD anyway. */
int edge_utf8_valid(const char *s, size_t n);

/* Make the NUL-terminated s well-formed UTF-8 in place: every byte that
 * does not start a complete, valid character becomes '?'. For texts that
 * quote client bytes (a parser's "near '...'"), which may stop in the
 * middle of a character. Never fails; s keeps its length. */
void edge_utf8_scrub(char *s);

/* 1 when a Content-Type value names application/json: case-insensitive,
 * optional blanks, parameters after ';' allowed ("application/json;
 * charset=utf-8"). NULL or anything else is 0. */
int edge_is_json_type(const char *content_type);

/* 1 for the methods that carry a body we parse (POST, PUT): those must
 * declare application/json. */
int edge_method_has_body(const char *method);

/* What the edge says about a request: status 0 = go on, else the HTTP
 * status, the API's error code and a detail sentence (always valid UTF-8). */
struct edge_verdict {
    int status;
    const char *code;
    char detail[160];
};

/* One text field (`what` names it in the detail: "path", "header X-Guard",
 * "query inventoryId"); 400 bad_request when not UTF-8. Returns v->status. */
int edge_check_text(const char *what, const char *s, size_t n, struct edge_verdict *v);

/* The body rules for `method`: POST/PUT need application/json (415
 * unsupported_media_type), any body must be UTF-8 (400). Returns v->status. */
int edge_check_body(const char *method, const char *content_type, const char *body,
                    size_t len, struct edge_verdict *v);

#define EDGE_AUTH_OK      0
#define EDGE_AUTH_MISSING 401  /* no "Authorization: Bearer ..." at all */
#define EDGE_AUTH_WRONG   403  /* a bearer token, not the right one */

/* Compare an Authorization header against the configured token in time
 * independent of where they differ. An empty or NULL token means no check
 * (EDGE_AUTH_OK). */
int edge_bearer_check(const char *authorization, const char *token);

#endif
