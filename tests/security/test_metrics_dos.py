# SPDX-License-Identifier: Apache-2.0
"""Slow clients cannot take /healthz and /metrics away: 200 connections to the
agent's metrics port, half sending a partial request and then nothing, half
sending a whole request and never reading the reply, all from 127.0.0.1;
while they are held, a fresh client from another address (127.0.0.2 stands
for the kubelet's or Prometheus' own address) gets /healthz 200 and a
/metrics page within a 5 s client timeout, the agent lives and its socket
answers ping. The probe latencies are printed (recorded, not asserted)."""
import http.client
import os
import socket
import statistics
import sys
import time

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "agent"))
from test_agent import AgentTestCase  # noqa: E402

SLOW = 200
PROBES = 20
PROBE_FROM = "127.0.0.2"  # any 127/8 address is this host's loopback on Linux


class MetricsDosTest(AgentTestCase):
    def setUp(self):
        super().setUp()
        self.addr = ("127.0.0.1", int(self.metrics_port()))
        self.held = []

    def tearDown(self):
        for s in self.held:
            s.close()
        super().tearDown()

    def open_slow(self, n, *payloads):
        """n connections that each send one of payloads (in turn) and then
        neither send nor read again; returns how many connected (the agent may
        close them later)."""
        ok = 0
        for i in range(n):
            payload = payloads[i % len(payloads)]
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            s.settimeout(2)
            try:
                s.connect(self.addr)
                s.sendall(payload)
                ok += 1
            except OSError:
                pass
            self.held.append(s)
        return ok

    def get(self, path, source=PROBE_FROM):
        c = http.client.HTTPConnection(*self.addr, timeout=5, source_address=(source, 0))
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read().decode()
        finally:
            c.close()

    def closed_by_agent(self):
        n = 0
        for s in self.held:
            try:
                s.setblocking(False)
                if s.recv(1, socket.MSG_PEEK) == b"":
                    n += 1
            except BlockingIOError:
                pass
            except OSError:
                n += 1
        return n

    def test_healthz_answers_while_slow_clients_hold_connections(self):
        opened = self.open_slow(SLOW, b"GET /hea",
                                b"GET /metrics HTTP/1.1\r\nHost: agent\r\n\r\n")
        latencies = []
        for _ in range(PROBES):
            t = time.monotonic()
            status, body = self.get("/healthz")
            latencies.append((time.monotonic() - t) * 1000)
            self.assertEqual((status, body), (200, "ok\n"))
        status, page = self.get("/metrics")
        self.assertEqual(status, 200)
        self.assertIn("gpufrac_agent_requests_total", page)
        print("\nmetrics_dos: %d of %d slow connections opened (partial requests and unread "
              "replies in turn), %d of them already ended by the agent (EOF or reset); "
              "/healthz from %s: median %.1f ms, max %.1f ms over %d probes"
              % (opened, SLOW, self.closed_by_agent(), PROBE_FROM,
                 statistics.median(latencies), max(latencies), PROBES), flush=True)
        self.assertIsNone(self.agent.poll(), "the agent lives")
        self.assertTrue(self.ask(b"gpufrac/1 ping").startswith("gpufrac/1 ok"))

    def test_the_slow_clients_own_address_is_served_again_once_they_go(self):
        self.open_slow(SLOW, b"GET /hea")
        for s in self.held:
            s.close()
        self.held = []

        def healthy():
            try:
                return self.get("/healthz", source="127.0.0.1") == (200, "ok\n")
            except OSError:
                return False
        self.wait_for(healthy, "/healthz from 127.0.0.1 after its slow clients closed")
        self.assertTrue(self.ask(b"gpufrac/1 ping").startswith("gpufrac/1 ok"))


if __name__ == "__main__":
    cases.main(verbosity=2)
