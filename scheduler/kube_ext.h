/* SPDX-License-Identifier: Apache-2.0 */
/* The kube client plugged into the extender. */
#ifndef GPUFRAC_SCHED_KUBE_EXT_H
#define GPUFRAC_SCHED_KUBE_EXT_H

#include "extender.h"
#include "kube.h"

gf_ext_kube gf_kube_ext(gf_kube *k);

#endif
