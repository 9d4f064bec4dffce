# SPDX-License-Identifier: Apache-2.0
"""What the shim adds to driver calls, against no shim in the same run, the
sides interleaved: run inside a fraction, it starts ROUNDS pairs of worker
processes, one with the fraction's environment and one without LD_PRELOAD and
GPUFRAC_CONFIG, alternating, and reports the median of the workers' best times.

  overhead_probe.py ROUNDS PAIRS      parent (inside `gpufrac run`)
  overhead_probe.py worker PAIRS      (helper) prints the figures of one side

Figures (ns per call through ctypes, whose own ~0.3 us is on both sides):
  pairs1_ns_*   cuMemAlloc_v2 + cuMemFree_v2 of 1 MiB, one thread
  pairs8_per_s_* pairs per second, 8 threads of one process (ctypes drops the GIL)
  meminfo_ns_*  cuMemGetInfo_v2 (the shim answers from the fraction's ledger)
"""
import ctypes
import os
import statistics
import subprocess
import sys
import threading
import time

from gpuprobe import MiB, check, fraction, kv, main

BEST_OF = 3


def worker(pairs):
    cu = ctypes.CDLL("libcuda.so.1")
    check(cu.cuInit(0) == 0, "cuInit failed")
    c = ctypes.c_void_p()
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(c), 0) == 0, "cuDevicePrimaryCtxRetain failed")
    cu.cuCtxSetCurrent(c)
    alloc, free_ = cu.cuMemAlloc_v2, cu.cuMemFree_v2
    alloc.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_size_t]
    free_.argtypes = [ctypes.c_ulonglong]

    def pair_loop(n, errors):
        cu.cuCtxSetCurrent(c)
        p = ctypes.c_ulonglong()
        ref = ctypes.byref(p)
        for _ in range(n):
            if alloc(ref, MiB) != 0 or free_(p.value) != 0:
                errors.append(1)
                return

    def timed(fn):
        t0 = time.perf_counter_ns()
        fn()
        return time.perf_counter_ns() - t0

    def pairs8():
        errors = []
        ts = [threading.Thread(target=pair_loop, args=(pairs // 8, errors)) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        check(not errors, "an alloc+free pair failed in the 8-thread run")

    fr, to = ctypes.c_size_t(), ctypes.c_size_t()

    def meminfo():
        f, a, b = cu.cuMemGetInfo_v2, ctypes.byref(fr), ctypes.byref(to)
        for _ in range(pairs):
            f(a, b)

    errors = []
    pair_loop(min(pairs, 1000), errors)  # warm-up
    check(not errors, "an alloc+free pair failed")
    p1 = min(timed(lambda: pair_loop(pairs, errors)) for _ in range(BEST_OF)) / pairs
    check(not errors, "an alloc+free pair failed")
    p8 = min(timed(pairs8) for _ in range(BEST_OF))
    mi = min(timed(meminfo) for _ in range(BEST_OF)) / pairs
    print("pairs1_ns=%.1f pairs8_per_s=%.0f meminfo_ns=%.1f" % (p1, (pairs // 8) * 8 / (p8 / 1e9),
                                                                mi), flush=True)


def side(env, pairs):
    r = subprocess.run([sys.executable, __file__, "worker", str(pairs)], env=env,
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, "a worker failed (%d): %s", r.returncode, r.stderr.strip()[-300:])
    fields = (f.split("=", 1) for f in r.stdout.split() if "=" in f)
    return {k: float(v) for k, v in fields if k.endswith(("_ns", "_per_s"))}


def parent(rounds, pairs):
    _uuid, limit = fraction()
    shim_env = dict(os.environ)
    bare_env = {k: v for k, v in os.environ.items()
                if k not in ("LD_PRELOAD", "GPUFRAC_CONFIG")}
    res = {"noshim": [], "shim": []}
    for i in range(rounds):  # alternate which side goes first
        order = ("noshim", "shim") if i % 2 == 0 else ("shim", "noshim")
        for s in order:
            res[s].append(side(bare_env if s == "noshim" else shim_env, pairs))
    kv("rounds", rounds)
    kv("pairs", pairs)
    med = {s: {k: statistics.median(r[k] for r in res[s]) for k in res[s][0]} for s in res}
    for k in ("pairs1_ns", "meminfo_ns"):
        kv(k + "_noshim", "%.1f" % med["noshim"][k])
        kv(k + "_shim", "%.1f" % med["shim"][k])
        kv(k.replace("_ns", "_added_ns"), "%.1f" % (med["shim"][k] - med["noshim"][k]))
        kv(k.replace("_ns", "_ratio"), "%.3f" % (med["noshim"][k] / med["shim"][k]))
    kv("pairs8_per_s_noshim", "%.0f" % med["noshim"]["pairs8_per_s"])
    kv("pairs8_per_s_shim", "%.0f" % med["shim"]["pairs8_per_s"])
    kv("pairs8_ratio", "%.3f" % (med["shim"]["pairs8_per_s"] / med["noshim"]["pairs8_per_s"]))
    kv("limit_bytes", limit)


def run():
    parent(int(sys.argv[1]), int(sys.argv[2]))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        main(lambda: worker(int(sys.argv[2])))
    else:
        main(run)
