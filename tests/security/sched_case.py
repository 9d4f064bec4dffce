# SPDX-License-Identifier: Apache-2.0
"""What the attacker suites against gpufrac-scheduler share: the real
scheduler on the test API server (tests/scheduler/kube_api_server.py) in a
private directory, stopped and removed after every case."""
import os
import shutil
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scheduler"))
from kube_api_server import ApiServerProcess  # noqa: E402
from test_e2e import SCHEDULER, TOKEN, Scheduler  # noqa: E402


class SchedulerCase(unittest.TestCase):
    prefix = "gf-sched-"

    @classmethod
    def setUpClass(cls):
        # the build always makes it: a missing scheduler is a failure, not a skip
        assert os.access(SCHEDULER, os.X_OK), "%s is not built" % SCHEDULER

    def start_scheduler(self):
        self.tmp = tempfile.mkdtemp(prefix=self.prefix)
        self.api = ApiServerProcess(self.tmp, token=TOKEN, tls=True,
                                    bookmark_interval=0.5).start()
        self.sched = Scheduler(self.tmp, self.api, "binpack")
        self.sched.start()

    def tearDown(self):
        try:
            self.sched.stop()
        finally:
            self.api.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def eventually(self, fn, what, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            v = fn()
            if v:
                return v
            if time.monotonic() > deadline:
                self.fail("timed out waiting for %s\n%s" % (what, self.sched.tail()))
            time.sleep(0.05)
