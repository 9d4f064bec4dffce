/* SPDX-License-Identifier: Apache-2.0 */
/* Burst loans and reclaim (lender.c), over the loan table (loans.h). */
#ifndef GPUFRAC_AGENT_LENDER_H
#define GPUFRAC_AGENT_LENDER_H

#include "agent.h"
#include "conn.h"

/* Lends to the process pid (host pid, attributed to f by the caller); a new
 * loan holds a duplicate of peer_pidfd, the caller's connection's. */
int gf_lend(gf_agent *a, gf_afraction *f, pid_t pid, int peer_pidfd, int gpu, uint64_t bytes,
            uint64_t *granted, gf_error *err);
int gf_return_loan(gf_agent *a, gf_afraction *f, pid_t pid, int gpu, uint64_t bytes);
/* The loop's function for loans' pidfds (GF_EV_LOAN): the borrower is gone. */
void gf_loan_exited(void *agent, uint64_t slot, uint32_t events);
/* Reclaims past their deadline answer now. */
void gf_reclaim_expire(gf_agent *a);
/* Writes the agent's loans and evictions into f's ledger (the shim's copy). */
void gf_loans_publish(gf_agent *a, gf_afraction *f);
/* After the journal was replayed: reopens the borrowers' pidfds, finishes
 * evictions a killed agent left half done, drops loans of dead borrowers. */
void gf_loans_recover(gf_agent *a);
/* The verbs borrow, return and reclaim (verbs.c). A reclaim SIGKILLs the
 * newest borrowers through their pidfds and is answered, through the
 * request's reply token, once they are gone (or after
 * GF_AGENT_RECLAIM_WAIT_MS). */
void gf_serve_borrow(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out);
void gf_serve_return(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out);
void gf_serve_reclaim(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out);

#endif
