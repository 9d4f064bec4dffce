/* SPDX-License-Identifier: Apache-2.0 */
/* One error object threaded through every fallible call: functions return 0
 * or -1 and, on -1, leave a message a person can act on in *err. */
#ifndef GPUFRAC_ERROR_H
#define GPUFRAC_ERROR_H

#include <stddef.h>

#define GF_ERROR_MSG_MAX 512

typedef enum gf_errcode {
    GF_OK = 0,
    GF_EINVAL,   /* bad input from a person or a file */
    GF_ERANGE,   /* a value outside what is accepted */
    GF_ESYS,     /* a system call failed; errno is in sys_errno */
    GF_ENOSPACE, /* a table or buffer is full */
    GF_ENOTFOUND,
    GF_ESTATE, /* the object is not in a state that allows this */
} gf_errcode;

typedef struct gf_error {
    gf_errcode code;
    int sys_errno;
    char msg[GF_ERROR_MSG_MAX];
} gf_error;

/* Sets *err (when err is not NULL) and returns -1. */
int gf_error_set(gf_error *err, gf_errcode code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* As gf_error_set, appending ": strerror(errno)" and keeping errno. */
int gf_error_sys(gf_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes an existing message with context ("reading /x: <old message>"). */
int gf_error_wrap(gf_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void gf_error_clear(gf_error *err);

/* Renders s for use inside a quoted message: '"', '\\' and control bytes
 * escaped, at most GF_QUOTE_INPUT_MAX input bytes ("..." marks the cut).
 * Returns buf; a NULL s renders as "". */
#define GF_QUOTE_INPUT_MAX 100
#define GF_QUOTE_MAX (GF_QUOTE_INPUT_MAX * 4 + 4)
const char *gf_quote(const char *s, char *buf, size_t len);

#endif
