# SPDX-License-Identifier: Apache-2.0
"""Attacks on gpufrac-scheduler's HTTP server (scheduler/server.c: a few
polling threads serve every connection; a bind's connection is suspended
until the API server answers). The real scheduler runs against the test API
server (tests/scheduler/kube_api_server.py), whose bindings are slowed down
where a test needs binds in flight.

What is sent: 300 idle connections (over the server's limit of 256); 200
connections dribbling a request's headers a byte at a time and one sending
an endless header; a bind whose client hangs up before the answer, for a pod
the API server binds and for one it refuses; binds while the API server's
token changes; 300 binds at once, each on its
own connection; SIGTERM while binds are in flight. What must hold: the
server keeps answering on a connection it already serves and answers new
clients once the idle ones are gone; the dribblers take no request away from
other clients; the endless header is cut off; an abandoned bind's outcome is
the same as an answered one's (the pod bound and counted, or the refused
pod's reservation given back); a binding sent with a rotated token is sent
again with the token file's, once, and a second 401 is answered as the API
server's error; every one of the 300 binds is answered and
the GPUs are never over-packed; every bind in flight at SIGTERM is answered
before the scheduler exits; the scheduler's thread count stays within a few
of its idle count throughout (a thread per connection would add hundreds);
the ASan build reports no leak or error at exit (Scheduler.stop checks)."""
import http.client
import json
import os
import socket
import sys
import threading
import time

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scheduler"))
from sched_case import SchedulerCase  # noqa: E402
from test_e2e import Gi, agent_node, frac_pod  # noqa: E402

LIMIT = 256  # MHD_OPTION_CONNECTION_LIMIT in scheduler/server.c
SLACK = 8    # threads the scheduler may start meanwhile (the API multiplexer, a watch restart)


FULL = ("gpufrac-scheduler has 192 binds waiting for the API server "
        "(retried by kube-scheduler)")


