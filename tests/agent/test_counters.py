# SPDX-License-Identifier: Apache-2.0
"""Counters never go down across a SIGKILL: requests (good and bad) are sent,
the page is scraped, the agent is SIGKILLed at once and started again, and
on the next page every sample of every counter family (agent-wide, per GPU
with an MPS fault counted, per fraction) is at least what the last scrape
showed. Prometheus reads any decrease as a counter reset."""
import os
import signal
import socket
import subprocess
import sys
import urllib.request

import cases

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_agent  # noqa: E402
from test_agent import FAKE_MPS, AgentTestCase  # noqa: E402
from check_metrics import structure  # noqa: E402

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

ROUNDS = 3


class CounterTest(AgentTestCase):
    # ticks (which journal request counts) are rare: a scrape sees counts no tick journaled
    extra_args = ["--watchdog-period-ms", "2000"]

    def counters(self):
        url = "http://127.0.0.1:%s/metrics" % self.metrics_port()
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        self.assertEqual(structure(text), [])
        out = {}
        for fam in text_string_to_metric_families(text):
            if fam.type != "counter":
                continue
            for s in fam.samples:
                if s.name.endswith("_total"):
                    out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    def traffic(self, good, bad):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(10)
        s.connect(self.sock)
        for i in range(good + bad):
            s.send(b"gpufrac/1 ping" if i < good else b"gpufrac/1 frobnicate")
            s.recv(4096)
        s.close()

    def mps_fault(self):
        _, _, pipe = test_agent.MpsTest.start_sm_fraction(self, "sm")
        subprocess.run([FAKE_MPS], input="start_server -uid %d\n" % os.getuid(), text=True,
                       env=dict(self.env, CUDA_MPS_PIPE_DIRECTORY=pipe), capture_output=True)
        open(os.path.join(pipe, "fault"), "w").close()
        self.wait_for(lambda: self.sample(self.metrics(), "gpufrac_gpu_mps_faults_total",
                                          gpu=0), "the MPS fault to be counted")

    def test_no_counter_is_lower_after_a_sigkill(self):
        self.mps_fault()
        for rnd in range(ROUNDS):
            self.traffic(good=150, bad=7)
            before = self.counters()
            self.stop_agent(signal.SIGKILL)
            self.start_agent()
            after = self.counters()
            lower = {"%s%s" % (name, dict(labels)): (v, after.get((name, labels)))
                     for (name, labels), v in before.items()
                     if (name, labels) in after and after[(name, labels)] < v}
            missing = [k for k in before if k not in after]
            print("round %d: %d counter samples; across the SIGKILL requests %s -> %s, "
                  "ticks %s -> %s" % (
                      rnd, len(before), *self.pair(before, after, "gpufrac_agent_requests_total"),
                      *self.pair(before, after, "gpufrac_agent_ticks_total")), flush=True)
            self.assertEqual(lower, {}, "counters lower after a restart (before, after)")
            self.assertEqual(missing, [], "counter samples gone after a restart")
        self.assertGreaterEqual(self.sample(self.metrics(), "gpufrac_gpu_mps_faults_total",
                                            gpu=0), 1)

    @staticmethod
    def pair(before, after, name):
        pick = lambda m: next((v for (n, _), v in m.items() if n == name), None)  # noqa: E731
        return pick(before), pick(after)


if __name__ == "__main__":
    cases.main(verbosity=2)
