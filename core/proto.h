/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's wire protocol: one request or reply per SOCK_SEQPACKET
 * datagram, text, at most GF_PROTO_MAX bytes:
 *
 *   gpufrac/1 <verb> key=value key=value ...
 *
 * Verbs (requests): ping | borrow dev=<uuid> bytes=<n> | return dev=<uuid> bytes=<n>
 *   | reclaim dev=<uuid> bytes=<n> | mps dev=<uuid> | release name=<fraction>
 * Replies: "gpufrac/1 ok key=value ..." or "gpufrac/1 error msg=<text>" where a
 * value may contain spaces only as the last pair `msg=` (rest of the line).
 * Keys are [a-z_]+, values have no spaces (except msg), no control bytes. */
#ifndef GPUFRAC_PROTO_H
#define GPUFRAC_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define GF_PROTO_MAGIC "gpufrac/1"
#define GF_PROTO_MAX 4096
#define GF_PROTO_PAIRS 32
#define GF_PROTO_KEY_MAX 32
#define GF_PROTO_VAL_MAX 512

typedef struct gf_msg {
    char verb[16];
    int n;
    struct {
        char key[GF_PROTO_KEY_MAX];
        char val[GF_PROTO_VAL_MAX];
    } kv[GF_PROTO_PAIRS];
} gf_msg;

/* Decodes one datagram (not NUL-terminated). Every malformed input (wrong
 * magic or version, too long, bad key, duplicate key, too many pairs, control
 * bytes) is an error with a message; nothing is read past len. */
int gf_msg_decode(const char *buf, size_t len, gf_msg *out, gf_error *err);
/* Encodes; returns the length or -1 when it does not fit. */
int gf_msg_encode(const gf_msg *m, char *buf, size_t len);

void gf_msg_init(gf_msg *m, const char *verb);
int gf_msg_add(gf_msg *m, const char *key, const char *val);
int gf_msg_add_u64(gf_msg *m, const char *key, uint64_t v);
const char *gf_msg_get(const gf_msg *m, const char *key);
/* A required unsigned value; error names the key. */
int gf_msg_get_u64(const gf_msg *m, const char *key, uint64_t *v, gf_error *err);

#endif
