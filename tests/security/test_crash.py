# SPDX-License-Identifier: Apache-2.0
"""The agent's own state survives SIGKILL at any point: the agent
built with crash points (gpufracd-testhooks, GPUFRAC_TEST_CRASH_AT=<step>)
dies mid-lend, mid-reclaim and mid-admission; after a restart of the real
agent the invariants hold: loan order intact, a half-done eviction finished,
recorded and counted, the guaranteed owner served inside its request, an
admission neither lost nor doubled."""
import os
import re
import signal
import subprocess
import sys
import time

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "agent"))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import BUILD, PROBE, Gi, Mi, kv  # noqa: E402
import test_agent  # noqa: E402
from test_agent import AgentTestCase  # noqa: E402

HOOKED = os.path.join(BUILD, "tests", "gpufracd-testhooks")


class CrashTest(AgentTestCase):
    crash_at = None

    def start_agent(self):
        # the first start of a test may carry a crash point; restarts never do
        if self.crash_at and not getattr(self, "crashed_once", False):
            test_agent.AGENT = HOOKED
            self.env["GPUFRAC_TEST_CRASH_AT"] = self.crash_at
            self.crashed_once = True
        else:
            test_agent.AGENT = os.path.join(BUILD, "bin", "gpufracd")
            self.env.pop("GPUFRAC_TEST_CRASH_AT", None)
        super().start_agent()

    def wait_crash(self):
        self.agent.wait(timeout=60)
        self.assertEqual(self.agent.returncode, -signal.SIGKILL)
        with open(os.path.join(self.tmp, "agent.log")) as f:
            self.assertIn("test hook: crashing at " + self.crash_at, f.read())
        self.agent_log.close()
        self.agent = None

    def gpu_metric(self, name):
        return self.sample(self.metrics(), name, gpu=0)


class LoanOrderTest(CrashTest):
    def test_newest_loan_evicted_after_a_restart(self):
        self.run_bg("b1", "--memory", "512Mi", "--limit", "2Gi", "--", PROBE, "alloc", "1536Mi",
                    "hold", "120")
        self.wait_for(lambda: self.status().get("b1", {}).get("burst"), "b1's loan")
        self.stop_agent(signal.SIGKILL)
        self.start_agent()
        self.run_bg("b2", "--memory", "512Mi", "--limit", "3584Mi", "--", PROBE, "alloc", "2Gi",
                    "hold", "120")
        self.wait_for(lambda: self.status().get("b2", {}).get("burst"), "b2's loan")
        r = self.run_fg("--name", "owner", "--memory", "1200Mi", "--", PROBE, "alloc", "1200Mi")
        self.assertIn("alloc=ok", r.stdout, r.stderr)
        self.assertRegex(self.events(), r"reclaim: terminated pid \d+ of fraction b2 ")
        self.assertNotIn("of fraction b1", self.events())
        self.assertTrue(self.status().get("b1", {}).get("burst"), "b1 keeps its older loan")


class CountersTest(CrashTest):
    def test_counters_survive_sigkill(self):
        self.run_bg("leaky", "--memory", "256Mi", "--", "sh", "-c",
                    "env -u LD_PRELOAD %s alloc 1Gi hold 60; sleep 60" % PROBE)
        self.wait_for(lambda: "of fraction leaky" in self.events(), "the watchdog")
        self.ask(b"gpufrac/1 ping")
        m = self.metrics()
        requests = self.sample(m, "gpufrac_agent_requests_total")
        self.assertEqual(self.sample(m, "gpufrac_fraction_watchdog_kills_total",
                                     fraction="leaky"), 1.0)
        # the request counts reach the journal on the next tick
        def journaled_requests():
            with open(os.path.join(self.state, "agent", "journal")) as f:
                counts = [ln.split() for ln in f if ln.startswith("count ")]
            return counts and int(counts[-1][3]) >= requests
        self.wait_for(journaled_requests, "the request count journaled")
        self.stop_agent(signal.SIGKILL)
        self.start_agent()
        m = self.metrics()
        self.assertEqual(self.sample(m, "gpufrac_fraction_watchdog_kills_total",
                                     fraction="leaky"), 1.0)
        self.assertEqual(self.sample(m, "gpufrac_agent_watchdog_kills_total"), 1.0)
        self.assertGreaterEqual(self.sample(m, "gpufrac_agent_requests_total"), requests)


