# SPDX-License-Identifier: Apache-2.0
"""Clients of gpufracd when it is stopped or restarting: the shim's calls to
the agent are bounded (a stopped agent costs a borrow its bound, then the
fraction's guarantee is what it gets), and the shim and a user's gpufrac run
ride out a restart by asking again. Times are printed, never asserted."""
import os
import signal
import subprocess
import sys
import time

import cases

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from harness import PROBE, kv  # noqa: E402
from test_agent import AgentTestCase, UsersBase  # noqa: E402


def alloc_lines(text):
    return [ln for ln in text.splitlines() if ln.startswith("alloc=")]


class StoppedAgentTest(AgentTestCase):
    def stop(self):
        os.kill(self.agent.pid, signal.SIGSTOP)

    def tearDown(self):
        if self.agent and self.agent.poll() is None:
            os.kill(self.agent.pid, signal.SIGCONT)  # so that it can be stopped for good
        super().tearDown()

    def test_a_borrow_from_a_stopped_agent_is_refused_within_its_bound(self):
        go1, go2 = os.path.join(self.tmp, "go1"), os.path.join(self.tmp, "go2")
        self.run_bg("b", "--memory", "512Mi", "--limit", "3Gi", "--", PROBE, "barrier", go1,
                    "alloc", "1Gi", "barrier", go2, "alloc", "2Gi", "hold", "60")
        self.wait_for(lambda: "waiting=" in self.output("b"), "the probe at its barrier")
        self.stop()  # stopped, not dead: its sockets accept, nothing answers
        t0 = time.monotonic()
        open(go1, "w").close()
        # the agent stays stopped far past this wait (until the test goes on)
        self.wait_for(lambda: alloc_lines(self.output("b")), "the allocation's answer", 20)
        print("\nborrow from a stopped agent answered after %.2f s"
              % (time.monotonic() - t0), file=sys.stderr)
        self.assertEqual(alloc_lines(self.output("b")), ["alloc=CUDA_ERROR_OUT_OF_MEMORY"])
        os.kill(self.agent.pid, signal.SIGCONT)
        t0 = time.monotonic()
        open(go2, "w").close()
        self.wait_for(lambda: len(alloc_lines(self.output("b"))) == 2, "the later borrow")
        print("borrow after SIGCONT answered after %.2f s" % (time.monotonic() - t0),
              file=sys.stderr)
        self.assertEqual(alloc_lines(self.output("b"))[1], "alloc=ok", self.output("b"))
        # within the limit: whatever the agent lent, the fraction holds no more
        st = self.wait_for(lambda: self.status().get("b"), "the fraction's status")
        self.assertLessEqual(st["used"], 3 << 30)
        self.assertLessEqual(st["burst"], (3 << 30) - (512 << 20))


class UserRunRestartTest(UsersBase):
    def test_a_users_run_started_while_the_agent_restarts_succeeds(self):
        self.stop_agent(signal.SIGKILL)
        t0 = time.monotonic()
        p = self.as_user("run", "--name", "early", "--memory", "1Gi", "--", "true", bg="early")
        time.sleep(0.2)
        self.start_agent()
        p.wait(timeout=60)
        print("\ngpufrac run through a restart took %.2f s" % (time.monotonic() - t0),
              file=sys.stderr)
        self.assertEqual(p.returncode, 0, self.output("early"))
        self.assertIn("fraction early ended", self.events())


class ShimRestartTest(AgentTestCase):
    def test_a_borrow_asked_while_the_agent_restarts_is_asked_again(self):
        go = os.path.join(self.tmp, "go")
        self.run_bg("b", "--memory", "512Mi", "--limit", "2Gi", "--", PROBE, "barrier", go,
                    "alloc", "1Gi", "hold", "60")
        self.wait_for(lambda: "waiting=" in self.output("b"), "the probe at its barrier")
        self.stop_agent(signal.SIGKILL)
        t0 = time.monotonic()
        open(go, "w").close()
        time.sleep(0.2)
        self.start_agent()
        self.wait_for(lambda: alloc_lines(self.output("b")), "the allocation's answer", 30)
        print("\nborrow through a restart answered after %.2f s" % (time.monotonic() - t0),
              file=sys.stderr)
        self.assertEqual(alloc_lines(self.output("b")), ["alloc=ok"], self.output("b"))


if __name__ == "__main__":
    cases.main(verbosity=2)
