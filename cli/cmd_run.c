/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "admit.h"
#include "cli.h"
#include "fraction.h"
#include "run.h"
#include "statedir.h"

/* Before an sm-sharing fraction is stopped, the agent has MPS terminate its
 * clients: a client killed mid-work can wedge the server for every tenant. */
static void release_mps(void *arg)
{
    const run_plan *p = arg;
    gf_msg req, reply;
    gf_error err;

    gf_msg_init(&req, "release");
    gf_msg_add(&req, "name", p->cfg.name);
    if (gf_agent_request(p->cfg.agent, 0, &req, &reply, &err) < 0)
        fprintf(stderr, "gpufrac run: %s\n", err.msg);
}

/* The agent attributes the fraction's processes to it by their ancestry from
 * this process: it learns who we are from the kernel (SO_PEERCRED), here. */
static int attach_self(const run_plan *p, gf_error *err)
{
    gf_msg req, reply;

    gf_msg_init(&req, "attach");
    gf_msg_add(&req, "name", p->cfg.name);
    return gf_agent_request_retry(p->cfg.agent, 5, GF_RUN_AGENT_RESTART_MS, &req, &reply, err);
}

/* A run made while no agent was up is attached once one is: its socket
 * appears in the fraction's directory when the agent finds the fraction.
 * Tried every 2 s; any answer (attached, or refused) ends the tries. */
typedef struct late_attach {
    const run_plan *p;
    char sock[GF_PATH_MAX];
    bool done;
    int ticks;
} late_attach;

static void attach_late(void *arg)
{
    late_attach *l = arg;
    gf_msg req, reply;
    gf_error err;

    if (l->done || ++l->ticks % 8)
        return;
    gf_msg_init(&req, "attach");
    gf_msg_add(&req, "name", l->p->cfg.name);
    if (gf_agent_request(l->sock, 1, &req, &reply, &err) == 0 || err.code == GF_ESTATE)
        l->done = true;
}

int gf_cmd_run(int argc, char **argv)
{
    char dir[GF_PATH_MAX];
    gf_ledger lg = {.fd = -1};
    gf_error err = {0};
    gf_fraction f;
    run_opts o;
    run_plan p;
    bool done;
    int rc, lock;

    if ((rc = run_parse(argc, argv, &o, &done)) != 0 || done)
        return rc;
    if ((rc = run_plan_make(&o, &p, &err)) != 0)
        return gf_cli_fail("run", rc, &err);
    if (!gf_agent_present(p.state) || gf_fraction_path(p.cfg.agent, sizeof(p.cfg.agent), p.state,
                                                       p.cfg.name, GF_FRAC_AGENT_SOCK, &err) < 0)
        p.cfg.agent[0] = '\0';
    if (gf_fraction_path(dir, sizeof(dir), p.state, p.cfg.name, NULL, &err) < 0 ||
        run_env_apply(&p, dir, &err) < 0)
        return gf_cli_fail("run", GF_EXIT_FAIL, &err);
    run_plan_notices(&p);
    bool via_agent = p.cfg.agent[0] && run_via_agent(p.state);
    if (via_agent) {
        if (run_via_agent_create(&p, &f, &err) < 0)
            return gf_cli_fail("run", GF_EXIT_FAIL, &err);
    } else {
        gf_fraction_gc(p.state);
        if ((lock = gf_state_lock(p.state, &err)) < 0)
            return gf_cli_fail("run", GF_EXIT_FAIL, &err);
        if (gf_admit_check(&p, &err) < 0 || gf_fraction_create(&f, p.state, &p.cfg, &err) < 0) {
            gf_state_unlock(lock);
            return gf_cli_fail("run", GF_EXIT_FAIL, &err);
        }
        gf_state_unlock(lock);
    }
    /* the workload's first loan must find the fraction's socket open */
    static late_attach late;
    late.p = &p;
    late.done = p.cfg.agent[0] && gf_agent_wait_socket(p.cfg.agent, &err) == 0 &&
                attach_self(&p, &err) == 0;
    if (p.cfg.agent[0] && !late.done)
        fprintf(stderr, "gpufrac run: warning: %s; no burst memory for this run\n", err.msg);
    /* without an agent now, the watchdog of one that starts later still
     * watches this fraction once it is attached */
    if (!late.done && gf_fraction_path(late.sock, sizeof(late.sock), p.state, p.cfg.name,
                                       GF_FRAC_AGENT_SOCK, &err) == 0)
        run_supervise_on_tick(attach_late, &late);
    if (run_env_mps(&p, &err) < 0 || gf_ledger_open(p.cfg.ledger, &lg, &err) < 0) {
        if (via_agent)
            run_via_agent_end(&p, &f, GF_EXIT_FAIL);
        else
            gf_fraction_remove(&f);
        return gf_cli_fail("run", GF_EXIT_FAIL, &err);
    }
    if (p.cfg.mode == GF_MODE_SM_SHARING && p.cfg.agent[0])
        run_supervise_on_stop(release_mps, &p);
    pid_t child = 0;
    rc = run_supervise(o.cmd, &lg, &child);
    gf_ledger_close(&lg);
    rc = run_report_terminated(f.dir, child, rc, p.cfg.agent[0] != '\0');
    if (via_agent)
        run_via_agent_end(&p, &f, rc);
    else
        gf_fraction_end(&f, p.state, rc);
    return rc;
}
