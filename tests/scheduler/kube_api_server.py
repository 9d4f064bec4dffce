#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A test Kubernetes API server: exactly what gpufrac-scheduler and kubectl
use, nothing more. FOR TESTS ONLY (no TLS, no admission, no persistence).

Serves over plain HTTP on 127.0.0.1:
  discovery   /version /api /api/v1 /apis /healthz /readyz /livez
              (/openapi/v2 and /openapi/v3 answer 404: kubectl copes)
  pods        /api/v1/pods, /api/v1/namespaces/{ns}/pods[/{name}[/status]]
  nodes       /api/v1/nodes[/{name}[/status]]
  namespaces  /api/v1/namespaces[/{name}] (created on demand by a pod create)
  binding     POST /api/v1/namespaces/{ns}/pods/{name}/binding (and the old
              POST /api/v1/namespaces/{ns}/bindings)
Verbs: GET one, GET list (limit/continue pagination over a snapshot,
fieldSelector and labelSelector with = == != terms), POST create, PUT
(resourceVersion precondition), PATCH (merge-patch, strategic-merge-patch
treated as merge-patch, json-patch), DELETE; ?watch=1 (or /api/v1/watch/...)
with resourceVersion, allowWatchBookmarks, timeoutSeconds: a chunked stream of
newline-delimited {"type":...,"object":...} events out of a bounded history.
A watch from a version older than the history gets an ERROR event carrying a
410 Expired Status. Tables (Accept: ...;as=Table) for kubectl get.

Test controls (no token needed):
  POST /_test/expire         drop the watch history and list snapshots, bump
                             the version, end every watch: the next watch from
                             any earlier version gets 410 (so does a continue)
  POST /_test/close-watches  end every watch stream (?abrupt=1: cut the TCP
                             connection without the final chunk)
  POST /_test/token          {"token": "..."}: change the accepted token
  POST /_test/bind-delay     {"seconds": S, "refuse": CODE}: every binding
                             waits S seconds before it is made (an API server
                             under load), or refused with CODE when given
  GET  /_test/requests       every API request seen so far (method, path,
                             query, content type); DELETE clears the log
  GET  /_test/stats          counters: lists, watches, gone, bindings, ...

Run: kube_api_server.py [--port 0] [--port-file F] [--token T] [--tls-dir D]
         [--bookmark-interval 1.0] [--history 1000]
Prints "listening on 127.0.0.1:PORT" and writes PORT to --port-file.
--tls-dir D serves HTTPS with D/cert.pem + D/key.pem (a self-signed pair for
IP 127.0.0.1 is made with openssl when absent). kubectl (client-go) never sends
a bearer token over plain HTTP, so token tests with kubectl need --tls-dir.
"""
import argparse
import base64
import collections
import copy
import datetime
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

SERVER_VERSION = {
    "major": "1", "minor": "30", "gitVersion": "v1.30.0-gpufrac-test",
    "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
    "buildDate": "2024-01-01T00:00:00Z", "goVersion": "go1.22.0", "compiler": "gc",
    "platform": "linux/amd64",
}

# resource -> (kind, namespaced, short names, verbs)
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
RESOURCES = {
    "pods": ("Pod", True, ["po"], VERBS),
    "nodes": ("Node", False, ["no"], VERBS),
    "namespaces": ("Namespace", False, ["ns"], VERBS),
    "events": ("Event", True, ["ev"], VERBS),
}


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(s):
    try:
        return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc)
    except (TypeError, ValueError):
        return None


def human_age(ts):
    """kubectl's duration.HumanDuration, near enough."""
    t = parse_rfc3339(ts)
    if t is None:
        return "<unknown>"
    s = int((datetime.datetime.now(datetime.timezone.utc) - t).total_seconds())
    s = max(s, 0)
    if s < 120:
        return "%ds" % s
    m = s // 60
    if m < 10:
        return "%dm%ds" % (m, s % 60) if s % 60 else "%dm" % m
    if m < 180:
        return "%dm" % m
    h = m // 60
    if h < 8:
        return "%dh%dm" % (h, m % 60) if m % 60 else "%dh" % h
    if h < 48:
        return "%dh" % h
    d = h // 24
    if d < 8:
        return "%dd%dh" % (d, h % 24) if h % 24 else "%dd" % d
    return "%dd" % d


def status_obj(code, reason, message, details=None):
    st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
          "message": message, "reason": reason, "code": code}
    if details:
        st["details"] = details
    return st


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None):
        super().__init__(message)
        self.status = status_obj(code, reason, message, details)
        self.code = code


def not_found(res, name):
    return ApiError(404, "NotFound", '%s "%s" not found' % (res, name),
                    {"name": name, "kind": res})


