# SPDX-License-Identifier: Apache-2.0
"""The agent on a full state directory (a small tmpfs, filled mid-run, as
/run fills on a real node): nothing is granted that the journal cannot
hold, the borrower already lent to is never killed, /healthz says so, and a
restart while the disk stays full comes back with its state intact. Needs
root (mount); skips (77) otherwise."""
import os
import signal
import subprocess
import sys

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import PROBE, Mi, fill_disk  # noqa: E402
from test_agent import AgentTestCase  # noqa: E402
import urllib.request  # noqa: E402


class FullDiskTest(AgentTestCase):
    def setUp(self):
        self.mnt = None
        super().setUp()

    def start_agent(self):
        if self.mnt is None:
            # the state directory on its own 8 MiB tmpfs
            self.mnt = os.path.join(self.tmp, "state")
            os.makedirs(self.mnt, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=755", "tmpfs", self.mnt],
                           check=True)
        super().start_agent()

    def tearDown(self):
        self.stop_agent()
        if self.mnt:
            subprocess.run(["umount", "-l", self.mnt])
        super().tearDown()

    def log(self):
        with open(os.path.join(self.tmp, "agent.log")) as f:
            return f.read()

    def healthz(self):
        url = "http://127.0.0.1:%s/healthz" % self.metrics_port()
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()

    def test_nothing_undurable_is_granted_and_a_restart_keeps_state(self):
        # b1 borrows while there is room: its loan is durable
        b1 = self.run_bg("b1", "--memory", "256Mi", "--limit", "1Gi", "--", PROBE, "alloc", "768Mi",
                         "hold", "600")
        self.wait_for(lambda: self.status().get("b1", {}).get("burst"), "b1's loan")
        # b2 is running before the disk fills, and asks for burst after
        go = os.path.join(self.tmp, "go")
        b2 = self.run_bg("b2", "--memory", "64Mi", "--limit", "512Mi", "--", PROBE, "barrier", go,
                         "alloc", "256Mi")
        self.wait_for(lambda: "waiting=" in self.output("b2"), "b2 to start")
        filler = fill_disk(self.mnt)
        # (events.log is on the full disk too: the agent's own log says it)
        self.wait_for(lambda: "journal: no room" in self.log(), "the agent to see the full disk")
        status, body = self.healthz()
        self.assertEqual(status, 200)
        self.assertIn("degraded: the journal has no room", body)
        open(go, "w").close()
        b2.wait(timeout=60)
        self.assertIn("alloc=CUDA_ERROR_OUT_OF_MEMORY", self.output("b2"))
        self.assertIn("refused a loan: the agent cannot record it", self.log())
        # SIGKILL and restart while still full: it starts, b1's loan is back, b1 lives
        self.stop_agent(signal.SIGKILL)
        self.start_agent()
        self.wait_for(lambda: self.status().get("b1", {}).get("burst"), "b1's loan after restart")
        self.assertIsNone(b1.poll(), "the borrower was killed")
        self.assertNotIn("watchdog: killed", self.log())
        # room again: granting resumes
        os.unlink(filler)
        self.wait_for(lambda: self.healthz()[1] == "ok\n", "room again")
        r = self.run_fg("--name", "b3", "--memory", "64Mi", "--limit", "512Mi", "--", PROBE,
                        "alloc", "256Mi")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIsNone(b1.poll(), "the borrower was killed")


if __name__ == "__main__":
    if os.getuid() != 0:
        print("agent.full_disk: needs root to mount a small tmpfs; skipped")
        sys.exit(77)
    cases.main(verbosity=2)
