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

int gf_ext_reply_error(gf_ext_reply *r, unsigned status, const char *msg)
{
    return gf_ext_reply_json(r, status, json_pack("{s:s}", "Error", msg));
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
