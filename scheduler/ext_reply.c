/* SPDX-License-Identifier: Apache-2.0 */
/* Building the extender's answers. */
#include <stdlib.h>
#include <string.h>

#include "extender.h"

void gf_ext_reply_free(gf_ext_reply *r)
{
    free(r->body);
    memset(r, 0, sizeof(*r));
}

int gf_ext_reply_json(gf_ext_reply *r, unsigned status, json_t *doc)
{
    char *s = doc ? json_dumps(doc, JSON_COMPACT) : NULL;

    json_decref(doc);
    if (!s)
        return -1;
    r->status = status;
    r->body = s;
    r->len = strlen(s);
    r->content_type = "application/json";
    return 0;
}

json_t *gf_ext_reason(const char *msg)
{
    static const char word[] = " percent";
    size_t n = 0, i, o = 0;
    char *buf;
    json_t *s;

    for (i = 0; msg[i] != '\0'; i++)
        n += msg[i] == '%';
    if (n == 0)
        return json_string(msg);
    if (!(buf = malloc(i + n * (sizeof(word) - 2) + 1)))
        return NULL;
    for (i = 0; msg[i] != '\0'; i++) {
        if (msg[i] != '%') {
            buf[o++] = msg[i];
            continue;
        }
        /* "50%" -> "50 percent"; "% of" -> "percent of" */
        const char *w = o > 0 && buf[o - 1] == ' ' ? word + 1 : word;

        memcpy(buf + o, w, strlen(w));
        o += strlen(w);
    }
    buf[o] = '\0';
    s = json_string(buf);
    free(buf);
    return s;
}

int gf_ext_reply_error(gf_ext_reply *r, unsigned status, const char *msg)
{
    json_t *text = gf_ext_reason(msg);

    return text ? gf_ext_reply_json(r, status, json_pack("{s:o}", "Error", text)) : -1;
}

int gf_ext_reply_text(gf_ext_reply *r, unsigned status, const char *type, const char *text)
{
    if (!(r->body = strdup(text)))
        return -1;
    r->status = status;
    r->len = strlen(text);
    r->content_type = type;
    return 0;
}
