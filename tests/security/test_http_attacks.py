#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Attacks on the extender's HTTP server (two epoll workers, a bind's
connection suspended until the API server answers), each against the real
gpufrac-scheduler on the test API server: what the attacker sends, what is
refused, and that /healthz and a filter are answered afterwards and the
scheduler stops cleanly (exit 0: no sanitizer report)."""
import http.client
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import cases
from ports import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scheduler"))
from kube_api_server import ApiServerProcess  # noqa: E402

BUILD = os.environ.get("GPUFRAC_BUILD", os.path.join(HERE, "..", "..", "build"))
SCHEDULER = os.path.join(BUILD, "bin", "gpufrac-scheduler")
TOKEN = "attack-token"


def post(path, body):
    return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (path.encode(), len(body))) + body


def bind_body(ns, name, uid, node="n1"):
    return json.dumps({"PodName": name, "PodNamespace": ns, "PodUID": uid,
                       "Node": node}).encode()


def read_responses(s, n, deadline=60):
    """The bodies of n responses read off s (Content-Length framed)."""
    s.settimeout(deadline)
    buf, bodies = b"", []
    while len(bodies) < n:
        head, sep, rest = buf.partition(b"\r\n\r\n")
        if sep:
            length = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v)
            if len(rest) >= length:
                bodies.append(rest[:length])
                buf = rest[length:]
                continue
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    return bodies


class HttpAttacks(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        assert os.access(SCHEDULER, os.X_OK), "%s is not built" % SCHEDULER

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gf-http-attacks-")
        self.api = ApiServerProcess(self.tmp, token=TOKEN).start()
        token_file = os.path.join(self.tmp, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        self.port = free_port()
        self.log = open(os.path.join(self.tmp, "scheduler.log"), "w")
        self.proc = subprocess.Popen(
            [SCHEDULER, "--listen", "127.0.0.1:%d" % self.port, "--api-server", self.api.url,
             "--token-file", token_file], stdout=self.log, stderr=subprocess.STDOUT)
        self.socks = []
        self.eventually(lambda: self.request("GET", "/healthz")[0] == 200, "synced")

    def tearDown(self):
        for s in self.socks:
            s.close()
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=180)
        finally:
            self.api.stop()
            self.log.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def tail(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()[-4000:]

    def eventually(self, fn, what, timeout=60):
        deadline = time.monotonic() + timeout
        while not fn():
            self.assertIsNone(self.proc.poll(), "scheduler exited\n" + self.tail())
            if time.monotonic() > deadline:
                self.fail("timed out waiting for %s\n%s" % (what, self.tail()))
            time.sleep(0.05)

    def request(self, method, path, body=None, timeout=10):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            c.request(method, path, body=body)
            r = c.getresponse()
            out = r.read()
            c.close()
            return r.status, out
        except OSError:
            return 0, b""

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        self.socks.append(s)
        return s

    def pod(self, name, ns="ml"):
        obj = self.api.ok("POST", "/api/v1/namespaces/%s/pods" % ns,
                          {"metadata": {"name": name, "namespace": ns},
                           "spec": {"containers": [{"name": "c", "image": "x"}]}})
        return obj["metadata"]["uid"]

    def node_name(self, ns, name):
        return self.api.ok("GET", "/api/v1/namespaces/%s/pods/%s" % (ns, name))["spec"].get(
            "nodeName")

    def bind_delay(self, seconds):
        self.api.ok("POST", "/_test/bind-delay", {"seconds": seconds})

    def assert_alive(self):
        """/healthz and a filter answered; the process still runs."""
        self.assertEqual(self.request("GET", "/healthz", timeout=30)[0], 200, self.tail())
        args = {"Pod": {"metadata": {"name": "f", "namespace": "ml", "uid": "u-f"},
                        "spec": {"containers": [{"name": "c"}]}},
                "NodeNames": ["n1"]}
        code, out = self.request("POST", "/filter", json.dumps(args), timeout=30)
        self.assertEqual(code, 200, self.tail())
        self.assertIn("NodeNames", json.loads(out))
        self.assertIsNone(self.proc.poll())

    def assert_clean_stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=180), 0, self.tail())

    def test_pipelined_behind_suspended_bind(self):
        """A bind and then a second bind and a page on one connection: each is
        answered in order, the queued ones after the bind's answer."""
        u1, u2 = self.pod("p1"), self.pod("p2")
        self.bind_delay(1)
        s = self.connect()
        page = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        s.sendall(post("/bind", bind_body("ml", "p1", u1))
                  + post("/bind", bind_body("ml", "p2", u2)) + page)
        self.assertEqual(read_responses(s, 3), [b'{"Error":""}', b'{"Error":""}', b"ok\n"])
        self.assertEqual(self.node_name("ml", "p1"), "n1")
        self.assertEqual(self.node_name("ml", "p2"), "n1")
        self.assert_alive()
        self.assert_clean_stop()

    def test_bind_body_one_byte_at_a_time(self):
        """A bind's request, headers and body, one byte per send."""
        uid = self.pod("slow")
        s = self.connect()
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = post("/bind", bind_body("ml", "slow", uid))
        for i in range(len(data)):
            s.sendall(data[i:i + 1])
        self.assertEqual(read_responses(s, 1), [b'{"Error":""}'])
        self.assertEqual(self.node_name("ml", "slow"), "n1")
        self.assert_alive()
        self.assert_clean_stop()

    def test_bind_client_gone(self):
        """A bind whose client hangs up while it waits for the API server: the
        binding is still made, and the server takes binds again afterwards."""
        uid = self.pod("gone")
        self.bind_delay(2)
        self.connect().sendall(post("/bind", bind_body("ml", "gone", uid)))
        self.eventually(lambda: self.api.ok("GET", "/_test/stats").get("bindings", 0) >= 1,
                        "the binding reached the API server")
        self.socks.pop().close()
        self.assert_alive()
        self.eventually(lambda: self.node_name("ml", "gone") == "n1", "the binding made")
        self.bind_delay(0)
        uid = self.pod("after")
        s = self.connect()
        s.sendall(post("/bind", bind_body("ml", "after", uid)))
        self.assertEqual(read_responses(s, 1), [b'{"Error":""}'], self.tail())
        self.assert_clean_stop()

    def test_sigterm_with_binds_suspended_and_clients_gone(self):
        """SIGTERM while binds wait for a stalled API server and their clients
        have hung up: the scheduler waits for the answers, makes the bindings
        and exits 0."""
        uids = [self.pod("t%d" % i) for i in range(20)]
        self.bind_delay(3)
        for i in range(20):
            self.connect().sendall(post("/bind", bind_body("ml", "t%d" % i, uids[i])))
        self.eventually(lambda: self.api.ok("GET", "/_test/stats").get("bindings", 0) >= 1,
                        "a binding reached the API server")
        for s in self.socks:
            s.close()
        self.socks = []
        self.assert_clean_stop()
        for i in range(20):
            self.assertEqual(self.node_name("ml", "t%d" % i), "n1")

    def test_binds_flood_a_stalled_api_server(self):
        """250 binds at once while the API server holds every binding: 192 wait,
        the rest are refused at once with nothing reserved, and filter and
        /healthz still get in; once the API server answers, the ones that
        waited are bound and the scheduler stops cleanly."""
        n = 250
        uids = [self.pod("q%d" % i) for i in range(n)]
        self.bind_delay(10)
        socks = []
        for i in range(n):
            s = self.connect()
            s.sendall(post("/bind", bind_body("ml", "q%d" % i, uids[i])))
            socks.append(s)
        refused, pending = [], list(socks)
        deadline = time.monotonic() + 60
        while len(refused) < n - 192 and pending and time.monotonic() < deadline:
            ready, _, _ = select.select(pending, [], [], 1)
            for s in ready:
                pending.remove(s)
                if b"binds waiting for the API server" in s.recv(65536):
                    refused.append(s)
        self.assertEqual(len(refused), n - 192, self.tail())
        for s in refused:
            s.close()
            self.socks.remove(s)
        self.assert_alive()
        self.bind_delay(0)
        self.eventually(lambda: sum(self.node_name("ml", "q%d" % i) == "n1" for i in range(n))
                        == 192, "the waiting binds made", timeout=120)
        self.assert_clean_stop()

    def test_slowloris_cannot_hold_every_connection(self):
        """260 connections each sending a request one byte every 2 s (so an
        idle timeout never fires): the server shuts each down once it has gone
        30 s without a whole request, kube-scheduler's filter and /healthz get
        in again while the attacker keeps trickling, and the server lives."""
        socks = []
        for _ in range(260):
            s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            s.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nX-slow: ")
            socks.append(s)
        closed = set()
        answered = False
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (answered and len(closed) >= 256):
            for i, s in enumerate(socks):
                if i in closed:
                    continue
                try:
                    s.sendall(b"a")
                except OSError:  # shut down by the server: reset or broken pipe
                    closed.add(i)
            if not answered:
                answered = self.request("GET", "/healthz", timeout=1)[0] == 200
            time.sleep(2)
        for s in socks:
            s.close()
        self.assertTrue(answered, "/healthz never got in\n" + self.tail())
        self.assertGreaterEqual(len(closed), 256, self.tail())
        with open(self.log.name, errors="replace") as f:
            self.assertIn("sent no whole request in 30 s", f.read())
        self.assert_alive()
        self.assert_clean_stop()


if __name__ == "__main__":
    cases.main()
