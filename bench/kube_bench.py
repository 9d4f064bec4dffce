#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""gpufrac-scheduler at scale against the REAL kube-apiserver, kube-scheduler
and etcd (tests/kube/cluster.py; build them with scripts/kube-build.sh).

One cluster per node count: N Nodes of 8 GPUs x 80 GiB. Each round times P
fractional pods of 0.25 GPU (gpu-fraction) scheduled by layout A's
kube-scheduler through the extender, and P plain pods scheduled by a second,
plain kube-scheduler (no extender) in the same cluster; the order alternates
between rounds and every pod is deleted after its round, so a change in the
machine's load weighs on both alike. Both kube-schedulers get
clientConnection qps/burst 1000 (1.20's default 50/100 would cap the plain
one's own binds). Each batch is created while its scheduler is stopped, then
the scheduler starts and the batch is timed (after one uncounted warm-up
batch of 200 of each) from its first bind to its last
(pods/s). Printed per node count: pods/s of both and their ratio per round
and the median, CPU per pod of each process (from /proc, over each batch),
kube-scheduler's own scheduling-algorithm time per pod (its metrics), GPUs
used against the ideal for binpack and whether any GPU is over-packed,
gpufrac-scheduler's RSS before the pods, at peak, after every pod is deleted
and after all but a fifth of the nodes are deleted too (after its janitor's
trim). Then the restart: a batch of P pods through the extender, gpufrac-
scheduler SIGKILLed once a quarter is bound and started again at once; the
time from the kill to the last bind against what the rest takes at the
uninterrupted rate of the same run, and whether any GPU was over-packed.

  bench/kube_bench.py [--nodes 500,5000] [--pods 2000] [--rounds 3]
                      [--filter-answer best|fitting] [--json FILE] [--perf DIR]
                      [--no-restart]

Targets, each printed with its verdict (met/missed): extender pods/s >= 0.9 x
plain in the same run (median of the rounds); RSS after deleting the pods
within +10 % of before; after a SIGKILL restart the rest bound within 10 s
more than at the uninterrupted rate, and no GPU over-packed."""
import argparse
import json
import os
import signal
import subprocess
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


def perf_start(pids, where, tag):
    """perf record -g of each process over a batch (--perf DIR), else []."""
    if not where:
        return []
    return [subprocess.Popen(["perf", "record", "-q", "-F", "499", "-g", "-o",
                              os.path.join(where, "%s-%s.data" % (tag, k)), "-p", str(v)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for k, v in pids.items()]


def perf_stop(recs):
    for r in recs:
        r.send_signal(signal.SIGINT)
    for r in recs:
        r.wait()


# gpufrac-scheduler's counters, per batch: a slow batch says whether binds
# failed (kube-scheduler retries them after a back-off), and how many
# connections to the API server it opened (each a TLS handshake on both sides)
COUNTED = ("bind_errors_total", "filter_failures_total", "bad_requests_total",
           "api_connections_total")


def batch(cl, ks, gf, n, frac, tag, perf=None):
    """Creates n pods with their scheduler stopped, starts it, times the binds."""
    sel = "bench=" + ("frac" if frac else "plain")
    C.parallel(cl.create, (pod("%s-%d" % (tag, i), frac) for i in range(n)), threads=16)
    ks.start()
    pids = procs(cl, gf, ks)
    # the counters first: their page is not the batch's work
    counts0 = {m: gf.metric("gpufrac_scheduler_" + m) for m in COUNTED}
    recs = perf_start(pids, perf, tag)
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
    perf_stop(recs)
    counts = {m: int(gf.metric("gpufrac_scheduler_" + m) - counts0[m]) for m in COUNTED}
    ks.stop()
    secs = max(t_last - t_first, 1e-3)
    return {"pods": n, "seconds": round(secs, 2),
            "pods_per_s": round((n - b_first) / secs, 1) if n > b_first else None,
            "cpu_ms_per_pod": {k: round(1000 * v / n, 3) for k, v in cpu.items()},
            "gpufrac_scheduler": counts}


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


def algorithm_ms(ks):
    """kube-scheduler's mean scheduling_algorithm_duration per pod, in ms."""
    got = {}
    for line in ks.metrics().splitlines():
        for part in ("sum", "count"):
            key = "scheduler_scheduling_algorithm_duration_seconds_" + part + " "
            if line.startswith(key):
                got[part] = float(line.split()[-1])
    return round(1000 * got["sum"] / got["count"], 3) if got.get("count") else None


class Batch:
    """One scheduler and its kind of pods; kube-scheduler's metrics are read
    before each stop (a restart zeroes them)."""

    def __init__(self, ks, frac):
        self.ks, self.frac, self.alg_ms = ks, frac, []
        orig = ks.stop

        def stop():
            if ks.poll() is None:
                self.alg_ms.append(algorithm_ms(ks))
            orig()
        ks.stop = stop


def drain(cl, gf, sel):
    cl.delete_pods(selector=sel)
    C.wait_for(lambda: not cl.pods(selector=sel) and gf.metric("gpufrac_scheduler_pods") == 0,
               "the round's pods deleted", timeout=300)


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def mean_cpu(results):
    keys = results[0]["cpu_ms_per_pod"]
    return {k: round(sum(r["cpu_ms_per_pod"][k] for r in results) / len(results), 3)
            for k in keys}


def warm_up(cl, gf, ext, plain, nodes):
    """A first batch of each, not counted: the first pods any scheduler ever
    places run slower (connections, caches, Go's heap growing)."""
    for b in (ext, plain):
        batch(cl, b.ks, gf, 200, b.frac, "w%d%s" % (nodes, "f" if b.frac else "p"))
        b.alg_ms.clear()
    drain(cl, gf, "bench=frac")
    drain(cl, gf, "bench=plain")


def rounds(cl, gf, ext, plain, args, nodes):
    frac_res, plain_res, ratios, pack = [], [], [], None
    warm_up(cl, gf, ext, plain, nodes)
    for i in range(args.rounds):
        order = (ext, plain) if i % 2 == 0 else (plain, ext)
        got = {}
        for b in order:
            tag = "%s%d-r%d" % ("f" if b.frac else "p", nodes, i)
            got[b.frac] = batch(cl, b.ks, gf, args.pods, b.frac, tag, args.perf)
        if pack is None:
            pack = packing(cl)
        drain(cl, gf, "bench=frac")
        drain(cl, gf, "bench=plain")
        frac_res.append(got[True])
        plain_res.append(got[False])
        f, p = got[True]["pods_per_s"], got[False]["pods_per_s"]
        ratios.append(round(f / p, 2) if f and p else None)
        print("  round %d: extender %s pods/s, plain %s pods/s (%s x); extender batch: %s" %
              (i + 1, f, p, ratios[-1], got[True]["gpufrac_scheduler"]))
    return frac_res, plain_res, ratios, pack


TARGET_RATIO, TARGET_RSS_PCT, TARGET_RESTART_S = 0.9, 10.0, 10.0


def restart(cl, gf, ext, n, rate):
    """A batch through the extender with gpufrac-scheduler SIGKILLed once a
    quarter is bound and started again at once."""
    sel = "bench=frac"
    C.parallel(cl.create, (pod("k-%d" % i, True) for i in range(n)), threads=16)
    ext.ks.start()
    C.wait_for(lambda: bound_count(cl, sel) >= n // 4, "a quarter bound", timeout=600)
    gf.stop(signal.SIGKILL)
    t_kill, left = time.monotonic(), n - bound_count(cl, sel)
    gf.start()
    C.wait_for(lambda: bound_count(cl, sel) == n, "the rest bound after the restart",
               timeout=900, interval=0.1)
    took = time.monotonic() - t_kill
    pack = packing(cl)
    ext.ks.stop()
    drain(cl, gf, sel)
    expected = left / rate if rate else None
    return {"pods": n, "left_at_kill": left, "seconds": round(took, 2),
            "at_uninterrupted_rate_s": round(expected, 2) if expected else None,
            "overhead_s": round(took - expected, 2) if expected else None,
            "max_pods_on_a_gpu": pack["max_pods_on_a_gpu"]}


def run(nodes, args, tmp):
    cl = C.Cluster(tmp).start()
    try:
        for f in ("rbac.yaml", "rbac-second-scheduler.yaml"):
            cl.apply_all(C.yaml_docs(os.path.join(C.DEPLOY, f)))
        sa = cl.sa_token()
        gf = C.GpufracScheduler(cl, tmp, sa)
        gf.set_filter_answer(args.filter_answer)
        gf.start()
        C.parallel(lambda i: cl.add_node("bench-%d" % i, gpus=[
            ("GPU-%d-%d" % (i, g), g, 80 * Gi) for g in range(8)], labels={"bench": "node"}),
            range(nodes), threads=16)
        C.wait_for(lambda: gf.metric("gpufrac_scheduler_gpu_total_bytes") == nodes * 8 * 80 * Gi,
                   "every node in gpufrac-scheduler's cache", timeout=600)
        time.sleep(1)
        rss_before = C.rss_kib(gf.pid)
        where_before = rss_by_mapping(gf.pid)
        sampler = Sampler(gf.pid)
        sampler.start()
        ext = Batch(C.KubeScheduler(cl, "A", gf.url, tmp, sa, qps=1000, leader_elect=False), True)
        plain = Batch(C.KubeScheduler(cl, "plain", gf.url, tmp, C.KSCHED_TOKEN, qps=1000,
                                      leader_elect=False), False)
        frac_res, plain_res, ratios, pack = rounds(cl, gf, ext, plain, args, nodes)
        time.sleep(3 * 5)  # GF_INFORMER_TRIM_S: the janitor trims after deletions
        rss_pods_gone, peak = C.rss_kib(gf.pid), sampler.peak
        where_pods_gone = rss_by_mapping(gf.pid)
        rs = None
        if not args.no_restart:
            rs = restart(cl, gf, ext, args.pods, median([x["pods_per_s"] for x in frac_res]))
            sampler.stop.set()
            sampler = Sampler(gf.pid)  # the restarted process
            sampler.start()
        C.parallel(lambda i: cl.req("DELETE", "/api/v1/nodes/bench-%d" % i, {}),
                   range(nodes // 5, nodes), threads=16)
        C.wait_for(lambda: gf.metric("gpufrac_scheduler_gpu_total_bytes") ==
                   (nodes // 5) * 8 * 80 * Gi, "deletions seen by gpufrac-scheduler", timeout=300)
        time.sleep(3 * 5)  # GF_INFORMER_TRIM_S: the janitor trims after deletions
        sampler.stop.set()
        rss_after = C.rss_kib(gf.pid)
        where = rss_by_mapping(gf.pid)
        gf.stop()
        return {"nodes": nodes, "gpus": nodes * 8, "pods": args.pods,
                "filter_answer": args.filter_answer,
                "fractional": frac_res, "plain": plain_res, "ratios": ratios,
                "extender_vs_plain": median(ratios),
                "cpu_ms_per_pod": {"extender": mean_cpu(frac_res), "plain": mean_cpu(plain_res)},
                "kube_scheduler_algorithm_ms": {"extender": ext.alg_ms, "plain": plain.alg_ms},
                "binpack": dict(pack, ideal=-(-args.pods // 4)),
                "gpufrac_scheduler_rss_kib": {"before": rss_before, "peak": peak,
                                              "after_pods": rss_pods_gone,
                                              "after": rss_after},
                "restart": rs,
                "rss_before_by_mapping_kib": where_before,
                "rss_after_pods_by_mapping_kib": where_pods_gone,
                "rss_after_by_mapping_kib": where}
    finally:
        cl.stop()


def report(r):
    rss, cpu = r["gpufrac_scheduler_rss_kib"], r["cpu_ms_per_pod"]
    pps = lambda rs: median([x["pods_per_s"] for x in rs])  # noqa: E731
    print("%d nodes x 8 GPUs, %d pods per batch, %d rounds, filter answers %s:" %
          (r["nodes"], r["pods"], len(r["ratios"]), r["filter_answer"]))
    print("  through the extender  %7.1f pods/s (median)  %.2f x plain (median of %s)" %
          (pps(r["fractional"]), r["extender_vs_plain"] or 0, r["ratios"]))
    print("  plain kube-scheduler  %7.1f pods/s (median)" % pps(r["plain"]))
    print("  CPU ms per pod, extender batches: %s" % cpu["extender"])
    print("  CPU ms per pod, plain batches:    %s" % cpu["plain"])
    print("  kube-scheduler algorithm ms per pod: extender %s, plain %s" %
          (r["kube_scheduler_algorithm_ms"]["extender"], r["kube_scheduler_algorithm_ms"]["plain"]))
    print("  binpack: %d GPUs used (ideal %d), at most %d pods of 0.25 on a GPU" %
          (r["binpack"]["gpus_used"], r["binpack"]["ideal"], r["binpack"]["max_pods_on_a_gpu"]))
    print("  gpufrac-scheduler RSS: before %d KiB, peak %d KiB, after the pods %d KiB (%+.1f %%), "
          "after 4/5 of the nodes too %d KiB%s" %
          (rss["before"], rss["peak"], rss["after_pods"], rss_pct(r), rss["after"],
           " (the restarted process)" if r["restart"] else ""))
    print("  resident before, by mapping (KiB): %s" % r["rss_before_by_mapping_kib"])
    print("  resident after the pods, by mapping (KiB): %s" % r["rss_after_pods_by_mapping_kib"])
    print("  resident at the end, by mapping (KiB): %s" % r["rss_after_by_mapping_kib"])
    rs = r["restart"]
    if rs:
        print("  SIGKILL restart: %d of %d pods left, bound in %.1f s after the kill (%.1f s at the "
              "uninterrupted rate), at most %d pods of 0.25 on a GPU" %
              (rs["left_at_kill"], rs["pods"], rs["seconds"], rs["at_uninterrupted_rate_s"] or 0,
               rs["max_pods_on_a_gpu"]))
    for line in verdicts(r):
        print("  verdict: " + line)


def rss_pct(r):
    rss = r["gpufrac_scheduler_rss_kib"]
    return 100.0 * (rss["after_pods"] - rss["before"]) / rss["before"]


def verdicts(r):
    """One line per target: figure, target, met/missed."""
    ok = lambda b: "met" if b else "missed"  # noqa: E731
    ratio = r["extender_vs_plain"] or 0
    out = ["throughput %.2f x plain at %d nodes (target >= %.1f x): %s" %
           (ratio, r["nodes"], TARGET_RATIO, ok(ratio >= TARGET_RATIO)),
           "RSS after deleting the pods %+.1f %% (target <= +%.0f %%): %s" %
           (rss_pct(r), TARGET_RSS_PCT, ok(rss_pct(r) <= TARGET_RSS_PCT))]
    rs = r["restart"]
    if rs:
        over = rs["overhead_s"]
        out.append("rest bound %.1f s after a SIGKILL restart, %+.1f s against the uninterrupted "
                   "rate (target <= +%.0f s, no GPU over-packed): %s" %
                   (rs["seconds"], over or 0, TARGET_RESTART_S,
                    ok(over is not None and over <= TARGET_RESTART_S and
                       rs["max_pods_on_a_gpu"] <= 4)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", default="500,5000")
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--filter-answer", default="best", choices=("best", "fitting"),
                    help="gpufrac-scheduler's --filter-answer")
    ap.add_argument("--json")
    ap.add_argument("--no-restart", action="store_true",
                    help="skip the SIGKILL restart measurement")
    ap.add_argument("--perf", metavar="DIR",
                    help="perf record -g each process during each batch into DIR")
    args = ap.parse_args()
    why = C.missing()
    if why:
        print("SKIP: " + why)
        return 77
    results = []
    for n in [int(x) for x in args.nodes.split(",")]:
        print("%d nodes ..." % n)
        with tempfile.TemporaryDirectory(prefix="gpufrac-kube-bench-") as tmp:
            r = run(n, args, tmp)
        results.append(r)
        report(r)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    sys.exit(main())
