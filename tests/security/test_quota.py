# SPDX-License-Identifier: Apache-2.0
"""GPU memory quota per namespace (annotation gpufrac.io/memory-quota on the
Namespace), against the real gpufrac-scheduler and the test API server
(tests/scheduler/kube_api_server.py), the test playing kube-scheduler.

What is sent: fractional pods past their namespace's quota through filter
and straight to bind; a tenant who can write its own pods but not its
Namespace, putting the quota annotation (1Ti) on its pod; Namespaces whose
quota is malformed ("40GB", "-1Gi", "1e400", a number past 64 bits, a NUL
byte, empty, spaces, a number instead of a string). What is refused: the pod
past the quota (filter and bind, the reason naming the quota and the use);
every pod of a namespace whose quota cannot be read (fail closed, the reason
and the log naming the field and the value). What stays alive: the
scheduler, other namespaces' pods, and the metrics showing each quota."""
import os
import sys

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scheduler"))
from sched_case import SchedulerCase  # noqa: E402
from test_e2e import Gi, agent_node, frac_pod  # noqa: E402

NODE = "n1"
ANN = "gpufrac.io/memory-quota"
BAD = {"suffix": "40GB", "negative": "-1Gi", "exponent": "1e400",
       "past-64-bits": "99999999999999999999Ei", "nul": "4\u0000Gi", "empty": "",
       "spaces": " 10Gi", "inner-space": "10 Gi"}


class QuotaTest(SchedulerCase):
    prefix = "gf-quota-"

    def setUp(self):
        self.start_scheduler()
        self.api.ok("POST", "/api/v1/nodes", agent_node(NODE, [("GPU-q-0", 0, 80 * Gi)]))
        self.namespace("team-a", "10Gi")
        self.eventually(lambda: 'namespace="team-a"} %d' % (10 * Gi) in self.metrics(),
                        "the quota of team-a in the metrics")

    def metrics(self):
        return self.sched.get("/metrics")[1]

    def namespace(self, name, quota):
        ann = {} if quota is None else {ANN: quota}
        self.api.ok("POST", "/api/v1/namespaces",
                    {"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": name, "annotations": ann}})

    def pod(self, name, ns, request, extra=None):
        return self.api.ok("POST", "/api/v1/namespaces/%s/pods" % ns,
                           frac_pod(name, request=request, ns=ns, extra=extra))

    def filter(self, pod):
        code, r = self.sched.post("filter", {"Pod": pod, "NodeNames": [NODE]})
        self.assertEqual(code, 200)
        return r

    def reason(self, pod):
        r = self.filter(pod)
        self.assertEqual(r.get("NodeNames") or [], [], r)
        return (r.get("FailedNodes") or {}).get(NODE, "")

    def bind(self, pod):
        md = pod["metadata"]
        code, r = self.sched.post("bind", {"PodName": md["name"], "PodNamespace": md["namespace"],
                                           "PodUID": md["uid"], "Node": NODE})
        return r.get("Error", "")

    def schedule(self, pod):
        r = self.filter(pod)
        self.assertEqual(r.get("NodeNames"), [NODE], r)
        self.assertEqual(self.bind(pod), "")

    def test_quota_enforced_at_filter_and_bind(self):
        for i in range(2):
            self.schedule(self.pod("a%d" % i, "team-a", "4Gi"))
        third = self.pod("a2", "team-a", "4Gi")
        why = self.reason(third)
        self.assertIn("namespace team-a's GPU memory quota (%s) is 10.00 GiB" % ANN, why)
        self.assertIn("request 8.00 GiB, this pod 4.00 GiB more", why)
        self.assertIn("namespace team-a's GPU memory quota", self.bind(third))
        self.assertIn('gpufrac_scheduler_namespace_memory_requested_bytes{namespace="team-a"} %d'
                      % (8 * Gi), self.metrics())
        # another namespace, no quota: not limited
        self.schedule(self.pod("b0", "team-b", "40Gi"))
        # a smaller pod still fits the rest of the quota
        self.schedule(self.pod("a3", "team-a", "2Gi"))

    def test_tenant_cannot_raise_its_quota_from_a_pod(self):
        self.schedule(self.pod("a0", "team-a", "8Gi"))
        sneaky = self.pod("a1", "team-a", "4Gi", extra={ANN: "1Ti"})
        self.assertIn("quota (%s) is 10.00 GiB" % ANN, self.reason(sneaky))

    def test_a_raised_quota_applies(self):
        self.schedule(self.pod("a0", "team-a", "8Gi"))
        pod = self.pod("a1", "team-a", "4Gi")
        self.assertIn("is 10.00 GiB", self.reason(pod))
        self.api.ok("PATCH", "/api/v1/namespaces/team-a", {"metadata": {"annotations": {
            ANN: "20Gi"}}}, ctype="application/merge-patch+json")
        self.eventually(lambda: self.filter(pod).get("NodeNames") == [NODE], "the new quota")

    def test_malformed_quotas_fail_closed(self):
        for name, value in BAD.items():
            self.namespace("bad-" + name, value)
        self.api.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": "bad-number",
                                                                "annotations": {ANN: 5}}})
        for name in list(BAD) + ["number"]:
            ns = "bad-" + name
            self.eventually(lambda ns=ns: 'quota_valid{namespace="%s"} 0' % ns in self.metrics(),
                            "namespace %s's quota refused" % ns)
            pod = self.pod("p", ns, "1Gi")
            why = self.reason(pod)
            self.assertIn("no fractional pods until the namespace's quota is fixed", why)
            self.assertIn(ANN, why)
            if name in ("suffix", "negative", "past-64-bits", "inner-space"):
                self.assertIn('"%s"' % BAD[name], why)
            self.assertIn("namespace %s" % ns, self.sched.tail(400))
        self.assertEqual(self.sched.get("/healthz")[0], 200)
        self.schedule(self.pod("fine", "team-b", "1Gi"))  # other namespaces unaffected


if __name__ == "__main__":
    cases.main(verbosity=2)
