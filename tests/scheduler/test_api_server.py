# SPDX-License-Identifier: Apache-2.0
"""The test Kubernetes API server (kube_api_server.py) checked on its own:
real kubectl against it (get, annotate; skipped when no kubectl is found),
list pagination and selectors, watch with bookmarks, 410 after expiry and
after history overflow, the pods/binding subresource, merge and json patch,
bearer tokens. The scheduler's end-to-end tests trust these semantics."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import cases

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kube_api_server import ApiServerProcess  # noqa: E402


def kubectls():
    """GPUFRAC_KUBECTL (colon list) first, then kubectl on PATH."""
    out = []
    for k in os.environ.get("GPUFRAC_KUBECTL", "").split(":") + [shutil.which("kubectl")]:
        if k and os.access(k, os.X_OK) and os.path.realpath(k) not in [os.path.realpath(x)
                                                                        for x in out]:
            out.append(k)
    return out


def pod(name, ns="default", ann=None, node=None):
    p = {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": name, "namespace": ns, "annotations": dict(ann or {})},
         "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    if node:
        p["spec"]["nodeName"] = node
    return p


def binding(name, node, uid=None, ann=None, ns="default"):
    md = {"name": name, "namespace": ns}
    if uid:
        md["uid"] = uid
    if ann is not None:
        md["annotations"] = ann
    return {"apiVersion": "v1", "kind": "Binding", "metadata": md,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


class Base(unittest.TestCase):
    token = None
    tls = False
    history = 1000

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gf-apiserver-")
        self.api = ApiServerProcess(self.tmp, token=self.token, tls=self.tls,
                                    bookmark_interval=0.3, history=self.history).start()

    def tearDown(self):
        self.api.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def events(self, resp, n, until=None, timeout=10):
        """Reads n events (or until a type) from a watch response."""
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            line = resp.readline()
            if not line:
                break
            ev = json.loads(line)
            out.append(ev)
            if until and ev["type"] == until:
                break
        return out


class ApiSemantics(Base):
    def test_discovery_and_version(self):
        self.assertEqual(self.api.ok("GET", "/version")["major"], "1")
        self.assertEqual(self.api.ok("GET", "/api")["versions"], ["v1"])
        names = [r["name"] for r in self.api.ok("GET", "/api/v1")["resources"]]
        for r in ("pods", "nodes", "pods/binding", "pods/status"):
            self.assertIn(r, names)
        self.assertEqual(self.api.ok("GET", "/apis")["kind"], "APIGroupList")
        self.assertEqual(self.api.request("GET", "/openapi/v2")[0], 404)

    def test_create_get_delete(self):
        p = self.api.ok("POST", "/api/v1/namespaces/default/pods", pod("a"))
        self.assertTrue(p["metadata"]["uid"])
        self.assertTrue(p["metadata"]["creationTimestamp"].endswith("Z"))
        self.assertEqual(p["status"]["phase"], "Pending")
        code, st = self.api.request("POST", "/api/v1/namespaces/default/pods", pod("a"))
        self.assertEqual((code, st["reason"]), (409, "AlreadyExists"))
        got = self.api.ok("GET", "/api/v1/namespaces/default/pods/a")
        self.assertEqual(got["metadata"]["uid"], p["metadata"]["uid"])
        self.api.ok("DELETE", "/api/v1/namespaces/default/pods/a")
        code, st = self.api.request("GET", "/api/v1/namespaces/default/pods/a")
        self.assertEqual((code, st["reason"], st["kind"]), (404, "NotFound", "Status"))

    def test_list_pagination_and_selectors(self):
        for i in range(7):
            self.api.ok("POST", "/api/v1/namespaces/ns%d/pods" % (i % 2),
                        pod("p%d" % i, ns="ns%d" % (i % 2), node="n1" if i < 3 else None))
        rv = self.api.ok("GET", "/api/v1/pods")["metadata"]["resourceVersion"]
        names, cont, pages = [], "", 0
        while True:
            q = "/api/v1/pods?limit=3" + ("&continue=" + cont if cont else "")
            lst = self.api.ok("GET", q)
            pages += 1
            self.assertEqual(lst["metadata"]["resourceVersion"], rv, "one snapshot's version")
            names += [p["metadata"]["name"] for p in lst["items"]]
            if pages == 1:  # a write between pages is not seen by this list
                self.api.ok("POST", "/api/v1/namespaces/ns0/pods", pod("late", ns="ns0"))
            cont = lst["metadata"].get("continue")
            if not cont:
                break
        self.assertEqual(pages, 3)
        self.assertEqual(sorted(names), ["p%d" % i for i in range(7)])
        on = self.api.ok("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1")
        self.assertEqual(sorted(p["metadata"]["name"] for p in on["items"]), ["p0", "p1", "p2"])
        un = self.api.ok("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3D")
        self.assertEqual(len(un["items"]), 5)
        ns1 = self.api.ok("GET", "/api/v1/namespaces/ns1/pods")
        self.assertEqual(sorted(p["metadata"]["name"] for p in ns1["items"]), ["p1", "p3", "p5"])
        code, _ = self.api.request("GET", "/api/v1/pods?fieldSelector=spec.bogus%3Dx")
        self.assertEqual(code, 400)

    def test_continue_expires(self):
        for i in range(4):
            self.api.ok("POST", "/api/v1/namespaces/default/pods", pod("p%d" % i))
        cont = self.api.ok("GET", "/api/v1/pods?limit=2")["metadata"]["continue"]
        self.api.ok("POST", "/_test/expire")
        code, st = self.api.request("GET", "/api/v1/pods?limit=2&continue=" + cont)
        self.assertEqual((code, st["reason"]), (410, "Expired"))

    def test_merge_patch_and_json_patch(self):
        self.api.ok("POST", "/api/v1/namespaces/default/pods", pod("a", ann={"x": "1", "y": "2"}))
        p = self.api.ok("PATCH", "/api/v1/namespaces/default/pods/a",
                        {"metadata": {"annotations": {"x": None, "z": "3"}}},
                        "application/merge-patch+json")
        self.assertEqual(p["metadata"]["annotations"], {"y": "2", "z": "3"})
        rv = p["metadata"]["resourceVersion"]
        code, st = self.api.request("PATCH", "/api/v1/namespaces/default/pods/a",
                                    {"metadata": {"resourceVersion": "1", "labels": {"a": "b"}}},
                                    "application/merge-patch+json")
        self.assertEqual((code, st["reason"]), (409, "Conflict"))
        p = self.api.ok("PATCH", "/api/v1/namespaces/default/pods/a",
                        [{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
                         {"op": "add", "path": "/metadata/labels", "value": {"k": "v"}}],
                        "application/json-patch+json")
        self.assertEqual(p["metadata"]["labels"], {"k": "v"})
        code, _ = self.api.request("PATCH", "/api/v1/namespaces/default/pods/a",
                                   [{"op": "test", "path": "/metadata/resourceVersion",
                                     "value": rv}], "application/json-patch+json")
        self.assertEqual(code, 422, "stale json-patch test")
        code, st = self.api.request("PATCH", "/api/v1/namespaces/default/pods/a",
                                    {"spec": {"nodeName": "n1"}}, "application/merge-patch+json")
        self.assertEqual(code, 422, "spec.nodeName only through pods/binding")
        code, _ = self.api.request("PATCH", "/api/v1/namespaces/default/pods/a", {"a": 1},
                                   "application/apply-patch+yaml")
        self.assertEqual(code, 415)
        p = self.api.ok("PATCH", "/api/v1/namespaces/default/pods/a/status",
                        {"status": {"phase": "Succeeded"}}, "application/merge-patch+json")
        self.assertEqual(p["status"]["phase"], "Succeeded")

    def test_binding(self):
        p = self.api.ok("POST", "/api/v1/namespaces/default/pods", pod("a", ann={"keep": "me"}))
        uid = p["metadata"]["uid"]
        w = self.api.watch("/api/v1/pods?watch=1&resourceVersion=%s"
                           % p["metadata"]["resourceVersion"])
        code, st = self.api.request("POST", "/api/v1/namespaces/default/pods/nope/binding",
                                    binding("nope", "n1"))
        self.assertEqual((code, st["reason"]), (404, "NotFound"))
        code, st = self.api.request("POST", "/api/v1/namespaces/default/pods/a/binding",
                                    binding("a", "n1", uid="not-" + uid))
        self.assertEqual((code, st["reason"]), (409, "Conflict"))
        self.assertIn("UID in precondition", st["message"])
        code, st = self.api.request("POST", "/api/v1/namespaces/default/pods/a/binding",
                                    binding("b", "n1"))
        self.assertEqual(code, 400, "name in URL and body differ")
        code, st = self.api.request("POST", "/api/v1/namespaces/default/pods/a/binding",
                                    binding("a", "n1", uid=uid, ann={"g": "GPU-1", "keep": "me"}))
        self.assertEqual((code, st["status"]), (201, "Success"))
        got = self.api.ok("GET", "/api/v1/namespaces/default/pods/a")
        self.assertEqual(got["spec"]["nodeName"], "n1")
        self.assertEqual(got["metadata"]["annotations"], {"keep": "me", "g": "GPU-1"})
        cond = [c for c in got["status"]["conditions"] if c["type"] == "PodScheduled"]
        self.assertEqual(cond[0]["status"], "True")
        ev = self.events(w, 1)
        self.assertEqual(ev[0]["type"], "MODIFIED")
        self.assertEqual(ev[0]["object"]["spec"]["nodeName"], "n1")
        self.assertEqual(ev[0]["object"]["metadata"]["annotations"]["g"], "GPU-1")
        self.assertEqual(ev[0]["object"]["metadata"]["resourceVersion"],
                         got["metadata"]["resourceVersion"], "one update, one event")
        code, st = self.api.request("POST", "/api/v1/namespaces/default/pods/a/binding",
                                    binding("a", "n2", uid=uid))
        self.assertEqual((code, st["reason"]), (409, "Conflict"))
        self.assertIn("already assigned", st["message"])
        # the old collection form
        self.api.ok("POST", "/api/v1/namespaces/default/pods", pod("c"))
        self.api.ok("POST", "/api/v1/namespaces/default/bindings", binding("c", "n3"))
        self.assertEqual(self.api.ok("GET", "/api/v1/namespaces/default/pods/c")["spec"]
                         ["nodeName"], "n3")
        w.close()

    def test_concurrent_bindings_one_wins(self):
        p = self.api.ok("POST", "/api/v1/namespaces/default/pods", pod("a"))
        codes = []

        def go(node):
            codes.append(self.api.request("POST", "/api/v1/namespaces/default/pods/a/binding",
                                          binding("a", node, uid=p["metadata"]["uid"]))[0])
        ts = [threading.Thread(target=go, args=("n%d" % i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(sorted(codes), [201] + [409] * 7)

    def test_watch_events_bookmarks_and_timeout(self):
        lst = self.api.ok("GET", "/api/v1/pods")
        rv = lst["metadata"]["resourceVersion"]
        w = self.api.watch("/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=3"
                           "&resourceVersion=" + rv)
        self.api.ok("POST", "/api/v1/namespaces/default/pods", pod("a"))
        self.api.ok("PATCH", "/api/v1/namespaces/default/pods/a",
                    {"metadata": {"labels": {"x": "y"}}}, "application/merge-patch+json")
        self.api.ok("DELETE", "/api/v1/namespaces/default/pods/a")
        self.api.ok("POST", "/api/v1/nodes", {"metadata": {"name": "n1"}})  # other kind
        evs = self.events(w, 3)
        self.assertEqual([e["type"] for e in evs], ["ADDED", "MODIFIED", "DELETED"])
        bm = self.events(w, 5, until="BOOKMARK")
        self.assertEqual(bm[-1]["type"], "BOOKMARK")
        self.assertEqual(set(bm[-1]["object"]["metadata"]), {"resourceVersion"})
        self.assertGreater(int(bm[-1]["object"]["metadata"]["resourceVersion"]),
                           int(evs[-1]["object"]["metadata"]["resourceVersion"]))
        t0 = time.monotonic()
        while w.readline():  # timeoutSeconds ends the stream cleanly
            pass
        self.assertLess(time.monotonic() - t0, 5)
        w.close()

    def test_watch_without_version_lists_first(self):
        self.api.ok("POST", "/api/v1/namespaces/default/pods", pod("a"))
        w = self.api.watch("/api/v1/pods?watch=1")
        ev = self.events(w, 1)
        self.assertEqual((ev[0]["type"], ev[0]["object"]["metadata"]["name"]), ("ADDED", "a"))
        w.close()

    def test_watch_field_selector_translates_events(self):
        rv = self.api.ok("GET", "/api/v1/pods")["metadata"]["resourceVersion"]
        w = self.api.watch("/api/v1/pods?watch=1&resourceVersion=%s"
                           "&fieldSelector=spec.nodeName%%3Dn1" % rv)
        self.api.ok("POST", "/api/v1/namespaces/default/pods", pod("a"))
        self.api.ok("POST", "/api/v1/namespaces/default/pods/a/binding", binding("a", "n1"))
        ev = self.events(w, 1)
        self.assertEqual((ev[0]["type"], ev[0]["object"]["metadata"]["name"]), ("ADDED", "a"))
        w.close()

    def test_expire_gives_410(self):
        rv = self.api.ok("GET", "/api/v1/pods")["metadata"]["resourceVersion"]
        w = self.api.watch("/api/v1/pods?watch=1&resourceVersion=" + rv)
        new = self.api.ok("POST", "/_test/expire")["resourceVersion"]
        self.assertEqual(w.readline(), b"", "expiry ends open watches")
        w = self.api.watch("/api/v1/pods?watch=1&resourceVersion=" + rv)
        ev = self.events(w, 1)
        self.assertEqual(ev[0]["type"], "ERROR")
        self.assertEqual((ev[0]["object"]["code"], ev[0]["object"]["reason"]), (410, "Expired"))
        self.assertEqual(w.readline(), b"")
        w.close()
        relist = self.api.ok("GET", "/api/v1/pods")["metadata"]["resourceVersion"]
        self.assertEqual(relist, new)
        w = self.api.watch("/api/v1/pods?watch=1&resourceVersion=" + relist)
        self.api.ok("POST", "/api/v1/namespaces/default/pods", pod("after"))
        ev = self.events(w, 1)
        self.assertEqual((ev[0]["type"], ev[0]["object"]["metadata"]["name"]), ("ADDED", "after"))
        w.close()
        self.assertGreaterEqual(self.api.ok("GET", "/_test/stats")["gone"], 1)

    def test_close_watches(self):
        w = self.api.watch("/api/v1/nodes?watch=1&resourceVersion=1")
        self.api.ok("POST", "/_test/close-watches")
        self.assertEqual(w.readline(), b"")
        w.close()
        w = self.api.watch("/api/v1/nodes?watch=1&resourceVersion=1")
        self.api.ok("POST", "/_test/close-watches?abrupt=1")
        with self.assertRaises(Exception):  # no final chunk: the client sees a broken stream
            while w.readline():
                pass
            raise AssertionError("the stream ended cleanly")
        w.close()

    def test_request_log(self):
        self.api.ok("GET", "/api/v1/nodes?limit=5")
        log = self.api.ok("GET", "/_test/requests")
        self.assertIn({"method": "GET", "path": "/api/v1/nodes"},
                      [{"method": r["method"], "path": r["path"]} for r in log])
        self.api.ok("DELETE", "/_test/requests")
        self.assertEqual(self.api.ok("GET", "/_test/requests"), [])


class HistoryOverflow(Base):
    history = 5

    def test_too_old_version(self):
        rv = self.api.ok("GET", "/api/v1/pods")["metadata"]["resourceVersion"]
        for i in range(10):
            self.api.ok("POST", "/api/v1/namespaces/default/pods", pod("p%d" % i))
        w = self.api.watch("/api/v1/pods?watch=1&resourceVersion=" + rv)
        ev = self.events(w, 1)
        self.assertEqual((ev[0]["type"], ev[0]["object"]["code"]), ("ERROR", 410))
        w.close()
        recent = self.api.ok("GET", "/api/v1/namespaces/default/pods/p8")["metadata"]
        w = self.api.watch("/api/v1/pods?watch=1&resourceVersion=" + recent["resourceVersion"])
        ev = self.events(w, 1)
        self.assertEqual(ev[0]["object"]["metadata"]["name"], "p9")
        w.close()


class Token(Base):
    token = "s3cret"
    tls = True

    def test_token_required(self):
        code, st = self.api.request("GET", "/api/v1/pods", token=False)
        self.assertEqual((code, st["reason"]), (401, "Unauthorized"))
        code, _ = self.api.request("GET", "/api/v1/pods", token="wrong")
        self.assertEqual(code, 401)
        self.assertEqual(self.api.request("GET", "/api/v1/pods")[0], 200)
        self.api.ok("POST", "/_test/token", {"token": "rotated"})
        self.assertEqual(self.api.request("GET", "/api/v1/pods")[0], 401)
        self.assertEqual(self.api.request("GET", "/api/v1/pods", token="rotated")[0], 200)


class Kubectl(Base):
    """Real kubectl. client-go never sends a bearer token over plain HTTP, so
    this runs over TLS (self-signed, insecure-skip-tls-verify) with a token."""
    token = "kube-token"
    tls = True

    def setUp(self):
        self.kubectls = kubectls()
        if not self.kubectls:
            self.skipTest("no kubectl found (set GPUFRAC_KUBECTL or install kubernetes-client)")
        super().setUp()
        self.kcfg = self.api.kubeconfig(os.path.join(self.tmp, "kubeconfig"))

    def kubectl(self, k, *args):
        env = dict(os.environ, KUBECONFIG=self.kcfg, HOME=self.tmp)
        r = subprocess.run([k, "--cache-dir", os.path.join(self.tmp, "kcache")] + list(args),
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, "%s %s: %s" % (k, " ".join(args), r.stderr))
        return r.stdout

    def test_get_and_annotate(self):
        self.api.ok("POST", "/api/v1/nodes", {
            "metadata": {"name": "gpu-node-1", "labels": {"nvidia.com/gpu.count": "2"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        self.api.ok("POST", "/api/v1/namespaces/team-a/pods", pod("trainer", ns="team-a",
                                                                  ann={"a": "b"}))
        self.api.ok("POST", "/api/v1/namespaces/default/pods/", pod("other"))
        for k in self.kubectls:
            with self.subTest(kubectl=k):
                ver = self.kubectl(k, "version", "--client")
                out = self.kubectl(k, "get", "pods", "-A")
                self.assertRegex(out, r"team-a\s+trainer\s+0/1\s+Pending")
                self.assertRegex(out, r"default\s+other\s+")
                self.assertIn("NAMESPACE", out.splitlines()[0])
                out = self.kubectl(k, "get", "nodes")
                self.assertRegex(out, r"gpu-node-1\s+Ready")
                p = json.loads(self.kubectl(k, "get", "pod", "trainer", "-n", "team-a",
                                            "-o", "json"))
                self.assertEqual(p["metadata"]["annotations"], {"a": "b"})
                self.kubectl(k, "annotate", "pod", "trainer", "-n", "team-a", "--overwrite",
                             "k=v-" + os.path.basename(k))
                got = self.api.ok("GET", "/api/v1/namespaces/team-a/pods/trainer")
                self.assertEqual(got["metadata"]["annotations"]["k"], "v-" + os.path.basename(k))
                self.kubectl(k, "annotate", "pod", "trainer", "-n", "team-a", "k-")
                got = self.api.ok("GET", "/api/v1/namespaces/team-a/pods/trainer")
                self.assertNotIn("k", got["metadata"]["annotations"])
                sys.stderr.write("kubectl ok: %s (%s)\n" % (k, ver.strip().splitlines()[0]))


if __name__ == "__main__":
    cases.main(verbosity=2)