class MidReclaimTest(CrashTest):
    crash_at = "reclaim-killed"

    def test_eviction_finished_after_a_crash(self):
        self.run_bg("b", "--memory", "512Mi", "--limit", "3584Mi", "--", PROBE, "alloc", "3Gi",
                    "hold", "120")
        self.wait_for(lambda: self.status().get("b", {}).get("burst"), "the loan")
        self.run_bg("owner", "--memory", "2Gi", "--", PROBE, "alloc", "1536Mi", "hold", "60")
        self.wait_crash()  # SIGKILL sent to the borrower, then the agent died
        self.start_agent()
        self.wait_for(lambda: "alloc=ok" in self.output("owner"),
                      "the owner served inside its request")
        self.assertIn("(finished after a restart)", self.events())
        self.assertRegex(self.events(), r"reclaim: terminated pid \d+ of fraction b ")
        self.assertEqual(self.sample(self.metrics(), "gpufrac_agent_evictions_total"), 1.0)
        self.wait_for(lambda: "b" not in self.status(), "the borrower's run to end")


class MidLendTest(CrashTest):
    crash_at = "lend"

    def test_loan_journaled_before_the_reply_is_kept(self):
        p = self.run_bg("b", "--memory", "512Mi", "--limit", "2Gi", "--", PROBE, "alloc", "1Gi",
                        "hold", "120")
        self.wait_crash()
        self.start_agent()
        # the agent granted (and journaled) a loan the borrower never heard of:
        # it is counted as lent until the borrower ends, never lost
        lent = self.wait_for(lambda: self.gpu_metric("gpufrac_gpu_memory_lent_bytes"),
                             "the journaled loan")
        self.assertGreaterEqual(lent, 512 * Mi)
        p.terminate()
        p.wait(timeout=30)
        self.wait_for(lambda: self.gpu_metric("gpufrac_gpu_memory_lent_bytes") == 0,
                      "the loan to end with its borrower")


class MidLendRetryTest(CrashTest):
    crash_at = "lend"

    def test_a_borrow_cut_by_the_crash_is_asked_again(self):
        self.run_bg("b", "--memory", "512Mi", "--limit", "2Gi", "--", PROBE, "alloc", "1Gi",
                    "hold", "120")
        self.wait_crash()
        t0 = time.monotonic()
        self.start_agent()
        self.wait_for(lambda: "alloc=" in self.output("b"), "the allocation's answer", 30)
        print("\nthe cut borrow was answered %.2f s after the restart began" % (time.monotonic() - t0),
              file=sys.stderr)
        # within its limit, so the loan asked again is granted
        self.assertIn("alloc=ok", self.output("b"))
        self.assertLessEqual(self.status()["b"]["burst"], 2 * Gi - 512 * Mi)


class MidAdmissionTest(CrashTest):
    crash_at = "admit"

    def test_admission_neither_lost_nor_doubled(self):
        uuid = kv(subprocess.run([PROBE, "uuid"], env=self.env, capture_output=True,
                                 text=True).stdout)["uuid"]
        req = ("gpufrac/1 admit name=k8s.c.main ns=n pod=p container=c devices=%s/%d/%d"
               % (uuid, Gi, Gi)).encode()
        try:
            self.ask(req)
        except OSError:
            pass  # the agent died inside the request
        self.wait_crash()
        self.start_agent()
        reply = self.ask(req)  # the runtime retries
        self.assertTrue(reply.startswith("gpufrac/1 ok"), reply)
        d = os.path.join(self.state, "fractions")
        self.assertEqual(sorted(n for n in os.listdir(d) if not n.startswith(".")),
                         ["k8s.c.main"])
        self.assertEqual(self.wait_for(
            lambda: self.gpu_metric("gpufrac_gpu_memory_guaranteed_bytes"), "the guarantee"), Gi)


