/* SPDX-License-Identifier: Apache-2.0 */
#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void error_vformat(gf_error *err, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void error_vformat(gf_error *err, const char *fmt, va_list ap)
{
    if (vsnprintf(err->msg, sizeof(err->msg), fmt, ap) < 0)
        snprintf(err->msg, sizeof(err->msg), "(unformattable error message)");
}

int gf_error_set(gf_error *err, gf_errcode code, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL)
        return -1;
    err->code = code;
    err->sys_errno = 0;
    va_start(ap, fmt);
    error_vformat(err, fmt, ap);
    va_end(ap);
    return -1;
}

int gf_error_sys(gf_error *err, const char *fmt, ...)
{
    int saved = errno;
    char ebuf[128];
    size_t used;
    va_list ap;

    if (err == NULL)
        return -1;
    err->code = GF_ESYS;
    err->sys_errno = saved;
    va_start(ap, fmt);
    error_vformat(err, fmt, ap);
    va_end(ap);
    used = strlen(err->msg);
    snprintf(err->msg + used, sizeof(err->msg) - used, ": %s",
             strerror_r(saved, ebuf, sizeof(ebuf)));
    errno = saved;
    return -1;
}

int gf_error_wrap(gf_error *err, const char *fmt, ...)
{
    char old[GF_ERROR_MSG_MAX];
    size_t used;
    va_list ap;

    if (err == NULL)
        return -1;
    memcpy(old, err->msg, sizeof(old));
    old[sizeof(old) - 1] = '\0';
    va_start(ap, fmt);
    error_vformat(err, fmt, ap);
    va_end(ap);
    used = strlen(err->msg);
    snprintf(err->msg + used, sizeof(err->msg) - used, ": %s", old);
    return -1;
}

void gf_error_clear(gf_error *err)
{
    if (err == NULL)
        return;
    err->code = GF_OK;
    err->sys_errno = 0;
    err->msg[0] = '\0';
}

const char *gf_quote(const char *s, char *buf, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t i, o = 0;

    if (buf == NULL || len == 0)
        return "";
    if (s == NULL)
        s = "";
    for (i = 0; s[i] != '\0'; i++) {
        unsigned char c = (unsigned char)s[i];
        char tmp[4];
        size_t n = 0;

        if (i == GF_QUOTE_INPUT_MAX) {
            tmp[n++] = '.', tmp[n++] = '.', tmp[n++] = '.';
        } else if (c == '"' || c == '\\') {
            tmp[n++] = '\\', tmp[n++] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            tmp[n++] = '\\', tmp[n++] = 'x', tmp[n++] = hex[c >> 4], tmp[n++] = hex[c & 15];
        } else {
            tmp[n++] = (char)c;
        }
        if (o + n >= len)
            break;
        memcpy(buf + o, tmp, n);
        o += n;
        if (i == GF_QUOTE_INPUT_MAX)
            break;
    }
    buf[o] = '\0';
    return buf;
}
