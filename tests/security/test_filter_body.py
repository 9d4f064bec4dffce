# SPDX-License-Identifier: Apache-2.0
"""Filter bodies built to make the fast path that finds NodeNames and the full
JSON parse read different nodes, against the real gpufrac-scheduler on the
test API server (tests/scheduler/kube_api_server.py), the test playing
kube-scheduler. Anyone who reaches the extender's port can send these.

What is sent: names with escapes ("n\\u0031" is n1; "n1\\",\\"n2" is one name),
NodeNames next to another spelling of the key, NodeNames twice, NodeNames
inside the pod, a name past the length limit, a NUL byte, raw non-ASCII,
nesting past the fast path's depth, trailing bytes after the object, the
known names among near-misses of them at every position of a list longer
than filter's lookahead (it looks nodes up a few names early). What is
refused: the malformed bodies (HTTP 400, naming what is wrong) and every node
the full parse does not name. What stays alive: the scheduler, and an
ordinary filter right after."""
import http.client
import json

import cases
from sched_case import SchedulerCase
from test_e2e import Gi, agent_node, frac_pod


class FilterBodyTest(SchedulerCase):
    prefix = "gf-filter-body-"

    def setUp(self):
        self.start_scheduler()
        for n in ("n1", "n2"):
            self.api.ok("POST", "/api/v1/nodes", agent_node(n, [("GPU-%s" % n, 0, 16 * Gi)]))
        self.pod = json.dumps(self.api.ok("POST", "/api/v1/namespaces/default/pods",
                                          frac_pod("p", request="4Gi")))
        self.eventually(lambda: self.passed('{"Pod":%s,"NodeNames":["n1","n2"]}' % self.pod)
                        is not None, "both nodes in the scheduler's cache")

    def send(self, body):
        host, port = self.sched.url.split("//")[1].split(":")
        c = http.client.HTTPConnection(host, int(port), timeout=30)
        raw = body.encode("latin-1") if isinstance(body, str) else body
        c.request("POST", "/filter", raw, {"Content-Type": "application/json"})
        r = c.getresponse()
        out = r.status, r.read().decode("utf-8", "replace")
        c.close()
        return out

    def passed(self, body):
        """The node names a 200 answer passes (None while a node is unknown)."""
        code, text = self.send(body)
        self.assertEqual(code, 200, text)
        r = json.loads(text)
        if any("not in gpufrac's cache" in v for v in (r.get("FailedNodes") or {}).values()):
            return None
        return r.get("NodeNames") or []

    def refused(self, body, *words):
        code, text = self.send(body)
        self.assertEqual(code, 400, text)
        for w in words:
            self.assertIn(w, text)

    def test_escaped_names_are_read_as_json_says(self):
        # n\u0031 is n1: judged as n1, the node that fits
        self.assertEqual(self.passed('{"Pod":%s,"NodeNames":["n\\u0031"]}' % self.pod), ["n1"])
        # one name holding a quote and a comma, not two names
        code, text = self.send('{"Pod":%s,"NodeNames":["n1\\",\\"n2"]}' % self.pod)
        self.assertEqual(code, 200, text)
        r = json.loads(text)
        self.assertEqual(r.get("NodeNames") or [], [])
        self.assertEqual(list(r["FailedNodes"]), ['n1","n2'])

    def test_other_spellings_and_places_of_the_key_are_not_the_names(self):
        # Go's rule: the exact key wins over another spelling
        self.assertEqual(self.passed('{"Pod":%s,"nodenames":["n2"],"NodeNames":["n1"]}'
                                     % self.pod), ["n1"])
        # a NodeNames inside the pod is the pod's, not the request's
        pod = json.loads(self.pod)
        pod["NodeNames"] = ["n2"]
        self.assertEqual(self.passed('{"Pod":%s,"NodeNames":["n1"]}' % json.dumps(pod)), ["n1"])
        # a key that decodes to NodeNames is the same key twice
        self.refused('{"Pod":%s,"NodeNames":["n1"],"Node\\u004eames":["n2"]}' % self.pod,
                     "duplicate")
        self.refused('{"Pod":%s,"NodeNames":["n1"],"NodeNames":["n2"]}' % self.pod, "duplicate")

    def test_malformed_bodies_refused_and_the_scheduler_stays(self):
        long_name = "n" * 300
        bad = [
            ('{"Pod":%s,"NodeNames":["%s"]}' % (self.pod, long_name), "NodeNames[0]"),
            ('{"Pod":%s,"NodeNames":["n1\x00"]}' % self.pod, "not JSON"),
            ('{"Pod":%s,"NodeNames":["n\xff1"]}' % self.pod, "not JSON"),
            ('{"Pod":%s,"NodeNames":["n1"]} x' % self.pod, "not JSON"),
            ('{"Pod":%s,"NodeNames":["n1",]}' % self.pod, "not JSON"),
            ('{"Pod":%s,"NodeNames":[""]}' % self.pod, "NodeNames[0]"),
            ('{"Pod":%s,"NodeNames":"n1"}' % self.pod, "not a list"),
        ]
        for body, words in bad:
            self.refused(body, words)
        # deeper than the fast path follows: the full parse still decides
        deep = '{"Pod":%s,"x":%s1%s,"NodeNames":["n1"]}' % (self.pod, "[" * 200, "]" * 200)
        self.assertEqual(self.passed(deep), ["n1"])
        # kube-scheduler's largest: thousands of names, far past one read buffer
        many = ["n1"] + ["gone-%05d" % i for i in range(4999)]
        code, text = self.send('{"Pod":%s,"NodeNames":%s}' % (self.pod, json.dumps(many)))
        self.assertEqual(code, 200, text)
        r = json.loads(text)
        self.assertEqual(r.get("NodeNames"), ["n1"])
        self.assertEqual(len(r["FailedNodes"]), 4999)
        self.assertEqual(self.sched.get("/healthz")[0], 200)
        self.assertIn(self.passed('{"Pod":%s,"NodeNames":["n2","n1"]}' % self.pod),
                      (["n1"], ["n2"]))

    def test_each_listed_name_is_judged_as_itself(self):
        # near-misses of the known names ("n", "n10", "n1x", "N1", "n1 ") around
        # them, a known name first, one last, repeats: every unknown name fails
        # as unknown, no known one does, whatever its place in the list
        near = ["n", "n10", "n1x", "N1", "n1 ", "n2\t", "m1"]
        names = ["n2"]
        for i in range(40):
            names.append(near[i % len(near)] + ("" if i < len(near) else str(i)))
            if i % 9 == 0:
                names.append("n1" if i % 2 else "n2")
        names.append("n1")
        code, text = self.send(json.dumps({"Pod": json.loads(self.pod), "NodeNames": names}))
        self.assertEqual(code, 200, text)
        r = json.loads(text)
        unknown = {n for n in names if n not in ("n1", "n2")}
        self.assertEqual(set(r["FailedNodes"]), unknown)
        for n in unknown:
            self.assertIn("not in gpufrac's cache", r["FailedNodes"][n])
        self.assertIn(r.get("NodeNames"), (["n1"], ["n2"]))


if __name__ == "__main__":
    cases.main(verbosity=2)
