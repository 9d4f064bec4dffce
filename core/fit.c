/* SPDX-License-Identifier: Apache-2.0 */
/* The fit rule's names (the rule itself is inline in fit.h): pure, no
 * allocation, no message. */
#include "fit.h"

const char *gf_fit_verdict_name(gf_fit_verdict v)
{
    switch (v) {
    case GF_FIT_OK: return "fits";
    case GF_FIT_REQUEST: return "request does not resolve";
    case GF_FIT_MODE: return "mode";
    case GF_FIT_MEMORY: return "memory";
    case GF_FIT_COMPUTE: return "compute";
    case GF_FIT_LIMIT: return "limit";
    }
    return "?";
}