class HttpServerAttacks(SchedulerCase):
    prefix = "gf-http-attack-"

    def setUp(self):
        self.start_scheduler()
        self.addr = ("127.0.0.1", self.sched.port)
        self.held = []
        self.base_threads = self.threads()

    def tearDown(self):
        for s in self.held:
            s.close()
        super().tearDown()

    # --- helpers ---
    def threads(self):
        return len(os.listdir("/proc/%d/task" % self.sched.proc.pid))

    def assert_threads_bounded(self, when):
        n = self.threads()
        self.assertLessEqual(n, self.base_threads + SLACK,
                             "%d threads %s (%d idle)" % (n, when, self.base_threads))

    def healthz(self, conn=None):
        c = conn or http.client.HTTPConnection(*self.addr, timeout=10)
        try:
            c.request("GET", "/healthz")
            r = c.getresponse()
            r.read()
            return r.status
        finally:
            if conn is None:
                c.close()

    def metric(self, name):
        for ln in self.sched.get("/metrics")[1].splitlines():
            if ln.startswith(name + " "):
                return float(ln.split()[1])
        self.fail("no %s in /metrics" % name)

    def nodes(self, n, gpus=4):
        names = []
        for i in range(n):
            name = "n%d" % i
            self.api.ok("POST", "/api/v1/nodes", agent_node(
                name, [("GPU-%04d-%d" % (i, g), g, 16 * Gi) for g in range(gpus)]))
            names.append(name)
        probe = self.pod("probe", request="1Mi")

        def seen():
            code, r = self.sched.post("filter", {"Pod": probe, "NodeNames": names})
            failed = dict(r.get("FailedNodes") or {})
            return not any("not in gpufrac's cache" in v for v in failed.values())
        self.eventually(seen, "the scheduler to see the nodes")
        return names

    def pod(self, name, request="1Gi", **kw):
        return self.api.ok("POST", "/api/v1/namespaces/default/pods",
                           frac_pod(name, request=request, **kw))

    def filtered(self, pod, nodes):
        code, r = self.sched.post("filter", {"Pod": pod, "NodeNames": nodes})
        self.assertEqual(code, 200)
        return r.get("NodeNames") or []

    @staticmethod
    def bind_body(pod, node):
        md = pod["metadata"]
        return json.dumps({"PodName": md["name"], "PodNamespace": md["namespace"],
                           "PodUID": md["uid"], "Node": node}).encode()

    def bind(self, pod, node):
        c = http.client.HTTPConnection(*self.addr, timeout=60)
        try:
            c.request("POST", "/bind", self.bind_body(pod, node),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, json.loads(r.read())
        finally:
            c.close()

    def bind_delay(self, seconds):
        self.api.ok("POST", "/_test/bind-delay", {"seconds": seconds})

    def bindings_posted(self):
        return sum(1 for r in self.api.ok("GET", "/_test/requests")
                   if r["method"] == "POST" and r["path"].endswith("/binding"))

    def node_of(self, name):
        p = self.api.ok("GET", "/api/v1/namespaces/default/pods/" + name)
        return (p.get("spec") or {}).get("nodeName")

    # --- attacks ---
    def sockets(self):
        """The scheduler's open sockets: its clients', the API's, the listener."""
        fd = "/proc/%d/fd" % self.sched.proc.pid
        n = 0
        for f in os.listdir(fd):
            try:
                n += os.readlink(os.path.join(fd, f)).startswith("socket:")
            except FileNotFoundError:  # closed meanwhile
                pass
        return n

    def prioritize(self, conn):
        """A prioritize on conn (kept alive: a GET's answer closes its connection)."""
        conn.request("POST", "/prioritize", json.dumps({"Pod": self.probe, "NodeNames": []}),
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        self.assertIsNotNone(conn.sock, "the connection is kept alive")
        return r.status

    def test_idle_connections_over_the_limit(self):
        self.probe = self.pod("probe", request="1Mi")
        kept = http.client.HTTPConnection(*self.addr, timeout=10)
        self.assertEqual(self.prioritize(kept), 200)
        others = self.sockets() - 1
        for _ in range(300):
            self.held.append(socket.create_connection(self.addr, timeout=5))
        # the server takes idle connections up to its limit, never a thread more
        self.eventually(lambda: self.sockets() - others >= LIMIT,
                        "the server to take idle connections up to its limit")
        self.assertLessEqual(self.sockets() - others, LIMIT + SLACK, "the limit holds")
        self.assert_threads_bounded("with %d connections open" % LIMIT)
        self.assertEqual(self.prioritize(kept), 200, "a served connection stays served")
        for s in self.held:
            s.close()
        self.held = []
        self.eventually(lambda: self.healthz() == 200, "a new client to be served again")
        kept.close()

    def test_slowloris_headers_take_nothing_away(self):
        dribblers = []
        for _ in range(200):
            s = socket.create_connection(self.addr, timeout=5)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            dribblers.append(s)
        self.held.extend(dribblers)
        endless = socket.create_connection(self.addr, timeout=10)
        self.held.append(endless)
        endless.sendall(b"GET /healthz HTTP/1.1\r\nX-Endless: ")
        cut = False
        try:
            for _ in range(64):  # 64 KiB against a 16 KiB request memory
                endless.sendall(b"a" * 1024)
        except OSError:
            cut = True
        if not cut:
            try:
                answer = endless.recv(4096)
            except ConnectionResetError:
                answer = b""
            except socket.timeout:
                self.fail("an endless header is still read after 64 KiB")
            self.assertTrue(answer == b"" or answer.startswith(b"HTTP/1.1 4"),
                            "an endless header is answered as a request: %r" % answer[:80])
        for round_ in range(20):  # a byte each on every dribbler, probes between
            for s in dribblers:
                try:
                    s.sendall(b"X")
                except OSError:
                    pass
            self.assertEqual(self.healthz(), 200, "probe %d while 200 dribble" % round_)
        self.assert_threads_bounded("with 200 slow clients")
        nodes = self.nodes(1)
        p = self.pod("while-slow")
        self.assertEqual(self.filtered(p, nodes), nodes)
        self.assertEqual(self.bind(p, nodes[0]), (200, {"Error": ""}))

    def abandon_bind(self, pod, node):
        """Sends a bind and hangs up before its answer (the API server is slow)."""
        posted = self.bindings_posted()
        s = socket.create_connection(self.addr, timeout=5)
        body = self.bind_body(pod, node)
        s.sendall(b"POST /bind HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.eventually(lambda: self.bindings_posted() > posted,
                        "the binding to reach the API server")
        s.close()

    def test_bind_whose_client_hangs_up(self):
        nodes = self.nodes(1, gpus=1)
        a = self.pod("gone-a", request="10Gi")
        self.assertEqual(self.filtered(a, nodes), nodes)
        self.bind_delay(1.0)
        self.abandon_bind(a, nodes[0])
        self.eventually(lambda: self.metric("gpufrac_scheduler_binds_total") == 1,
                        "the abandoned bind to be made and counted")
        self.assertEqual(self.node_of("gone-a"), nodes[0])
        self.assertEqual(self.metric("gpufrac_scheduler_placements_total"), 1)
        # its 10 GiB stay counted: 8 GiB no longer fit on the 16 GiB GPU
        big = self.pod("gone-big", request="8Gi")
        self.assertEqual(self.filtered(big, nodes), [])
        # a binding the API server refuses, whose client hangs up, gives its reservation back
        b = self.pod("gone-b", request="5Gi")
        self.assertEqual(self.filtered(b, nodes), nodes)
        self.api.ok("POST", "/_test/bind-delay", {"seconds": 1.0, "refuse": 500})
        self.abandon_bind(b, nodes[0])
        self.eventually(lambda: self.metric("gpufrac_scheduler_bind_errors_total") == 1,
                        "the refused bind to be counted")
        self.assertIsNone(self.node_of("gone-b"))
        self.bind_delay(0)
        self.assertEqual(self.filtered(b, nodes), nodes, "the 5 GiB were given back")
        self.assertEqual(self.bind(b, nodes[0]), (200, {"Error": ""}))
        self.assertEqual(self.healthz(), 200)

    def rotate(self, api_token, file_token=None):
        self.api.ok("POST", "/_test/token", {"token": api_token})
        self.api.token = api_token
        if file_token:
            with open(self.sched.token_file, "w") as f:
                f.write(file_token + "\n")

    def test_bind_with_the_token_rotated(self):
        nodes = self.nodes(1, gpus=1)
        p = self.pod("rotated", request="4Gi")
        q = self.pod("unauthorized", request="4Gi")
        self.assertEqual(self.filtered(p, nodes), nodes)
        # the token the scheduler holds gets 401: the file is read again, the binding retried
        self.rotate("rotated-token", "rotated-token")
        self.assertEqual(self.bind(p, nodes[0]), (200, {"Error": ""}))
        self.assertEqual(self.node_of("rotated"), nodes[0])
        # the file's token is refused too: answered as the API server's error, not made
        self.assertEqual(self.filtered(q, nodes), nodes)
        self.rotate("another-token")
        code, r = self.bind(q, nodes[0])
        self.assertEqual(code, 200)
        self.assertIn("the API server refused the binding (HTTP 401)", r["Error"])
        self.assertIsNone(self.node_of("unauthorized"))
        self.rotate("another-token", "another-token")
        self.assertEqual(self.bind(q, nodes[0]), (200, {"Error": ""}))
        self.assertEqual(self.metric("gpufrac_scheduler_placements_total"), 2)

    def test_300_binds_at_once(self):
        nodes = self.nodes(10)  # 40 GPUs of 16 GiB: room for 640 pods of 1 GiB
        pods = [self.pod("burst-%d" % i) for i in range(300)]
        chosen = []
        for p in pods:  # kube-scheduler filters one pod at a time
            chosen.append(self.filtered(p, nodes)[0])
        self.bind_delay(0.5)
        answers = [None] * len(pods)
        peak, refused = [0], [0]

        def go(i):
            try:
                # past the binds that may wait at once: refused with nothing
                # reserved, and tried again, as kube-scheduler does
                while True:
                    answers[i] = self.bind(pods[i], chosen[i])
                    if answers[i] != (200, {"Error": FULL}):
                        break
                    refused[0] += 1
                    time.sleep(0.2)
            except Exception as e:  # noqa: BLE001 (reported below)
                answers[i] = ("raised", repr(e))
        ts = [threading.Thread(target=go, args=(i,)) for i in range(len(pods))]
        for t in ts:
            t.start()
        while any(t.is_alive() for t in ts):
            peak[0] = max(peak[0], self.threads())
            time.sleep(0.05)
        for t in ts:
            t.join()
        bad = [(i, a) for i, a in enumerate(answers) if a != (200, {"Error": ""})]
        self.maxDiff = None
        self.assertEqual(bad, [], "binds not answered with success")
        self.assertLessEqual(peak[0], self.base_threads + SLACK,
                             "%d threads during the burst (%d idle)"
                             % (peak[0], self.base_threads))
        self.assertEqual(self.metric("gpufrac_scheduler_binds_total"), 300)
        self.assertEqual(self.metric("gpufrac_scheduler_bind_errors_total"), 0,
                         "a refusal past the limit is not a failed bind")
        used = {}
        for p in self.api.ok("GET", "/api/v1/pods")["items"]:
            a = p["metadata"].get("annotations") or {}
            for k, v in a.items():
                if k.endswith(".gpus.devices"):
                    used[v] = used.get(v, 0) + 1
        self.assertEqual(sum(used.values()), 300)
        self.assertLessEqual(max(used.values()), 16, "a 16 GiB GPU holds 16 pods of 1 GiB")

    def test_sigterm_with_binds_in_flight(self):
        nodes = self.nodes(2)
        pods = [self.pod("late-%d" % i) for i in range(20)]
        chosen = [self.filtered(p, nodes)[0] for p in pods]
        self.bind_delay(2.0)
        answers = [None] * len(pods)

        def go(i):
            try:
                answers[i] = self.bind(pods[i], chosen[i])
            except Exception as e:  # noqa: BLE001 (reported below)
                answers[i] = ("raised", repr(e))
        ts = [threading.Thread(target=go, args=(i,)) for i in range(len(pods))]
        for t in ts:
            t.start()
        self.eventually(lambda: self.bindings_posted() == len(pods),
                        "every binding to reach the API server")
        self.sched.proc.terminate()
        for t in ts:
            t.join()
        self.assertEqual([a for a in answers if a != (200, {"Error": ""})], [],
                         "binds in flight at SIGTERM not answered")
        self.sched.proc.wait(timeout=30)
        self.assertEqual(self.sched.proc.returncode, 0, self.sched.tail())
        for p in pods:
            self.assertIn(self.node_of(p["metadata"]["name"]), nodes)


if __name__ == "__main__":
    cases.main(verbosity=2)
