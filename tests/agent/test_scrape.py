# SPDX-License-Identifier: Apache-2.0
"""/metrics never holds up the agent's loop. With many fractions, a scrape is
stalled inside the renderer (gpufracd-testhooks, GPUFRAC_TEST_METRICS_STALL=
<file>: the render waits until the file exists) while the test pings,
borrows and returns on the agent socket: every request must be answered
while that scrape is still in flight. And with a stand-in for a slow name
service (tests/agent/slow_nss.c: an LD_PRELOADed getpwuid_r that waits for a
file), scrapes and borrows are answered while the agent's user name lookup
is stuck in it; the page shows numeric uids until it comes back, then the
names (a uid without a passwd entry stays numeric). Round-trip figures are
printed, never asserted beyond a generous "answered at all" timeout."""
import os
import pwd
import socket
import statistics
import subprocess
import sys
import threading
import time
import unittest
import urllib.request

import cases

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from harness import BUILD, LEDGERTOOL, PROBE, SimTestCase, kv  # noqa: E402
import test_agent  # noqa: E402
from test_agent import AgentTestCase  # noqa: E402

HOOKED = os.path.join(BUILD, "tests", "gpufracd-testhooks")
SLOW_NSS = os.path.join(BUILD, "tests", "libgf_slow_nss.so")
FRACTIONS = 200
PAIRS = 100
ANSWER_S = 20  # "answered at all": a request stuck behind the stalled scrape never is


class ScrapeTestCase(AgentTestCase):
    """Agent started on FRACTIONS fractions made beforehand (f0000 ...)."""
    agent_bin = HOOKED

    def setUp(self):
        SimTestCase.setUp(self)
        self.state = os.path.join(self.tmp, "state")
        self.env["GPUFRAC_STATE_DIR"] = self.state
        self.agent = None
        os.makedirs(os.path.join(self.state, "fractions"))
        for i in range(FRACTIONS):
            self.add_fraction("f%04d" % i)
        self.agent_env = {}
        self.prepare()
        self.start_agent()

    def prepare(self):
        pass

    def start_agent(self):
        test_agent.AGENT = self.agent_bin
        saved = dict(self.env)
        self.env.update(self.agent_env)
        try:
            super().start_agent()
        finally:
            self.env = saved

    def add_fraction(self, name, owner=None):
        tmp = os.path.join(self.state, "fractions", "." + name)
        os.makedirs(tmp)
        ledger = os.path.join(tmp, "ledger")
        subprocess.run([LEDGERTOOL, "create", ledger, name], check=True, env=self.env)
        final = os.path.join(self.state, "fractions", name)
        with open(os.path.join(tmp, "config"), "w") as f:
            f.write("version=1\nname=%s\nledger=%s/ledger\nmode=time-slicing\n"
                    "compute_percent=100\nagent=%s\ndevice=*,%d,%d\n"
                    % (name, final, os.path.join(self.state, "agent.sock"), 4 << 20, 8 << 20))
        if owner is not None:
            os.chown(ledger, owner, -1)
        os.rename(tmp, final)

    def log_text(self):
        with open(os.path.join(self.tmp, "agent.log")) as f:
            return f.read()

    def page(self):
        url = "http://127.0.0.1:%s/metrics" % self.metrics_port()
        with urllib.request.urlopen(url, timeout=120) as r:
            return r.read().decode()

    def borrower(self, name):
        """A connection of this process, attached as the fraction's supervisor."""
        pid = os.getpid()
        self.assertIn("gpufrac/1 ok", self.ask(b"gpufrac/1 attach name=%s pid=%d"
                                                % (name.encode(), pid)))
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(ANSWER_S)
        s.connect(self.sock)
        return s

    def round_trips(self, s, uuid, pairs, while_what):
        """pairs × (ping, borrow 1 MiB, return 1 MiB); the borrow round trips in µs."""
        reqs = [b"gpufrac/1 ping",
                b"gpufrac/1 borrow dev=%s bytes=1048576" % uuid.encode(),
                b"gpufrac/1 return dev=%s bytes=1048576" % uuid.encode()]
        borrows = []
        for i in range(pairs):
            for j, req in enumerate(reqs):
                t0 = time.monotonic()
                s.send(req)
                try:
                    reply = s.recv(4096).decode()
                except socket.timeout:
                    self.fail("request %d (%s) got no answer in %d s %s"
                              % (i, req.decode().split()[1], ANSWER_S, while_what))
                if j == 1:
                    borrows.append((time.monotonic() - t0) * 1e6)
                self.assertTrue(reply.startswith("gpufrac/1 ok"), reply)
        return borrows

    def gpu_uuid(self):
        r = subprocess.run([PROBE, "uuid"], env=self.env, capture_output=True, text=True)
        return kv(r.stdout)["uuid"]

    def report(self, what, borrows):
        q = statistics.quantiles(borrows, n=100)
        print("# %s: %d borrows, median %.0f us, p99 %.0f us, max %.0f us"
              % (what, len(borrows), statistics.median(borrows), q[98], max(borrows)))


