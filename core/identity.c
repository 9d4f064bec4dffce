/* SPDX-License-Identifier: Apache-2.0 */
/* The identity record's parser (identity.h): bounded by GF_IDENTITY_TEXT_MAX,
 * values truncated to their buffers. */
#include "identity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gf_identity_parse(const char *text, size_t len, gf_identity *out)
{
    char buf[GF_IDENTITY_TEXT_MAX + 1];

    memset(out, 0, sizeof(*out));
    if (len > GF_IDENTITY_TEXT_MAX)
        len = GF_IDENTITY_TEXT_MAX;
    memcpy(buf, text, len);
    buf[len] = '\0';
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "namespace=", 10) == 0)
            snprintf(out->ns, sizeof(out->ns), "%s", line + 10);
        else if (strncmp(line, "pod=", 4) == 0)
            snprintf(out->pod, sizeof(out->pod), "%s", line + 4);
        else if (strncmp(line, "container=", 10) == 0)
            snprintf(out->container, sizeof(out->container), "%s", line + 10);
        else if (strncmp(line, "admitted=", 9) == 0)
            out->admitted_at = (time_t)strtoll(line + 9, NULL, 10);
        else if (strncmp(line, "termlog=/", 9) == 0)
            snprintf(out->termlog, sizeof(out->termlog), "%s", line + 8);
    }
}
