# SPDX-License-Identifier: Apache-2.0
"""gpufrac_refusals_total{verb,reason} counts the agent's error replies by
verb and by a reason from a fixed set (an unknown verb is "other", never the
request's text), every pair shown from the start at 0, and a SIGKILL and
restart lowers none; gpufrac_build_info{version,commit} is 1 with the
project's version and the commit the build was configured from."""
import os
import re
import signal
import socket
import subprocess
import sys

import cases

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_agent import AgentTestCase  # noqa: E402

SOURCE = os.environ.get("GPUFRAC_SOURCE") or os.path.join(os.path.dirname(__file__), "..", "..")
VERBS = ["ping", "borrow", "return", "reclaim", "mps", "release", "admit", "attach", "run",
         "end", "other"]
REASONS = ["bad_request", "not_caller", "no_fraction", "in_use", "policy", "fit",
           "journal_full", "other"]


class RefusalsTest(AgentTestCase):
    def refusals(self):
        return {(dict(lb)["verb"], dict(lb)["reason"]): v
                for (n, lb), v in self.metrics().items() if n == "gpufrac_refusals_total"}

    def ask_users(self, payload):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(10)
        s.connect(os.path.join(self.state, "users.sock"))
        s.send(payload)
        reply = s.recv(8192).decode()
        s.close()
        return reply

    def test_refusals_by_verb_and_reason(self):
        before = self.refusals()
        self.assertEqual(sorted(before), sorted((v, r) for v in VERBS for r in REASONS))
        self.assertEqual(set(before.values()), {0.0})
        # one that does not decode has no verb: gpufrac_agent_bad_requests_total's alone
        for payload in (b'gpufrac/1 frob"nicate', b"gpufrac/1 frobnicate"):
            self.assertIn("error", self.ask(payload))
        self.assertIn("error", self.ask(b"gpufrac/1 release name=nosuch"))
        self.assertIn("error", self.ask_users(b"gpufrac/1 borrow dev=0 bytes=1"))
        self.assertIn("error", self.ask(b"gpufrac/1 borrow dev=nosuch bytes=1"))
        want = {("other", "bad_request"): 1, ("release", "no_fraction"): 1,
                ("borrow", "not_caller"): 1, ("borrow", "bad_request"): 1}
        got = self.wait_for(lambda: (lambda r: r if all(r.get(k) == v for k, v in want.items())
                                     else None)(self.refusals()), "the refusals counted")
        self.assertEqual({k: v for k, v in got.items() if v}, want)
        self.stop_agent(signal.SIGKILL)
        self.start_agent()
        self.assertEqual({k: v for k, v in self.refusals().items() if v}, want)

    def test_build_info(self):
        info = [dict(lb) for (n, lb), v in self.metrics().items()
                if n == "gpufrac_build_info" and v == 1]
        self.assertEqual(len(info), 1, info)
        with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
            version = re.search(r"project\(gpufrac VERSION (\S+)", f.read()).group(1)
        self.assertEqual(info[0]["version"], version)
        commit = info[0]["commit"]
        self.assertRegex(commit, r"^([0-9a-f]{12}|unknown)$")
        if commit != "unknown":
            self.assertEqual(subprocess.run(["git", "-C", SOURCE, "cat-file", "-e",
                                             commit + "^{commit}"]).returncode, 0, commit)


if __name__ == "__main__":
    cases.main(verbosity=2)
