#!/usr/bin/env python3
"""gpufrac-scheduler at scale against the REAL kube-apiserver, kube-scheduler
and etcd (tests/kube/cluster.py; build them with scripts/kube-build.sh).

One run, per node count: N Nodes of 8 GPUs x 80 GiB; P fractional pods of
0.25 GPU (gpu-fraction) scheduled by layout A's kube-scheduler through the
extender, and P plain pods scheduled by a second, plain kube-scheduler (no
extender) in the same cluster, one batch after the other. Both kube-schedulers
get clientConnection qps/burst 1000 (1.20's default 50/100 would cap the plain
one's own binds). Each batch is created while its scheduler is stopped, then
the scheduler starts and the batch is timed from its first bind to its last
(pods/s). CPU per pod of each process (from /proc, over the batch's window),
gpufrac-scheduler's RSS before the pods, at peak, and after every pod and
all but a fifth of the nodes are deleted (after its heap trim), GPUs used
against the ideal for binpack and whether any GPU is over-packed.

  bench/kube_bench.py [--nodes 100,500] [--pods 2000] [--json FILE]

Targets (issue 13): extender pods/s >= 0.7 x plain in the same run; RSS after
within 10 % of before; gpufrac-scheduler CPU per pod flat across node counts."""
import argparse
import json
import os
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "kube"))
import cluster as C  # noqa: E402

Gi = 1 << 30


