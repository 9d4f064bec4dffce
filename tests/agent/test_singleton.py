# SPDX-License-Identifier: Apache-2.0
"""One gpufracd per state directory: a second agent started on a directory
another one serves exits non-zero, names the pid that serves it, and leaves
the first one's sockets (root's, users', a fraction's) as they were, the
same inodes answering ping; that holds also when the second one would have
failed later anyway (its metrics port taken)."""
import os
import signal
import socket
import subprocess
import sys

import cases

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_agent  # noqa: E402
from test_agent import FAKE_MPS, AgentTestCase  # noqa: E402
from harness import PROBE, Gi, kv  # noqa: E402


def ping(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(10)
    try:
        s.connect(path)
        s.send(b"gpufrac/1 ping")
        return s.recv(4096).decode()
    finally:
        s.close()


class SingletonTest(AgentTestCase):
    def setUp(self):
        super().setUp()
        uuid = kv(subprocess.run([PROBE, "uuid"], env=self.env, capture_output=True,
                                 text=True).stdout)["uuid"]
        reply = self.ask(("gpufrac/1 admit name=k8s.one.main ns=n pod=p container=main uid=0 "
                          "devices=%s/%d/%d" % (uuid, Gi, Gi)).encode())
        self.assertTrue(reply.startswith("gpufrac/1 ok"), reply)
        self.fsock = os.path.join(self.state, "fractions", "k8s.one.main", "agent.sock")
        self.wait_for(lambda: os.path.exists(self.fsock), "the fraction's socket")
        self.socks = [self.sock, os.path.join(self.state, "users.sock"), self.fsock]
        self.inodes = [os.stat(p).st_ino for p in self.socks]

    def second_agent(self, metrics):
        """Runs another agent on the same state directory; returns (rc, output).
        One that starts serving is stopped again and reported as such."""
        log = os.path.join(self.tmp, "agent2.log")
        with open(log, "w") as out:
            p = subprocess.Popen(
                [test_agent.AGENT, "--state-dir", self.state, "--metrics-listen", metrics,
                 "--watchdog-period-ms", "100", "--mps-control", FAKE_MPS],
                env=self.env, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(p)

        def text():
            with open(log) as f:
                return f.read()
        self.wait_for(lambda: p.poll() is not None or "ready:" in text(),
                      "the second agent to exit or start")
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)
            self.fail("a second agent started on a served state directory:\n" + text())
        return p.returncode, text()

    def assert_first_untouched(self):
        for path, ino in zip(self.socks, self.inodes):
            with self.subTest(socket=path):
                self.assertTrue(os.path.exists(path), "%s was removed" % path)
                self.assertEqual(os.stat(path).st_ino, ino, "%s was replaced" % path)
                self.assertTrue(ping(path).startswith("gpufrac/1 ok"), path)
        self.assertIsNone(self.agent.poll(), "the first agent still runs")

    def test_second_agent_refused_and_first_untouched(self):
        rc, out = self.second_agent("127.0.0.1:0")
        self.assertNotEqual(rc, 0, out)
        self.assert_first_untouched()
        self.assertIn("pid %d" % self.agent.pid, out)

    def test_second_agent_with_metrics_port_taken_touches_nothing(self):
        rc, out = self.second_agent("127.0.0.1:%s" % self.metrics_port())
        self.assertNotEqual(rc, 0, out)
        self.assert_first_untouched()
        self.assertIn("pid %d" % self.agent.pid, out)

    def test_lock_is_released_when_the_agent_dies(self):
        self.stop_agent(signal.SIGKILL)
        self.start_agent()  # waits for "ready:": the dead agent's lock holds nothing
        self.assertTrue(ping(self.sock).startswith("gpufrac/1 ok"))
        self.stop_agent()
        self.start_agent()
        self.assertTrue(ping(self.sock).startswith("gpufrac/1 ok"))


if __name__ == "__main__":
    cases.main(verbosity=2)
