/* SPDX-License-Identifier: Apache-2.0 */
/* User names for /metrics' user label, resolved by a thread of their own.
 *
 * Invariant: neither the agent's loop nor an HTTP worker ever calls into the
 * name service (NSS: files, LDAP, sssd, ... any of which may take seconds).
 * gf_username only reads a fixed table under `lock`, which is never held
 * across a lookup, and marks a uid it has no fresh entry for as wanted; the
 * resolver thread does the getpwuid_r calls, one at a time. Until a uid is
 * resolved its name is the numeric uid; an expired name is still shown until
 * its refresh comes back. A name is kept GF_USERNAME_TTL_S, a uid without a
 * passwd entry (or whose lookup failed) GF_USERNAME_NEG_TTL_S. The table
 * holds SETS x WAYS uids; a new one takes the place of the least recently
 * shown entry of its set that is not being looked up. */
#include "usernames.h"

#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "proc.h"

#define SETS 256
#define WAYS 4
#define PWBUF_MAX (1 << 16)

typedef struct entry {
    bool used, resolved, wanted;
    uid_t uid;
    int64_t expires_ms, shown_ms;
    char name[GF_USERNAME_MAX]; /* the numeric uid until resolved to a name */
} entry;

static entry table[SETS][WAYS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;    /* a uid is wanted */
static pthread_cond_t settled = PTHREAD_COND_INITIALIZER; /* a lookup finished */
static int n_wanted;
static bool started;

static entry *set_of(uid_t uid)
{
    return table[((uint32_t)uid * 2654435761u) >> 24]; /* Knuth's multiplicative hash, 8 bits */
}

static entry *find(uid_t uid)
{
    entry *set = set_of(uid);

    for (int w = 0; w < WAYS; w++)
        if (set[w].used && set[w].uid == uid)
            return &set[w];
    return NULL;
}

/* uid's entry, made in place of its set's least recently shown idle one;
 * NULL when every entry of the set is being looked up. */
static entry *find_or_claim(uid_t uid)
{
    entry *e = find(uid), *set = set_of(uid);

    for (int w = 0; !e && w < WAYS; w++)
        if (!set[w].used)
            e = &set[w];
    for (int w = 0; !e && w < WAYS; w++)
        if (!set[w].wanted && (!e || set[w].shown_ms < e->shown_ms))
            e = &set[w];
    if (e && (!e->used || e->uid != uid)) {
        *e = (entry){.used = true, .uid = uid};
        snprintf(e->name, sizeof(e->name), "%u", (unsigned)uid);
    }
    return e;
}

void gf_username(uid_t uid, char *out, size_t len)
{
    int64_t now = gf_now_ms();
    entry *e;

    pthread_mutex_lock(&lock);
    if ((e = find_or_claim(uid))) {
        e->shown_ms = now;
        if (!e->wanted && (!e->resolved || now >= e->expires_ms)) {
            e->wanted = true;
            n_wanted++;
            pthread_cond_signal(&wake);
        }
        snprintf(out, len, "%s", e->name);
    } else {
        snprintf(out, len, "%u", (unsigned)uid);
    }
    pthread_mutex_unlock(&lock);
}

/* The name service's answer: 1 with the name, 0 no such uid, -1 it failed. */
static int lookup(uid_t uid, char *name, size_t len)
{
    struct passwd pw, *res = NULL;
    size_t cap = 1024;
    char *buf = NULL;
    int rc;

    for (;;) {
        char *p = realloc(buf, cap);
        if (!p) {
            free(buf);
            return -1;
        }
        buf = p;
        rc = getpwuid_r(uid, &pw, buf, cap, &res);
        if (rc != ERANGE || cap >= PWBUF_MAX)
            break;
        cap *= 2;
    }
    if (rc == 0 && res)
        snprintf(name, len, "%s", pw.pw_name);
    free(buf);
    return rc == 0 && res ? 1 : rc == 0 || rc == ENOENT || rc == ESRCH ? 0 : -1;
}

static entry *next_wanted(void)
{
    for (int s = 0; s < SETS; s++)
        for (int w = 0; w < WAYS; w++)
            if (table[s][w].wanted)
                return &table[s][w];
    return NULL;
}

static void *resolver(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        char name[GF_USERNAME_MAX];
        entry *e;
        uid_t uid;
        int found;

        while (!(e = n_wanted ? next_wanted() : NULL))
            pthread_cond_wait(&wake, &lock);
        uid = e->uid;
        pthread_mutex_unlock(&lock);
        found = lookup(uid, name, sizeof(name));
        pthread_mutex_lock(&lock);
        /* a wanted entry keeps its place (find_or_claim skips it) */
        if (found > 0)
            snprintf(e->name, sizeof(e->name), "%s", name);
        else if (found == 0)
            snprintf(e->name, sizeof(e->name), "%u", (unsigned)uid);
        e->resolved = true;
        e->expires_ms = gf_now_ms() +
                        1000LL * (found > 0 ? GF_USERNAME_TTL_S : GF_USERNAME_NEG_TTL_S);
        e->wanted = false;
        n_wanted--;
        pthread_cond_broadcast(&settled);
    }
    return NULL;
}

int gf_usernames_start(gf_error *err)
{
    pthread_attr_t attr;
    pthread_t t;
    int rc = 0;

    pthread_mutex_lock(&lock);
    if (!started) {
        /* detached, for the process' life: a lookup stuck in NSS must not
         * hold up the agent's exit */
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if ((rc = pthread_create(&t, &attr, resolver, NULL)) == 0)
            started = true;
        pthread_attr_destroy(&attr);
    }
    pthread_mutex_unlock(&lock);
    if (rc) {
        errno = rc;
        return gf_error_sys(err, "starting the user name resolver");
    }
    return 0;
}

bool gf_usernames_settle(int timeout_ms)
{
    struct timespec until;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&lock);
    while (n_wanted && pthread_cond_timedwait(&settled, &lock, &until) == 0) {
    }
    bool done = n_wanted == 0;
    pthread_mutex_unlock(&lock);
    return done;
}