class StalledScrapeTest(ScrapeTestCase):
    def prepare(self):
        self.release = os.path.join(self.tmp, "release-the-render")
        self.agent_env = {"GPUFRAC_TEST_METRICS_STALL": self.release}

    def test_borrows_are_answered_while_a_scrape_is_stalled(self):
        uuid = self.gpu_uuid()
        s = self.borrower("f0000")
        got = {}
        scraper = threading.Thread(target=lambda: got.update(page=self.page()))
        scraper.start()
        try:
            self.wait_for(lambda: "metrics render stalled" in self.log_text(),
                          "the scrape to stall in the renderer")
            borrows = self.round_trips(s, uuid, PAIRS, "while a scrape was stalled")
            self.assertTrue(scraper.is_alive(), "the stalled scrape is still in flight")
        finally:
            open(self.release, "w").close()
            scraper.join(120)
            s.close()
        self.report("while a scrape is stalled in the renderer", borrows)
        self.assertFalse(scraper.is_alive())
        page = got["page"]
        self.assertIn("gpufrac_agent_fractions{Hostname=", page)
        self.assertEqual(page.count("gpufrac_fraction_memory_request_bytes{"), FRACTIONS)
        self.assertIn('fraction="f0000"', page)



def no_passwd_uid():
    uid = 3999700
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
        uid += 1


@unittest.skipUnless(os.geteuid() == 0, "gives ledgers to other uids (root only)")
class SlowNameServiceTest(ScrapeTestCase):
    agent_bin = os.path.join(BUILD, "bin", "gpufracd")

    def prepare(self):
        self.nss_log = os.path.join(self.tmp, "nss.log")
        self.release = os.path.join(self.tmp, "release-nss")
        self.nobody = no_passwd_uid()
        for i in range(20):
            self.add_fraction("u%04d" % i, owner=self.nobody)
        self.agent_env = {
            "LD_PRELOAD": SLOW_NSS, "GF_SLOW_NSS_LOG": self.nss_log,
            "GF_SLOW_NSS_RELEASE": self.release,
            # the stand-in is preloaded ahead of the sanitizer's runtime
            "ASAN_OPTIONS": "detect_leaks=0:verify_asan_link_order=0"}

    def nss(self):
        return open(self.nss_log).read() if os.path.exists(self.nss_log) else ""

    def test_a_stuck_name_service_holds_up_neither_scrapes_nor_borrows(self):
        uuid = self.gpu_uuid()
        s = self.borrower("f0000")
        try:
            page = self.page()  # answered though its lookups are still to come
            self.assertTrue('user="0",fraction="f0000"' in page, "root's uid, not yet its name")
            self.assertTrue('user="%d",fraction="u0000"' % self.nobody in page)
            self.wait_for(lambda: "enter" in self.nss(), "a lookup to be stuck in the name service")
            borrows = self.round_trips(s, uuid, PAIRS, "while a name lookup was stuck")
            page = self.page()
            self.assertTrue('user="0",fraction="f0000"' in page, "root's uid, not yet its name")
            self.assertNotIn("leave", self.nss(), "the lookup is still stuck")
        finally:
            open(self.release, "w").close()
            s.close()
        self.report("while the name service is stuck", borrows)
        self.wait_for(lambda: 'user="root",fraction="f0000"' in self.page(),
                      "root's name once the name service answers")
        page = self.page()
        self.assertTrue('user="%d",fraction="u0000"' % self.nobody in page)
        self.assertEqual(page.count("gpufrac_fraction_memory_request_bytes{"), FRACTIONS + 20)


if __name__ == "__main__":
    cases.main(verbosity=2)
