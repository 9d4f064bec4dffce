# SPDX-License-Identifier: Apache-2.0
"""Attacks on the reservation pods that open device-plugin GPUs to fractions
(scheduler/reserve.h). The real gpufrac-scheduler runs against the test API
server (tests/scheduler/kube_api_server.py); the test writes the pods a
tenant or a broken device plugin could make and plays kube-scheduler's
filter.

What is sent: a tenant's look-alike reservation pod (the label, a bound
node, the report container's message naming a GPU) in its own namespace;
reservation pods in gpufrac-system whose report says something other than
one GPU UUID of the node (empty, two UUIDs, a newline, a NUL byte, 100,000
bytes, a GPU of another node, a failed exit); a tenant pod carrying NUL bytes
and a huge annotation. What is refused: every one of them opens nothing (the
node's GPUs stay closed to fractions) and the malformed reservations are
deleted, the log naming the value. What stays alive: gpufrac-scheduler
(/healthz), its watch (a pod made afterwards is still seen), and the one
well-formed reservation, which opens exactly its GPU."""
import json
import os
import sys

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scheduler"))
from sched_case import SchedulerCase  # noqa: E402
from test_e2e import Gi, agent_node, frac_pod  # noqa: E402

NODE, OTHER = "gpu-node", "other-node"
GPU_A, GPU_B, GPU_X = "GPU-aaaa-0001", "GPU-bbbb-0002", "GPU-xxxx-0009"
RESERVE_NS = "gpufrac-system"


def dp_node(name, gpus):
    """An agent node whose device plugin advertises nvidia.com/gpu."""
    n = agent_node(name, gpus)
    n["status"]["allocatable"] = {"nvidia.com/gpu": str(len(gpus)), "pods": "110"}
    return n


