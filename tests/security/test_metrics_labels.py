# SPDX-License-Identifier: Apache-2.0
"""The label sets the agent keeps for who was evicted or killed
(gpufrac_evictions_total, gpufrac_watchdog_kills_total) are bounded: 300
fractions, each a container with its own hostile pod name (quotes,
backslashes, spaces, braces, non-ASCII), leave at most 256 label sets on the
page (the oldest dropped), the page still parses, and every value reads back
as the identity record wrote it. The same holds after a SIGKILL and restart."""
import os
import signal
import subprocess
import sys
import urllib.request

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "agent"))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import LEDGERTOOL, SimTestCase  # noqa: E402
from test_agent import AgentTestCase  # noqa: E402

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

FRACTIONS = 300
KEPT = 256


def pod_name(i):
    return 'p\\"%03d" {x}\\n é\\' % i


class MetricsLabelBoundTest(AgentTestCase):
    def setUp(self):
        SimTestCase.setUp(self)
        self.state = os.path.join(self.tmp, "state")
        self.env["GPUFRAC_STATE_DIR"] = self.state
        self.agent = None
        os.makedirs(os.path.join(self.state, "fractions"))
        for i in range(FRACTIONS):
            self.add_fraction("f%04d" % i, pod_name(i))
        self.start_agent()

    def add_fraction(self, name, pod):
        tmp = os.path.join(self.state, "fractions", "." + name)
        os.makedirs(tmp)
        subprocess.run([LEDGERTOOL, "create", os.path.join(tmp, "ledger"), name], check=True,
                       env=self.env)
        final = os.path.join(self.state, "fractions", name)
        with open(os.path.join(tmp, "config"), "w") as f:
            f.write("version=1\nname=%s\nledger=%s/ledger\nmode=time-slicing\n"
                    "compute_percent=100\ndevice=*,%d,%d\n" % (name, final, 4 << 20, 4 << 20))
        with open(os.path.join(tmp, "identity"), "w") as f:
            f.write("namespace=tenant\npod=%s\ncontainer=c\n" % pod)
        os.rename(tmp, final)

    def label_sets(self):
        url = "http://127.0.0.1:%s/metrics" % self.metrics_port()
        with urllib.request.urlopen(url, timeout=30) as r:
            text = r.read().decode()
        out = {}
        for fam in text_string_to_metric_families(text):
            if fam.name in ("gpufrac_evictions", "gpufrac_watchdog_kills"):
                out[fam.name] = [s.labels for s in fam.samples if s.name.endswith("_total")]
        return out

    def check(self):
        sets = self.wait_for(lambda: (lambda s: s if len(s.get("gpufrac_evictions", [])) == KEPT
                                      else None)(self.label_sets()), "the label sets")
        self.assertEqual(len(sets["gpufrac_watchdog_kills"]), KEPT)
        pods = sorted(s["pod"] for s in sets["gpufrac_evictions"])
        self.assertEqual(len(set(pods)), KEPT)
        self.assertTrue(set(pods) <= {pod_name(i) for i in range(FRACTIONS)}, pods[:3])
        self.assertTrue(all(s["namespace"] == "tenant" and s["container"] == "c"
                            for s in sets["gpufrac_evictions"]))

    def test_label_sets_stay_bounded_and_escaped(self):
        self.check()
        self.stop_agent(signal.SIGKILL)
        self.start_agent()
        self.check()


if __name__ == "__main__":
    cases.main(verbosity=2)