class UnattachedTest(CrashTest):
    """An admission whose container never attaches (its runtime died, or the
    agent died inside the admission and the runtime did not retry) gives
    its guarantee back after --attach-timeout-s."""
    extra_args = ["--attach-timeout-s", "2"]

    def admit_1g(self):
        uuid = kv(subprocess.run([PROBE, "uuid"], env=self.env, capture_output=True,
                                 text=True).stdout)["uuid"]
        return self.ask(("gpufrac/1 admit name=k8s.lost.main ns=n pod=lost container=main "
                         "devices=%s/%d/%d" % (uuid, Gi, Gi)).encode())

    def assert_released(self):
        d = os.path.join(self.state, "fractions", "k8s.lost.main")
        self.wait_for(lambda: not os.path.exists(d), "the unattached fraction to be released")
        self.assertRegex(self.events(), r"fraction k8s\.lost\.main: admitted \d+ s ago and its "
                         r"container never attached: releasing its guarantee")
        self.assertEqual(self.wait_for(
            lambda: self.gpu_metric("gpufrac_gpu_memory_guaranteed_bytes") == 0 or None,
            "the guarantee to end"), True)

    def test_an_admission_never_attached_is_released(self):
        self.assertTrue(self.admit_1g().startswith("gpufrac/1 ok"))
        self.assert_released()


class UnattachedAfterCrashTest(UnattachedTest):
    crash_at = "admit"

    def test_an_admission_never_attached_is_released(self):
        try:
            self.admit_1g()
        except OSError:
            pass  # the agent died inside the request; this runtime does not retry
        self.wait_crash()
        self.start_agent()
        self.assert_released()



class MidRunTest(CrashTest, test_agent.UsersBase):
    """The agent dies between making a user's fraction and attaching its run
    as the supervisor: the run, which asks again after the restart, is given
    its fraction (not "in use"); a fraction whose run never comes back is
    released after --attach-timeout-s, not held for nobody."""
    crash_at = "run"
    users_extra_args = ("--attach-timeout-s", "3")

    def test_a_run_cut_by_the_crash_gets_its_fraction_when_it_asks_again(self):
        p = self.as_user("run", "--name", "cut", "--memory", "1Gi", "--", self.PROBE, "alloc",
                         "512Mi", bg="cut")
        self.wait_crash()
        self.start_agent()
        self.assertEqual(p.wait(timeout=120), 0, self.output("cut"))
        self.assertIn("alloc=ok", self.output("cut"))
        self.assertNotIn("in use", self.output("cut"))
        self.assertRegex(self.events(), r"fraction cut of uid 65534: its run \(pid \d+\) asked "
                         r"again and is attached")

    def test_a_run_that_never_asks_again_gives_its_guarantee_back(self):
        p = self.as_user("run", "--name", "lost", "--memory", "1Gi", "--", "true", bg="lost")
        self.wait_crash()
        p.kill()
        p.wait()
        d = os.path.join(self.state, "fractions", "lost")
        self.assertTrue(os.path.isdir(d), "made before the crash point")
        self.start_agent()
        self.wait_for(lambda: not os.path.exists(d), "the unattached run's fraction to go", 30)
        self.assertRegex(self.events(), r"fraction lost: made \d+ s ago and its gpufrac run never "
                         r"attached: releasing its guarantee")
        self.assertEqual(self.wait_for(
            lambda: self.gpu_metric("gpufrac_gpu_memory_guaranteed_bytes") == 0 or None,
            "the guarantee to end"), True)

if __name__ == "__main__":
    if not os.path.exists(HOOKED):
        print("gpufracd-testhooks is not built; skipped")
        sys.exit(77)
    cases.main(verbosity=2)
