/* SPDX-License-Identifier: Apache-2.0 */
/* The verb table (verbs.h). users.sock is anyone's: only what a local
 * user's gpufrac run needs to make and end its fraction is served there;
 * everything else goes through root's socket or the fraction's own. */
#include "verbs.h"

#include <stdio.h>
#include <string.h>

#include "admit.h"
#include "conn.h"
#include "lender.h"
#include "metrics_refusals.h"
#include "mps.h"
#include "registry.h"
#include "statedir.h"
#include "user_admit.h"

#define ROOT GF_SOCKET_ROOT
#define FRACTION GF_SOCKET_FRACTION
#define USERS GF_SOCKET_USERS

typedef void (*serve_fn)(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out);

typedef struct verb {
    const char *name;
    unsigned sockets; /* where it is served */
    unsigned root_on; /* sockets on which only root (uid 0) may call it */
    bool fresh;       /* the registry is brought up to date first */
    serve_fn serve;
    const char *elsewhere; /* the refusal on other sockets, when it says more */
} verb;

static void serve_ping(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out)
{
    (void)in;
    gf_msg_init(out, "ok");
    gf_msg_add(out, "agent", "gpufracd");
    if (r->socket != USERS)
        gf_msg_add_u64(out, "fractions", (uint64_t)a->n_fractions);
}

static const verb verbs[] = {
    {"ping", ROOT | FRACTION | USERS, 0, false, serve_ping, NULL},
    {"borrow", ROOT | FRACTION, 0, true, gf_serve_borrow, NULL},
    {"return", ROOT | FRACTION, 0, true, gf_serve_return, NULL},
    {"reclaim", ROOT | FRACTION, 0, true, gf_serve_reclaim, NULL},
    {"mps", ROOT | FRACTION, 0, true, gf_serve_mps, NULL},
    {"release", ROOT | FRACTION, 0, true, gf_serve_release, NULL},
    {"admit", ROOT, 0, true, gf_serve_admit, "admit is for root's socket (the container runtime)"},
    {"attach", ROOT | FRACTION, 0, true, gf_serve_attach, NULL},
    /* root may end a user's fraction from its own socket too */
    {"run", USERS | ROOT, ROOT, true, gf_serve_run, NULL},
    {"end", USERS | ROOT, ROOT, true, gf_serve_end, NULL},
};

static const verb *find(const char *name)
{
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        if (strcmp(verbs[i].name, name) == 0)
            return &verbs[i];
    return NULL;
}

static bool served(const verb *v, const gf_request *r)
{
    return v && (v->sockets & r->socket) && (!(v->root_on & r->socket) || r->peer->uid == 0);
}

static void refuse(const verb *v, const gf_request *r, const char *name, gf_msg *out)
{
    char m[160];

    if (r->socket == USERS)
        snprintf(m, sizeof(m),
                 "%s is not served on " GF_STATE_USERS_SOCK " (expected ping, run or end)", name);
    else if (v && v->elsewhere)
        snprintf(m, sizeof(m), "%s", v->elsewhere);
    else
        snprintf(m, sizeof(m),
                 "unknown verb %s (expected ping, borrow, return, reclaim, mps, "
                 "release, admit or attach)",
                 name);
    gf_reply_error(out, m);
}

void gf_verbs_serve(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out)
{
    const verb *v = find(in->verb);
    gf_error err;

    if (!served(v, r)) {
        refuse(v, r, in->verb, out);
    } else {
        if (v->fresh)
            gf_registry_scan_if_changed(a, &err);
        v->serve(a, r, in, out);
    }
    if (!r->deferred && strcmp(out->verb, "error") == 0)
        gf_refusal_count(in->verb, gf_msg_get(out, "msg"));
}