def merge_patch(target, patch):
    """RFC 7386: objects merge member by member, null deletes, anything else
    replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", "json-patch path %r does not start with /" % path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(doc, ops):
    """RFC 6902: add, remove, replace, test, copy, move."""
    doc = copy.deepcopy(doc)
    if not isinstance(ops, list):
        raise ApiError(400, "BadRequest", "json-patch body must be a list of operations")

    def walk(parts):
        cur = doc
        for p in parts[:-1]:
            if isinstance(cur, list):
                cur = cur[int(p)]
            else:
                cur = cur[p]
        return cur

    def get(parts):
        cur = doc
        for p in parts:
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        return cur

    def put(parts, value, replace):
        parent = walk(parts)
        last = parts[-1]
        if isinstance(parent, list):
            if last == "-":
                parent.append(value)
            elif replace:
                parent[int(last)] = value
            else:
                parent.insert(int(last), value)
        else:
            if replace and last not in parent:
                raise KeyError(last)
            parent[last] = value

    def remove(parts):
        parent = walk(parts)
        last = parts[-1]
        if isinstance(parent, list):
            return parent.pop(int(last))
        return parent.pop(last)

    for op in ops:
        try:
            kind, parts = op["op"], _pointer(op["path"])
            if not parts:
                raise ApiError(422, "Invalid", "json-patch on the whole document is not supported")
            if kind == "add":
                put(parts, copy.deepcopy(op["value"]), False)
            elif kind == "replace":
                put(parts, copy.deepcopy(op["value"]), True)
            elif kind == "remove":
                remove(parts)
            elif kind == "test":
                if get(parts) != op["value"]:
                    raise ApiError(422, "Invalid", "the json-patch test at %s failed: %r != %r"
                                   % (op["path"], get(parts), op["value"]))
            elif kind in ("copy", "move"):
                src = _pointer(op["from"])
                val = copy.deepcopy(get(src))
                if kind == "move":
                    remove(src)
                put(parts, val, False)
            else:
                raise ApiError(422, "Invalid", "unknown json-patch op %r" % kind)
        except (KeyError, IndexError, ValueError, TypeError) as e:
            raise ApiError(422, "Invalid", "json-patch op %r cannot apply: %s" % (op, e))
    return doc


def _lookup(obj, dotted):
    cur = obj
    for p in dotted.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur


def parse_selector(s, what):
    """'a=b,c!=d,e' -> [(key, op, value)]; op in '=', '!=', 'exists', '!exists'."""
    terms = []
    if not s:
        return terms
    for term in s.split(","):
        term = term.strip()
        if not term:
            continue
        if "!=" in term:
            k, v = term.split("!=", 1)
            terms.append((k.strip(), "!=", v.strip()))
        elif "==" in term:
            k, v = term.split("==", 1)
            terms.append((k.strip(), "=", v.strip()))
        elif "=" in term:
            k, v = term.split("=", 1)
            terms.append((k.strip(), "=", v.strip()))
        elif what == "label" and term.startswith("!"):
            terms.append((term[1:].strip(), "!exists", None))
        elif what == "label":
            terms.append((term, "exists", None))
        else:
            raise ApiError(400, "BadRequest", "invalid %s selector term %r" % (what, term))
    return terms


FIELDS = {"metadata.name", "metadata.namespace", "spec.nodeName", "status.phase",
          "spec.schedulerName", "spec.unschedulable", "spec.restartPolicy",
          "spec.serviceAccountName", "status.podIP", "status.nominatedNodeName"}


def matches(obj, fields, labels):
    for k, op, v in fields:
        got = _lookup(obj, k)
        if got is None:
            got = ""
        elif isinstance(got, bool):
            got = "true" if got else "false"
        got = str(got)
        if (op == "=" and got != v) or (op == "!=" and got == v):
            return False
    lab = (obj.get("metadata") or {}).get("labels") or {}
    for k, op, v in labels:
        if op == "exists" and k not in lab:
            return False
        if op == "!exists" and k in lab:
            return False
        if op == "=" and lab.get(k) != v:
            return False
        if op == "!=" and lab.get(k) == v:
            return False
    return True


class Store:
    def __init__(self, history=1000, bookmark_interval=1.0, token=None):
        self.cond = threading.Condition()
        self.rv = 1
        self.objs = {r: {} for r in RESOURCES}
        # (rv, resource, type, object, previous object)
        self.history = collections.deque(maxlen=max(1, history))
        self.expired_below = 0   # a watch from a version below this gets 410
        self.watch_gen = 0       # bumped to end every watch
        self.abrupt = False
        self.snapshots = {}
        self.snap_seq = 0
        self.bookmark_interval = bookmark_interval
        self.token = token
        self.bind_delay = 0.0  # seconds every binding waits before it is made
        self.bind_refuse = 0  # an HTTP status every binding is refused with (0: none)
        self.requests = []
        self.stats = collections.Counter()
        with self.cond:
            for ns in ("default", "kube-system"):
                self._create_locked("namespaces", None, {"metadata": {"name": ns}})

    # --- writes (hold self.cond) ---
    def _bump(self):
        self.rv += 1
        return str(self.rv)

    def _event(self, res, typ, obj, old):
        if len(self.history) == self.history.maxlen:
            self.expired_below = max(self.expired_below, self.history[0][0])
        self.history.append((int(obj["metadata"]["resourceVersion"]), res, typ,
                             copy.deepcopy(obj), copy.deepcopy(old)))
        self.cond.notify_all()

    def _create_locked(self, res, ns, obj):
        kind, namespaced, _, _ = RESOURCES[res]
        if not isinstance(obj, dict):
            raise ApiError(400, "BadRequest", "the body is not a JSON object")
        obj = copy.deepcopy(obj)
        md = obj.setdefault("metadata", {})
        if not isinstance(md, dict):
            raise ApiError(400, "BadRequest", "metadata is not an object")
        if obj.get("kind") not in (None, kind):
            raise ApiError(400, "BadRequest", "kind %r posted to %s" % (obj.get("kind"), res))
        if namespaced:
            if md.get("namespace") not in (None, "", ns):
                raise ApiError(400, "BadRequest",
                               "the namespace of the provided object does not match the "
                               "namespace sent on the request")
            md["namespace"] = ns
            if (None, ns) not in self.objs["namespaces"]:
                self._create_locked("namespaces", None, {"metadata": {"name": ns}})
        else:
            md.pop("namespace", None)
        if not md.get("name"):
            if md.get("generateName"):
                md["name"] = md["generateName"] + uuid.uuid4().hex[:5]
            else:
                raise ApiError(422, "Invalid", "%s: metadata.name: Required value" % kind)
        key = (md.get("namespace"), md["name"])
        if key in self.objs[res]:
            raise ApiError(409, "AlreadyExists", '%s "%s" already exists' % (res, md["name"]),
                           {"name": md["name"], "kind": res})
        obj["apiVersion"] = "v1"
        obj["kind"] = kind
        md["uid"] = str(uuid.uuid4())
        md["creationTimestamp"] = now_rfc3339()
        md.pop("deletionTimestamp", None)
        md["resourceVersion"] = self._bump()
        if res == "pods":
            obj.setdefault("spec", {})
            st = obj.setdefault("status", {})
            st.setdefault("phase", "Pending")
        if res == "namespaces":
            obj.setdefault("status", {"phase": "Active"})
        self.objs[res][key] = obj
        self._event(res, "ADDED", obj, None)
        return obj

    def create(self, res, ns, obj):
        with self.cond:
            return copy.deepcopy(self._create_locked(res, ns, obj))

    def _get_locked(self, res, ns, name):
        obj = self.objs[res].get((ns if RESOURCES[res][1] else None, name))
        if obj is None:
            raise not_found(res, name)
        return obj

    def get(self, res, ns, name):
        with self.cond:
            return copy.deepcopy(self._get_locked(res, ns, name))

    def _replace_locked(self, res, old, new, sub):
        """Store new in place of old (same key): keep identity fields, apply
        the subresource rule (main: status kept; status: only status taken),
        refuse a changed spec.nodeName as the real server does."""
        if not isinstance(new, dict):
            raise ApiError(400, "BadRequest", "the result is not a JSON object")
        new = copy.deepcopy(new)
        md = new.get("metadata")
        if not isinstance(md, dict):
            md = new["metadata"] = {}
        for k in ("name", "namespace", "uid", "creationTimestamp"):
            if k in old["metadata"]:
                if md.get(k, old["metadata"][k]) != old["metadata"][k]:
                    raise ApiError(422, "Invalid", "metadata.%s: field is immutable" % k)
                md[k] = old["metadata"][k]
        if "deletionTimestamp" in old["metadata"]:
            md["deletionTimestamp"] = old["metadata"]["deletionTimestamp"]
        new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]
        if sub == "status":
            taken = copy.deepcopy(old)
            taken["status"] = new.get("status", {})
            new = taken
        elif res != "namespaces":
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        if res == "pods":
            was = (old.get("spec") or {}).get("nodeName")
            now = (new.get("spec") or {}).get("nodeName")
            if was != now:
                raise ApiError(422, "Invalid",
                               'Pod "%s" is invalid: spec.nodeName: Forbidden: pod updates may '
                               "not change spec.nodeName (bind through pods/binding)"
                               % old["metadata"]["name"])
        if new == old:
            return old  # a no-op write does not bump the version
        new["metadata"]["resourceVersion"] = self._bump()
        key = (old["metadata"].get("namespace"), old["metadata"]["name"])
        self.objs[res][key] = new
        self._event(res, "MODIFIED", new, old)
        return new

    def patch(self, res, ns, name, sub, ctype, body):
        with self.cond:
            old = self._get_locked(res, ns, name)
            if ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                if not isinstance(body, dict):
                    raise ApiError(400, "BadRequest", "a merge patch must be a JSON object")
                prv = (body.get("metadata") or {}).get("resourceVersion") \
                    if isinstance(body.get("metadata"), dict) else None
                if prv is not None and prv != old["metadata"]["resourceVersion"]:
                    raise ApiError(409, "Conflict",
                                   'Operation cannot be fulfilled on %s "%s": the object has been '
                                   "modified; please apply your changes to the latest version "
                                   "and try again" % (res, name), {"name": name, "kind": res})
                new = merge_patch(old, body)
                new.setdefault("metadata", {})["resourceVersion"] = old["metadata"]["resourceVersion"]
            elif ctype == "application/json-patch+json":
                new = json_patch(old, body)
                new.setdefault("metadata", {})["resourceVersion"] = old["metadata"]["resourceVersion"]
            else:
                raise ApiError(415, "UnsupportedMediaType",
                               "the body of the request was in an unknown format - accepted "
                               "media types include: application/json-patch+json, "
                               "application/merge-patch+json, "
                               "application/strategic-merge-patch+json")
            return copy.deepcopy(self._replace_locked(res, old, new, sub))

    def update(self, res, ns, name, sub, body):
        with self.cond:
            old = self._get_locked(res, ns, name)
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body is not a JSON object")
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict",
                               'Operation cannot be fulfilled on %s "%s": the object has been '
                               "modified; please apply your changes to the latest version and "
                               "try again" % (res, name), {"name": name, "kind": res})
            body = copy.deepcopy(body)
            body.setdefault("metadata", {})["resourceVersion"] = old["metadata"]["resourceVersion"]
            return copy.deepcopy(self._replace_locked(res, old, body, sub))

    def delete(self, res, ns, name, body):
        with self.cond:
            old = self._get_locked(res, ns, name)
            pre = (body or {}).get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
                raise ApiError(409, "Conflict", "Precondition failed: UID in precondition: %s, "
                               "UID in object meta: %s" % (pre["uid"], old["metadata"]["uid"]))
            key = (old["metadata"].get("namespace"), name)
            del self.objs[res][key]
            gone = copy.deepcopy(old)
            gone["metadata"]["resourceVersion"] = self._bump()
            self._event(res, "DELETED", gone, old)
            return gone

    def bind(self, ns, name, binding):
        with self.cond:
            self.stats["bindings"] += 1
            if not isinstance(binding, dict):
                raise ApiError(400, "BadRequest", "the body is not a JSON object")
            if binding.get("kind") not in (None, "Binding"):
                raise ApiError(400, "BadRequest", "kind %r is not Binding" % binding.get("kind"))
            md = binding.get("metadata") or {}
            if name is None:
                name = md.get("name")
            elif md.get("name") not in (None, name):
                raise ApiError(400, "BadRequest", "name in URL does not match name in Binding object")
            target = binding.get("target") or {}
            if target.get("kind") not in (None, "", "Node") or not target.get("name"):
                raise ApiError(422, "Invalid", "Binding target must be a Node with a name; got %r"
                               % target)
            pod = self.objs["pods"].get((ns, name))
            if pod is None:
                self.stats["bindings_notfound"] += 1
                raise not_found("pods", name)
            uid = md.get("uid")
            if uid and uid != pod["metadata"]["uid"]:
                self.stats["bindings_conflict"] += 1
                raise ApiError(409, "Conflict",
                               "Operation cannot be fulfilled on pods/binding \"%s\": Precondition "
                               "failed: UID in precondition: %s, UID in object meta: %s"
                               % (name, uid, pod["metadata"]["uid"]),
                               {"name": name, "kind": "pods/binding"})
            if pod["metadata"].get("deletionTimestamp"):
                self.stats["bindings_conflict"] += 1
                raise ApiError(409, "Conflict", "pod %s is being deleted, cannot be assigned to a "
                               "host" % name, {"name": name, "kind": "pods/binding"})
            spec = pod.get("spec") or {}
            if spec.get("nodeName"):
                self.stats["bindings_conflict"] += 1
                raise ApiError(409, "Conflict",
                               'Operation cannot be fulfilled on pods/binding "%s": pod %s is '
                               "already assigned to node \"%s\"" % (name, name, spec["nodeName"]),
                               {"name": name, "kind": "pods/binding"})
            ann = md.get("annotations") or {}
            if not isinstance(ann, dict) or not all(isinstance(v, str) for v in ann.values()):
                raise ApiError(400, "BadRequest", "Binding metadata.annotations must map strings "
                               "to strings")
            old = pod
            new = copy.deepcopy(pod)
            new.setdefault("spec", {})["nodeName"] = target["name"]
            if ann:
                new["metadata"].setdefault("annotations", {}).update(ann)
            conds = [c for c in new.setdefault("status", {}).get("conditions", [])
                     if c.get("type") != "PodScheduled"]
            conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                          "lastTransitionTime": now_rfc3339()})
            new["status"]["conditions"] = conds
            new["metadata"]["resourceVersion"] = self._bump()
            self.objs["pods"][(ns, name)] = new
            self._event("pods", "MODIFIED", new, old)
            self.stats["bindings_ok"] += 1
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "code": 201}

    def list(self, res, ns, fields, labels, limit, cont):
        with self.cond:
            self.stats["lists"] += 1
            self.stats["lists_" + res] += 1
            if cont:
                try:
                    tok = json.loads(base64.urlsafe_b64decode(cont.encode()).decode())
                    sid, off = tok["id"], int(tok["offset"])
                except (ValueError, KeyError, TypeError):
                    raise ApiError(400, "BadRequest", "invalid continue token %r" % cont)
                snap = self.snapshots.get(sid)
                if snap is None:
                    self.stats["gone"] += 1
                    raise ApiError(410, "Expired", "The provided continue parameter is too old to "
                                   "display a consistent list result. You can start a new list "
                                   "without the continue parameter.")
                rv, items = snap
            else:
                rv = str(self.rv)
                items = [copy.deepcopy(o) for k, o in sorted(self.objs[res].items(),
                                                              key=lambda kv: (kv[0][0] or "", kv[0][1]))
                         if (not ns or k[0] == ns) and matches(o, fields, labels)]
                off = 0
                sid = None
            page = items[off:off + limit] if limit else items[off:]
            meta = {"resourceVersion": rv}
            nxt = off + len(page)
            if limit and nxt < len(items):
                if sid is None:
                    self.snap_seq += 1
                    sid = self.snap_seq
                    self.snapshots[sid] = (rv, items)
                    while len(self.snapshots) > 64:
                        del self.snapshots[min(self.snapshots)]
                meta["continue"] = base64.urlsafe_b64encode(
                    json.dumps({"id": sid, "offset": nxt}).encode()).decode()
                meta["remainingItemCount"] = len(items) - nxt
            return {"kind": RESOURCES[res][0] + "List", "apiVersion": "v1", "metadata": meta,
                    "items": page}

    def expire(self):
        with self.cond:
            self._bump()
            self.expired_below = self.rv
            self.history.clear()
            self.snapshots.clear()
            self.watch_gen += 1
            self.abrupt = False
            self.cond.notify_all()
            return str(self.rv)

    def close_watches(self, abrupt):
        with self.cond:
            self.watch_gen += 1
            self.abrupt = abrupt
            self.cond.notify_all()


# --- tables (kubectl get) ---

def _col(name, typ="string", fmt="", prio=0, desc=""):
    return {"name": name, "type": typ, "format": fmt, "description": desc or name,
            "priority": prio}


def pod_row(p):
    spec, st = p.get("spec") or {}, p.get("status") or {}
    cs = st.get("containerStatuses") or []
    ready = sum(1 for c in cs if c.get("ready"))
    restarts = sum(int(c.get("restartCount", 0)) for c in cs)
    reason = st.get("reason") or st.get("phase") or "Unknown"
    if p["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return [p["metadata"]["name"], "%d/%d" % (ready, len(spec.get("containers") or [])),
            reason, restarts, human_age(p["metadata"].get("creationTimestamp")),
            st.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
            st.get("nominatedNodeName") or "<none>", "<none>"]


POD_COLS = [_col("Name", fmt="name"), _col("Ready"), _col("Status"), _col("Restarts", "integer"),
            _col("Age"), _col("IP", prio=1), _col("Node", prio=1),
            _col("Nominated Node", prio=1), _col("Readiness Gates", prio=1)]


def node_row(n):
    conds = {c.get("type"): c.get("status") for c in (n.get("status") or {}).get("conditions") or []}
    ready = {"True": "Ready", "False": "NotReady"}.get(conds.get("Ready"), "Unknown")
    if (n.get("spec") or {}).get("unschedulable"):
        ready += ",SchedulingDisabled"
    labels = n["metadata"].get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels
                   if k.startswith("node-role.kubernetes.io/") and "/" in k)
    info = (n.get("status") or {}).get("nodeInfo") or {}
    addrs = {a.get("type"): a.get("address") for a in (n.get("status") or {}).get("addresses") or []}
    return [n["metadata"]["name"], ready, ",".join(roles) or "<none>",
            human_age(n["metadata"].get("creationTimestamp")), info.get("kubeletVersion", ""),
            addrs.get("InternalIP", "<none>"), addrs.get("ExternalIP", "<none>"),
            info.get("osImage", "<unknown>"), info.get("kernelVersion", "<unknown>"),
            info.get("containerRuntimeVersion", "<unknown>")]


NODE_COLS = [_col("Name", fmt="name"), _col("Status"), _col("Roles"), _col("Age"), _col("Version"),
             _col("Internal-IP", prio=1), _col("External-IP", prio=1), _col("OS-Image", prio=1),
             _col("Kernel-Version", prio=1), _col("Container-Runtime", prio=1)]


def ns_row(n):
    return [n["metadata"]["name"], (n.get("status") or {}).get("phase", "Active"),
            human_age(n["metadata"].get("creationTimestamp"))]


NS_COLS = [_col("Name", fmt="name"), _col("Status"), _col("Age")]

TABLES = {"pods": (POD_COLS, pod_row), "nodes": (NODE_COLS, node_row),
          "namespaces": (NS_COLS, ns_row)}


def to_table(res, objs, rv, include):
    cols, row = TABLES[res]
    rows = []
    for o in objs:
        r = {"cells": row(o)}
        if include == "Object":
            r["object"] = o
        elif include != "None":
            r["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                           "metadata": o["metadata"]}
        rows.append(r)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
            "columnDefinitions": cols, "rows": rows}


def discovery_resources():
    out = []
    for res, (kind, namespaced, short, verbs) in sorted(RESOURCES.items()):
        out.append({"name": res, "singularName": kind.lower(), "namespaced": namespaced,
                    "kind": kind, "verbs": verbs, "shortNames": short})
        out.append({"name": res + "/status", "singularName": "", "namespaced": namespaced,
                    "kind": kind, "verbs": ["get", "patch", "update"]})
    out.append({"name": "pods/binding", "singularName": "", "namespaced": True,
                "kind": "Binding", "verbs": ["create"]})
    out.append({"name": "bindings", "singularName": "binding", "namespaced": True,
                "kind": "Binding", "verbs": ["create"]})
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "gpufrac-test-apiserver"

    def log_message(self, fmt, *args):  # quiet unless asked
        if self.server.verbose:
            sys.stderr.write("apiserver: " + (fmt % args) + "\n")

    @property
    def store(self):
        return self.server.store

    # --- plumbing ---
    def _body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                line = self.rfile.readline()
                n = int(line.split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data += self.rfile.read(n)
                self.rfile.readline()
            return data
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _json_body(self):
        raw = self._body()
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ApiError(400, "BadRequest", "the request body is not JSON: %s" % e)

    def _send(self, code, obj, ctype="application/json"):
        data = obj if isinstance(obj, bytes) else (json.dumps(obj) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _dispatch(self):
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        path = url.path.rstrip("/") or "/"
        body = None
        try:
            if path.startswith("/_test/"):
                return self._control(path, q)
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            with self.store.cond:
                if len(self.store.requests) < 100000:
                    self.store.requests.append({"method": self.command, "path": path,
                                                "query": q, "contentType": ctype,
                                                "userAgent": self.headers.get("User-Agent", "")})
            if self.store.token is not None:
                if self.headers.get("Authorization") != "Bearer " + self.store.token:
                    self.store.stats["unauthorized"] += 1
                    self._body()
                    raise ApiError(401, "Unauthorized", "Unauthorized")
            if self.command in ("POST", "PUT", "PATCH", "DELETE"):
                body = self._json_body()
            return self._api(path, q, ctype, body)
        except ApiError as e:
            self._send(e.code, e.status)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _dispatch

    def _control(self, path, q):
        st = self.store
        if path == "/_test/expire" and self.command == "POST":
            self._body()
            return self._send(200, {"resourceVersion": st.expire()})
        if path == "/_test/close-watches" and self.command == "POST":
            self._body()
            st.close_watches(q.get("abrupt") in ("1", "true"))
            return self._send(200, {})
        if path == "/_test/token" and self.command == "POST":
            b = self._json_body() or {}
            st.token = b.get("token")
            return self._send(200, {})
        if path == "/_test/bind-delay" and self.command == "POST":
            b = self._json_body() or {}
            st.bind_delay = float(b.get("seconds", 0))
            st.bind_refuse = int(b.get("refuse", 0))
            return self._send(200, {})
        if path == "/_test/requests":
            self._body()
            with st.cond:
                if self.command == "DELETE":
                    st.requests = []
                    return self._send(200, [])
                return self._send(200, list(st.requests))
        if path == "/_test/stats":
            with st.cond:
                return self._send(200, dict(st.stats, resourceVersion=st.rv))
        raise ApiError(404, "NotFound", "no test control %s %s" % (self.command, path))

    # --- API ---
    def _api(self, path, q, ctype, body):
        accept = self.headers.get("Accept") or ""
        if path == "/version":
            return self._send(200, SERVER_VERSION)
        if path in ("/healthz", "/readyz", "/livez"):
            return self._send(200, b"ok", "text/plain; charset=utf-8")
        if path == "/api":
            return self._send(200, {"kind": "APIVersions", "versions": ["v1"],
                                    "serverAddressByClientCIDRs": [
                                        {"clientCIDR": "0.0.0.0/0",
                                         "serverAddress": self.server.address}]})
        if path == "/api/v1":
            return self._send(200, {"kind": "APIResourceList", "apiVersion": "v1",
                                    "groupVersion": "v1", "resources": discovery_resources()})
        if path == "/apis":
            return self._send(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
        parts = path.strip("/").split("/")
        if parts[:2] != ["api", "v1"] or len(parts) < 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        rest = parts[2:]
        watch = q.get("watch") in ("1", "true")
        if rest[0] == "watch":
            watch, rest = True, rest[1:]
        ns = name = sub = None
        if rest and rest[0] == "namespaces" and len(rest) >= 3:
            ns, res, rest = rest[1], rest[2], rest[3:]
        else:
            res, rest = (rest[0] if rest else ""), rest[1:]
        if rest:
            name, rest = rest[0], rest[1:]
        if rest:
            sub, rest = rest[0], rest[1:]
        if rest:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if res == "bindings" and ns and name is None and self.command == "POST":
            return self._send(201, self.store.bind(ns, None, body))
        if res not in RESOURCES:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        namespaced = RESOURCES[res][1]
        if name is not None and namespaced and ns is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not namespaced and ns is not None:
            raise ApiError(404, "NotFound", "%s is not namespaced" % res)
        if sub == "binding":
            if res != "pods" or self.command != "POST":
                raise ApiError(405, "MethodNotAllowed", "only POST pods/binding is served")
            if self.store.bind_delay > 0:
                time.sleep(self.store.bind_delay)
            if self.store.bind_refuse:
                raise ApiError(self.store.bind_refuse, "InternalError", "bindings are refused")
            return self._send(201, self.store.bind(ns, name, body))
        if sub not in (None, "status"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        table = "as=Table" in accept and "g=meta.k8s.io" in accept

        if self.command in ("GET", "HEAD") and (watch or name is None):
            fields = parse_selector(q.get("fieldSelector", ""), "field")
            for k, _, _ in fields:
                if k not in FIELDS:
                    raise ApiError(400, "BadRequest", 'field label not supported: %s' % k)
            labels = parse_selector(q.get("labelSelector", ""), "label")
            if name is not None:  # watch of one object
                fields.append(("metadata.name", "=", name))
            if watch:
                return self._watch(res, ns, fields, labels, q)
            try:
                limit = int(q.get("limit") or 0)
            except ValueError:
                raise ApiError(400, "BadRequest", "limit must be an integer")
            lst = self.store.list(res, ns, fields, labels, limit, q.get("continue"))
            if table:
                t = to_table(res, lst["items"], lst["metadata"]["resourceVersion"],
                             q.get("includeObject"))
                t["metadata"].update({k: v for k, v in lst["metadata"].items()
                                      if k in ("continue", "remainingItemCount")})
                return self._send(200, t)
            return self._send(200, lst)
        if self.command in ("GET", "HEAD"):
            obj = self.store.get(res, ns, name)
            if table:
                return self._send(200, to_table(res, [obj], obj["metadata"]["resourceVersion"],
                                                q.get("includeObject")))
            return self._send(200, obj)
        if self.command == "POST" and name is None:
            if body is None:
                raise ApiError(400, "BadRequest", "empty body")
            return self._send(201, self.store.create(res, ns, body))
        if name is None:
            raise ApiError(405, "MethodNotAllowed", "%s on a collection is not served"
                           % self.command)
        if self.command == "PATCH":
            return self._send(200, self.store.patch(res, ns, name, sub, ctype, body))
        if self.command == "PUT":
            return self._send(200, self.store.update(res, ns, name, sub, body))
        if self.command == "DELETE":
            return self._send(200, self.store.delete(res, ns, name, body))
        raise ApiError(405, "MethodNotAllowed", "%s is not served here" % self.command)

    # --- watch ---
    def _chunk(self, obj):
        data = (json.dumps(obj) + "\n").encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _watch(self, res, ns, fields, labels, q):
        st = self.store
        rvq = q.get("resourceVersion", "")
        bookmarks = q.get("allowWatchBookmarks") in ("1", "true")
        try:
            timeout = float(q.get("timeoutSeconds") or 1800)
        except ValueError:
            raise ApiError(400, "BadRequest", "timeoutSeconds must be a number")
        try:
            start = int(rvq) if rvq not in ("", "0") else None
        except ValueError:
            raise ApiError(400, "BadRequest", "invalid resourceVersion %r" % rvq)
        kind = RESOURCES[res][0]

        def visible(o):
            return o is not None and (not ns or o["metadata"].get("namespace") == ns) \
                and matches(o, fields, labels)

        initial = []
        gone = None
        with st.cond:
            st.stats["watches"] += 1
            st.stats["watches_" + res] += 1
            gen = st.watch_gen
            if start is None:
                initial = [{"type": "ADDED", "object": copy.deepcopy(o)}
                           for k, o in sorted(st.objs[res].items(),
                                              key=lambda kv: (kv[0][0] or "", kv[0][1]))
                           if visible(o)]
                last = st.rv
            elif start < st.expired_below:
                st.stats["gone"] += 1
                gone = start
                last = st.rv
            else:
                last = start
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        abrupt = False
        try:
            if gone is not None:
                self._chunk({"type": "ERROR", "object": status_obj(
                    410, "Expired", "too old resource version: %d (%d)"
                    % (gone, st.expired_below))})
                return self._end_chunks()
            for ev in initial:
                self._chunk(ev)
            deadline = time.monotonic() + timeout
            next_bm = time.monotonic() + st.bookmark_interval
            while True:
                out = []
                with st.cond:
                    while True:
                        now = time.monotonic()
                        if st.watch_gen != gen:
                            abrupt = st.abrupt
                            break
                        if now >= deadline:
                            break
                        if st.history and st.history[-1][0] > last:
                            break
                        if bookmarks and now >= next_bm:
                            break
                        wake = deadline if not bookmarks else min(deadline, next_bm)
                        st.cond.wait(max(0.01, wake - now))
                    if st.watch_gen != gen or time.monotonic() >= deadline:
                        break
                    if last < st.expired_below:  # the history overflowed under us
                        st.stats["gone"] += 1
                        out.append({"type": "ERROR", "object": status_obj(
                            410, "Expired", "too old resource version: %d (%d)"
                            % (last, st.expired_below))})
                    else:
                        for rv, r, typ, obj, old in st.history:
                            if rv <= last or r != res:
                                continue
                            now_in, was_in = visible(obj), visible(old)
                            if typ == "MODIFIED":
                                if now_in and not was_in:
                                    typ = "ADDED"
                                elif was_in and not now_in:
                                    typ = "DELETED"
                                elif not now_in:
                                    continue
                            elif not (now_in if typ == "ADDED" else was_in):
                                continue
                            out.append({"type": typ, "object": copy.deepcopy(obj)})
                        last = st.rv
                        if bookmarks and time.monotonic() >= next_bm:
                            out.append({"type": "BOOKMARK", "object": {
                                "kind": kind, "apiVersion": "v1",
                                "metadata": {"resourceVersion": str(last)}}})
                            st.stats["bookmarks"] += 1
                            next_bm = time.monotonic() + st.bookmark_interval
                for ev in out:
                    self._chunk(ev)
                if out and out[-1]["type"] == "ERROR":
                    break
            if abrupt:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            self._end_chunks()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def _end_chunks(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # a burst of binds opens hundreds of connections at once over HTTP/1.1:
    # socketserver's backlog of 5 drops their SYNs into curl's connect timeout
    request_queue_size = 1024

    def __init__(self, port, store, verbose=False):
        super().__init__(("127.0.0.1", port), Handler)
        self.store = store
        self.verbose = verbose
        self.address = "127.0.0.1:%d" % self.server_address[1]


def tls_context(d):
    """A server context from d/cert.pem and d/key.pem, made (self-signed, for
    IP 127.0.0.1 and localhost) when missing."""
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    if not (os.path.exists(cert) and os.path.exists(key)):
        os.makedirs(d, exist_ok=True)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=gpufrac-test-apiserver", "-keyout", key, "-out", cert,
                        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx


# --- for the tests: run this server as a child process and talk to it ---

class ApiServerProcess:
    """This file run as a child process: start(), request(), kubeconfig(),
    stop(). tls=True serves HTTPS (self-signed, skip verification)."""

    def __init__(self, tmp, token=None, tls=False, bookmark_interval=0.5, history=1000):
        self.tmp, self.token, self.tls = tmp, token, tls
        self.args = ["--bookmark-interval", str(bookmark_interval), "--history", str(history)]
        self.proc = None
        self.port = None

    def start(self):
        pf = os.path.join(self.tmp, "apiserver.port")
        if os.path.exists(pf):
            os.unlink(pf)
        cmd = [sys.executable, os.path.abspath(__file__), "--port-file", pf] + self.args
        if self.token:
            cmd += ["--token", self.token]
        if self.tls:
            cmd += ["--tls-dir", os.path.join(self.tmp, "apiserver-tls")]
        self.log = open(os.path.join(self.tmp, "apiserver.log"), "a")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not os.path.exists(pf):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the test API server did not start; see %s" % self.log.name)
            time.sleep(0.02)
        with open(pf) as f:
            self.port = int(f.read())
        self.url = "%s://127.0.0.1:%d" % ("https" if self.tls else "http", self.port)
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        if self.proc:
            self.log.close()
        self.proc = None

    def _ctx(self):
        if not self.tls:
            return None
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def request(self, method, path, body=None, ctype="application/json", token=True,
                headers=None, raw=False, timeout=30):
        """-> (status, decoded JSON or bytes when raw)."""
        import urllib.error
        import urllib.request
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", ctype)
        if token and self.token:
            req.add_header("Authorization", "Bearer " + (token if isinstance(token, str)
                                                         else self.token))
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self._ctx()) as r:
                code, out = r.status, r.read()
        except urllib.error.HTTPError as e:
            code, out = e.code, e.read()
        if raw:
            return code, out
        try:
            return code, json.loads(out) if out else None
        except ValueError:
            return code, out

    def ok(self, method, path, body=None, ctype="application/json"):
        code, out = self.request(method, path, body, ctype)
        if code not in (200, 201):
            raise AssertionError("%s %s -> %d %s" % (method, path, code, out))
        return out

    def watch(self, path, timeout=30):
        """Opens a watch; returns the response, iterate .readline() for events."""
        import urllib.request
        req = urllib.request.Request(self.url + path)
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        return urllib.request.urlopen(req, timeout=timeout, context=self._ctx())

    def kubeconfig(self, path):
        user = "    token: %s\n" % self.token if self.token else "    {}\n"
        tls = "    insecure-skip-tls-verify: true\n" if self.tls else ""
        with open(path, "w") as f:
            f.write("apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n"
                    "    server: %s\n%susers:\n- name: test\n  user:\n%s"
                    "contexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n"
                    "current-context: test\n" % (self.url, tls, user))
        return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--token", help="accept only 'Authorization: Bearer TOKEN'")
    ap.add_argument("--bookmark-interval", type=float, default=1.0)
    ap.add_argument("--history", type=int, default=1000, help="watch events kept")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--tls-dir", help="serve HTTPS with cert.pem/key.pem from here")
    a = ap.parse_args(argv)
    store = Store(a.history, a.bookmark_interval, a.token)
    srv = Server(a.port, store, a.verbose)
    if a.tls_dir:
        srv.socket = tls_context(a.tls_dir).wrap_socket(
            srv.socket, server_side=True, do_handshake_on_connect=False)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    port = srv.server_address[1]
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, a.port_file)
    print("listening on 127.0.0.1:%d" % port, flush=True)
    try:
        srv.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