class Sampler(threading.Thread):
    """RSS of a pid every 50 ms (peak)."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                self.peak = max(self.peak, C.rss_kib(self.pid))
            except OSError:
                return
            time.sleep(0.05)


def procs(cl, gf, ks):
    return {"kube-apiserver": cl.apiserver.pid, "etcd": cl.etcd.pid,
            "kube-scheduler": ks.pid, "gpufrac-scheduler": gf.pid}


def pod(name, frac):
    spec = {"terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "cuda"}]}
    ann = {}
    if frac:
        spec["schedulerName"] = "gpufrac-scheduler"
        ann["gpu-fraction"] = "0.25"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": ann,
                         "labels": {"bench": "frac" if frac else "plain"}},
            "spec": spec}


def bound_count(cl, sel):
    return sum(1 for p in cl.pods(selector=sel) if p["spec"].get("nodeName"))


def batch(cl, ks, gf, n, frac, tag):
    """Creates n pods with their scheduler stopped, starts it, times the binds."""
    sel = "bench=" + ("frac" if frac else "plain")
    C.parallel(cl.create, (pod("%s-%d" % (tag, i), frac) for i in range(n)), threads=16)
    ks.start()
    pids = procs(cl, gf, ks)
    cpu0 = {k: C.cpu_seconds(v) for k, v in pids.items()}
    t_first = None
    while True:
        now, b = time.monotonic(), bound_count(cl, sel)
        if b and t_first is None:
            t_first, b_first = now, b
        if b == n:
            t_last = now
            break
        if ks.poll() is not None or gf.poll() is not None:
            raise RuntimeError("a scheduler exited during the batch:\n" + ks.tail(20))
        time.sleep(0.1)
    cpu = {k: C.cpu_seconds(v) - cpu0[k] for k, v in pids.items()}
    ks.stop()
    secs = max(t_last - t_first, 1e-3)
    return {"pods": n, "seconds": round(secs, 2),
            "pods_per_s": round((n - b_first) / secs, 1) if n > b_first else None,
            "cpu_ms_per_pod": {k: round(1000 * v / n, 3) for k, v in cpu.items()}}


def packing(cl):
    use = {}
    for p in cl.pods(selector="bench=frac"):
        a = p["metadata"].get("annotations", {})
        d = a.get("nvidia.com/container.main.gpus.devices")
        if d:
            use[d] = use.get(d, 0) + 1
    return {"gpus_used": len(use), "max_pods_on_a_gpu": max(use.values()) if use else 0}


def rss_by_mapping(pid, top=8):
    """The largest resident mappings of pid: {name: KiB} (heap, stacks, libraries)."""
    sizes, name = {}, None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5 and not parts[0].endswith(":"):
                name = parts[5] if len(parts) > 5 else "[anon]"
            elif parts[0] == "Rss:":
                sizes[name] = sizes.get(name, 0) + int(parts[1])
    return dict(sorted(sizes.items(), key=lambda kv: -kv[1])[:top])


def run(nodes, pods, tmp):
    cl = C.Cluster(tmp).start()
    try:
        cl.apply_all(C.yaml_docs(os.path.join(C.DEPLOY, "rbac.yaml")))
        sa = cl.sa_token()
        gf = C.GpufracScheduler(cl, tmp, sa).start()
        C.parallel(lambda i: cl.add_node("bench-%d" % i, gpus=[
            ("GPU-%d-%d" % (i, g), g, 80 * Gi) for g in range(8)], labels={"bench": "node"}),
            range(nodes), threads=16)
        C.wait_for(lambda: gf.metric("gpufrac_scheduler_gpu_total_bytes") == nodes * 8 * 80 * Gi,
                   "every node in gpufrac-scheduler's cache", timeout=300)
        time.sleep(1)
        rss_before = C.rss_kib(gf.pid)
        sampler = Sampler(gf.pid)
        sampler.start()
        ext = C.KubeScheduler(cl, "A", gf.url, tmp, sa, qps=1000, leader_elect=False)
        plain = C.KubeScheduler(cl, "plain", gf.url, tmp, C.KSCHED_TOKEN, qps=1000,
                                leader_elect=False)
        res_frac = batch(cl, ext, gf, pods, True, "f")
        res_plain = batch(cl, plain, gf, pods, False, "p")
        pack = packing(cl)
        cl.delete_pods(selector="bench=frac")
        cl.delete_pods(selector="bench=plain")
        C.parallel(lambda i: cl.req("DELETE", "/api/v1/nodes/bench-%d" % i, {}),
                   range(nodes // 5, nodes), threads=16)
        C.wait_for(lambda: gf.metric("gpufrac_scheduler_pods") == 0 and
                   gf.metric("gpufrac_scheduler_gpu_total_bytes") == (nodes // 5) * 8 * 80 * Gi,
                   "deletions seen by gpufrac-scheduler", timeout=300)
        time.sleep(3 * 5)  # GF_INFORMER_TRIM_S: the janitor trims after deletions
        sampler.stop.set()
        rss_after = C.rss_kib(gf.pid)
        where = rss_by_mapping(gf.pid)
        gf.stop()
        ratio = (res_frac["pods_per_s"] / res_plain["pods_per_s"]
                 if res_frac["pods_per_s"] and res_plain["pods_per_s"] else None)
        return {"nodes": nodes, "gpus": nodes * 8, "fractional": res_frac, "plain": res_plain,
                "extender_vs_plain": round(ratio, 2) if ratio else None,
                "binpack": dict(pack, ideal=-(-pods // 4)),
                "gpufrac_scheduler_rss_kib": {"before": rss_before, "peak": sampler.peak,
                                              "after": rss_after},
                "rss_after_by_mapping_kib": where}
    finally:
        cl.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", default="100,500")
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--json")
    args = ap.parse_args()
    why = C.missing()
    if why:
        print("SKIP: " + why)
        return 77
    results = []
    for n in [int(x) for x in args.nodes.split(",")]:
        with tempfile.TemporaryDirectory(prefix="gpufrac-kube-bench-") as tmp:
            r = run(n, args.pods, tmp)
        results.append(r)
        f, p, rss = r["fractional"], r["plain"], r["gpufrac_scheduler_rss_kib"]
        print("%d nodes x 8 GPUs, %d pods each:" % (n, args.pods))
        print("  through the extender  %7.1f pods/s  (%.2f x plain)" %
              (f["pods_per_s"] or 0, r["extender_vs_plain"] or 0))
        print("  plain kube-scheduler  %7.1f pods/s" % (p["pods_per_s"] or 0))
        print("  CPU ms per pod, extender batch: %s" % f["cpu_ms_per_pod"])
        print("  CPU ms per pod, plain batch:    %s" % p["cpu_ms_per_pod"])
        print("  binpack: %d GPUs used (ideal %d), at most %d pods of 0.25 on a GPU" %
              (r["binpack"]["gpus_used"], r["binpack"]["ideal"], r["binpack"]["max_pods_on_a_gpu"]))
        print("  gpufrac-scheduler RSS: before %d KiB, peak %d KiB, after %d KiB (%+.1f %%)" %
              (rss["before"], rss["peak"], rss["after"],
               100.0 * (rss["after"] - rss["before"]) / rss["before"]))
        print("  resident after, by mapping (KiB): %s" % r["rss_after_by_mapping_kib"])
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    sys.exit(main())
