#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Sustained binds per second through gpufrac-scheduler against the test API
server, beside the same binds POSTed straight to the API server (the
baseline: what the API server itself costs) in the same run.

    bench/sched_binds.py [--build DIR] [--pods N] [--nodes M] [--quick]

Plays kube-scheduler: for each pending fractional pod, POST /filter (all node
names), /prioritize, /bind to the best node, one pod after another. Prints a
table and key=value lines; asserts nothing about time."""
import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "scheduler"))
from kube_api_server import ApiServerProcess  # noqa: E402
import test_e2e as e2e  # noqa: E402


def cluster(api, nodes, pods, prefix):
    for n in range(nodes):
        gpus = [("GPU-%s%04d%04d" % (prefix, n, g), g, 80 << 30) for g in range(8)]
        api.ok("POST", "/api/v1/nodes", e2e.agent_node("%s-node-%d" % (prefix, n), gpus))
    made = []
    for p in range(pods):
        made.append(api.ok("POST", "/api/v1/namespaces/default/pods",
                           e2e.frac_pod("%s-pod-%d" % (prefix, p), request="10Gi")))
    return made


def baseline(api, pods, nodes):
    t0 = time.monotonic()
    for i, pod in enumerate(pods):
        md = pod["metadata"]
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": md["name"], "namespace": "default", "uid": md["uid"],
                             "annotations": {e2e.P + "main.gpus.devices": "GPU-x"}},
                "target": {"apiVersion": "v1", "kind": "Node", "name": nodes[i % len(nodes)]}}
        api.ok("POST", "/api/v1/namespaces/default/pods/%s/binding" % md["name"], body)
    return len(pods) / (time.monotonic() - t0)


def through_scheduler(sched, pods, names):
    failed = 0
    t0 = time.monotonic()
    for pod in pods:
        _, f = sched.post("filter", {"Pod": pod, "NodeNames": names})
        fit = f.get("NodeNames") or []
        if not fit:
            failed += 1
            continue
        _, pr = sched.post("prioritize", {"Pod": pod, "NodeNames": fit})
        best = max(pr, key=lambda h: h["Score"])["Host"]
        md = pod["metadata"]
        _, b = sched.post("bind", {"PodName": md["name"], "PodNamespace": "default",
                                   "PodUID": md["uid"], "Node": best})
        failed += bool(b.get("Error"))
    return len(pods) / (time.monotonic() - t0), failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("GPUFRAC_BUILD")
                    or os.path.join(HERE, "..", "build"))
    ap.add_argument("--pods", type=int, default=400)
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.pods, a.nodes = 40, 5
    e2e.SCHEDULER = os.path.join(os.path.abspath(a.build), "bin", "gpufrac-scheduler")
    tmp = tempfile.mkdtemp(prefix="gf-sched-binds-")
    api = ApiServerProcess(tmp, token=e2e.TOKEN, tls=True).start()
    sched = None
    try:
        base_pods = cluster(api, a.nodes, a.pods, "b")
        base = baseline(api, base_pods, ["b-node-%d" % n for n in range(a.nodes)])
        pods = cluster(api, a.nodes, a.pods, "s")
        sched = e2e.Scheduler(tmp, api, "binpack")
        sched.start()
        names = ["s-node-%d" % n for n in range(a.nodes)]
        time.sleep(1.0)  # the watch has delivered the cluster
        rate, failed = through_scheduler(sched, pods, names)
    finally:
        if sched:
            sched.stop()
        api.stop()
    print("measure                                   figure   baseline")
    print("binds/s through gpufrac-scheduler   %12.1f %10.1f (POST binding alone)" % (rate, base))
    print("ratio                               %12.2f" % (rate / base))
    print("pods=%d\nnodes=%d\nbinds_per_s=%.1f\nbaseline_binds_per_s=%.1f\nratio=%.2f\n"
          "failed=%d" % (a.pods, a.nodes, rate, base, rate / base, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
