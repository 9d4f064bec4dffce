/* SPDX-License-Identifier: Apache-2.0 */
/* The tenant gate (gate.h). */
#include "gate.h"

#include <stdio.h>

#include "attrib.h"
#include "conn.h"
#include "fraction.h"
#include "nvml.h"

int gf_gate_gpu(gf_agent *a, const gf_msg *in, gf_msg *out)
{
    const char *dev = gf_msg_get(in, "dev");
    int g = dev ? gf_gpu_index(a, dev) : -1;
    if (g < 0) {
        char m[GF_PROTO_VAL_MAX];
        snprintf(m, sizeof(m), "dev=%s is not a GPU of this node", dev ? dev : "(missing)");
        gf_reply_error(out, m);
    }
    return g;
}

gf_afraction *gf_gate_caller_fraction(gf_agent *a, const gf_request *r, gf_msg *out)
{
    gf_afraction *f = r->fid ? gf_fraction_find_fid(a, r->fid) : NULL;
    int i = gf_attribute(a, r->peer->pid);

    if (r->fid && !f) {
        gf_reply_error(out, "this socket's fraction is gone");
        return NULL;
    }
    if (i < 0 || (f && &a->fractions[i] != f)) {
        char m[256];
        snprintf(m, sizeof(m),
                 "the caller is not a process of %s%s (it must descend from the "
                 "fraction's supervisor, which gpufrac run or the container runtime attaches)",
                 f ? "fraction " : "any fraction", f ? f->cfg.name : "");
        gf_reply_error(out, m);
        return NULL;
    }
    return &a->fractions[i];
}

bool gf_gate_refuse_attributed(gf_agent *a, pid_t pid, const gf_afraction *f, gf_msg *out)
{
    int i = gf_attribute(a, pid);
    char m[GF_NAME_MAX + 160];

    if (i < 0 || (f && &a->fractions[i] == f))
        return false;
    snprintf(m, sizeof(m),
             "the process is already in fraction %s; a process of one fraction "
             "is never made another's supervisor",
             a->fractions[i].cfg.name);
    gf_reply_error(out, m);
    return true;
}