class ReservationAttacks(SchedulerCase):
    prefix = "gf-reserve-attack-"

    def setUp(self):
        self.start_scheduler()
        self.api.ok("POST", "/api/v1/nodes", dp_node(NODE, [(GPU_A, 0, 4 * Gi),
                                                             (GPU_B, 1, 4 * Gi)]))
        self.api.ok("POST", "/api/v1/nodes", dp_node(OTHER, [(GPU_X, 0, 4 * Gi)]))
        self.frac = self.api.ok("POST", "/api/v1/namespaces/default/pods",
                                frac_pod("frac", request="1Gi"))
        self.eventually(lambda: "not in gpufrac's cache" not in self.reason(),
                        "the scheduler to see the node")

    def filter(self):
        code, r = self.sched.post("filter", {"Pod": self.frac, "NodeNames": [NODE]})
        self.assertEqual(code, 200)
        return r

    def reason(self):
        r = self.filter()
        return (r.get("FailedNodes") or {}).get(NODE, "")

    def open_gpus(self):
        out = []
        for ln in self.sched.get("/metrics")[1].splitlines():
            if ln.startswith("gpufrac_scheduler_gpu_open{") and ln.endswith(" 1") and \
                    'node="%s"' % NODE in ln:
                out.append(ln.split('UUID="')[1].split('"')[0])
        return sorted(out)

    def reservation(self, ns, name, message, code=0, node=NODE):
        """A bound pod with the reservation label whose report container
        terminated with message (and exit code)."""
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": ns,
                            "labels": {"gpufrac.io/reservation": "true"}},
               "spec": {"nodeName": node, "containers": [{"name": "hold", "image": "x",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
        self.api.ok("POST", "/api/v1/namespaces/%s/pods" % ns, pod)
        self.api.ok("PATCH", "/api/v1/namespaces/%s/pods/%s/status" % (ns, name),
                    {"status": {"phase": "Running", "initContainerStatuses": [
                        {"name": "report", "state": {"terminated": {
                            "exitCode": code, "message": message}}}]}},
                    ctype="application/merge-patch+json")

    def gone(self, ns, name):
        status, _ = self.api.request("GET", "/api/v1/namespaces/%s/pods/%s" % (ns, name))
        return status == 404

    def assert_alive(self):
        self.assertEqual(self.sched.get("/healthz")[0], 200)
        # the watch still works: a node made now is seen
        name = "late-%d" % len(self.api.ok("GET", "/api/v1/nodes")["items"])
        self.api.ok("POST", "/api/v1/nodes", dp_node(name, [("GPU-late-" + name, 0, Gi)]))
        self.eventually(lambda: 'node="%s"' % name in self.sched.get("/metrics")[1],
                        "the scheduler to see node " + name)
        # and so does the pod watch: a fractional pod made now is counted
        before = self.pending()
        self.api.ok("POST", "/api/v1/namespaces/default/pods", frac_pod(name, request="1Gi"))
        self.eventually(lambda: self.pending() > before, "the scheduler to see pod " + name)

    def pending(self):
        for ln in self.sched.get("/metrics")[1].splitlines():
            if ln.startswith('gpufrac_scheduler_pods{state="pending"}'):
                return float(ln.rsplit(" ", 1)[1])
        return 0

    def test_closed_until_reserved(self):
        self.assertIn("0 of the node's 2 GPUs are reserved", self.reason())
        self.assertEqual(self.open_gpus(), [])

    def test_tenant_lookalike_opens_nothing(self):
        for ns in ("default", "tenant-a"):
            self.reservation(ns, "fake", GPU_A)
        self.reservation("tenant-a", "fake-b", GPU_B)
        self.assert_alive()
        self.assertEqual(self.open_gpus(), [])
        self.assertIn("0 of the node's 2 GPUs are reserved", self.reason())
        # and the scheduler never deletes a tenant's pod
        for ns, name in (("default", "fake"), ("tenant-a", "fake"), ("tenant-a", "fake-b")):
            self.assertFalse(self.gone(ns, name))

    def test_malformed_reports_open_nothing_and_are_deleted(self):
        bad = {"empty": ("", 0), "two": (GPU_A + "," + GPU_B, 0),
               "newline": (GPU_A + "\n" + GPU_B, 0), "nul": (GPU_A + "\u0000x", 0),
               "huge": ("G" * 100000, 0), "other-node": (GPU_X, 0), "space": (" " + GPU_A, 0),
               "failed": (GPU_A, 1)}
        for name, (msg, code) in bad.items():
            self.reservation(RESERVE_NS, "bad-" + name, msg, code)
        for name in bad:
            self.eventually(lambda n=name: self.gone(RESERVE_NS, "bad-" + n),
                            "reservation bad-%s deleted" % name)
        log = self.sched.tail(400)
        self.assertIn('termination message "%s,%s"' % (GPU_A, GPU_B), log)
        self.assertIn('GPU "%s" is not in node %s' % (GPU_X, NODE), log)
        self.assertIn("init container report exited 1", log)
        self.assert_alive()
        self.assertEqual(self.open_gpus(), [])

    def test_tenant_pod_with_nul_bytes_and_huge_values(self):
        evil = frac_pod("evil", request="1Gi", extra={
            "x": "a\u0000b", "big": "v" * 200000})
        evil["metadata"]["labels"] = {"gpufrac.io/reservation": "true"}
        evil["spec"]["nodeName"] = NODE
        self.api.ok("POST", "/api/v1/namespaces/default/pods", evil)
        self.assert_alive()
        self.assertEqual(self.open_gpus(), [])
        # filter refuses the pod itself (kube-scheduler retries only it)
        with self.assertRaisesRegex(AssertionError, "filter answered 400.*u0000"):
            self.sched.post("filter", {"Pod": self.api.ok(
                "GET", "/api/v1/namespaces/default/pods/evil"), "NodeNames": [NODE]})
        self.assertEqual(self.sched.get("/healthz")[0], 200)

    def test_well_formed_reservation_opens_its_gpu_only(self):
        self.reservation(RESERVE_NS, "good", GPU_B)
        self.eventually(lambda: self.open_gpus() == [GPU_B], "GPU B open")
        r = self.filter()
        self.assertEqual(r.get("NodeNames"), [NODE], r)
        md = self.frac["metadata"]
        code, b = self.sched.post("bind", {"PodName": md["name"], "PodNamespace": "default",
                                           "PodUID": md["uid"], "Node": NODE})
        self.assertEqual(b.get("Error", ""), "", b)
        pod = self.api.ok("GET", "/api/v1/namespaces/default/pods/frac")
        self.assertEqual(pod["metadata"]["annotations"]["nvidia.com/container.main.gpus.devices"],
                         GPU_B)
        # a reservation deleted under the fraction closes its GPU to new ones
        self.api.ok("DELETE", "/api/v1/namespaces/%s/pods/good" % RESERVE_NS)
        self.eventually(lambda: self.open_gpus() == [], "GPU B closed")


if __name__ == "__main__":
    cases.main(verbosity=2)
