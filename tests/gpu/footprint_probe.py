# SPDX-License-Identifier: Apache-2.0
"""The fraction's footprint as the driver measures it (docs/footprint.md), on
the real driver through ctypes (also runs over gpusim for dry runs).

  footprint_probe.py ctx           context overhead of this process (NVML), what
                                   the shim charged for it, and a raised stack limit
  footprint_probe.py race P T SIZE [SECONDS]
                                   P processes x T threads racing SIZE-MiB
                                   allocations (4 held per thread) in the fraction;
                                   the NVML-measured footprint of the fraction's
                                   processes is sampled and must stay <= the limit
                                   for SECONDS (default 20)
  footprint_probe.py race-worker T SIZE SECONDS   (helper)
"""
import ctypes
import os
import subprocess
import sys
import threading
import time

from gpuprobe import MiB, check, fraction, kv, main

CU_LIMIT_STACK_SIZE = 0


class ProcInfo(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


def libs():
    cu = ctypes.CDLL("libcuda.so.1")
    nv = ctypes.CDLL("libnvidia-ml.so.1")
    check(cu.cuInit(0) == 0, "cuInit failed")
    check(nv.nvmlInit_v2() == 0, "nvmlInit_v2 failed")
    return cu, nv


def nvml_device(nv, uuid):
    h = ctypes.c_void_p()
    if uuid.startswith("GPU-"):
        rc = nv.nvmlDeviceGetHandleByUUID(uuid.encode(), ctypes.byref(h))
    else:
        rc = nv.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h))
    check(rc == 0, "no NVML handle for %s (%d)", uuid, rc)
    return h


def processes(nv, h):
    """{pid: used bytes} NVML attributes on the device."""
    n = ctypes.c_uint(256)
    infos = (ProcInfo * 256)()
    rc = nv.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), infos)
    check(rc == 0, "nvmlDeviceGetComputeRunningProcesses_v3 failed (%d)", rc)
    return {infos[i].pid: infos[i].usedGpuMemory for i in range(n.value)}


def charged(cu):
    """What the shim charges the fraction: total (= limit) - free."""
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    check(cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0, "cuMemGetInfo failed")
    return total.value - free.value


def ctx():
    uuid, limit = fraction()
    cu, nv = libs()
    h = nvml_device(nv, uuid)
    me = os.getpid()
    before = processes(nv, h).get(me, 0)
    c = ctypes.c_void_p()
    t0 = time.monotonic()
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(c), 0) == 0, "cuDevicePrimaryCtxRetain failed")
    kv("ctx_create_ms", "%.1f" % ((time.monotonic() - t0) * 1000))
    check(cu.cuCtxSetCurrent(c) == 0, "cuCtxSetCurrent failed")
    procs = processes(nv, h)
    listed = me in procs
    kv("nvml_lists_pid", int(listed))
    nvml = procs.get(me, 0) - before
    shim = charged(cu)
    kv("ctx_overhead_nvml_mib", "%.1f" % (nvml / MiB))
    kv("ctx_charged_mib", "%.1f" % (shim / MiB))
    if listed:
        kv("ctx_error_mib", "%.1f" % ((shim - nvml) / MiB))
        check(abs(shim - nvml) <= 2 * MiB, "charged %d for the context, NVML says %d", shim, nvml)
    check(shim > 0, "nothing charged for a context")
    # a raised stack limit: stack x resident threads
    old = ctypes.c_size_t()
    cu.cuCtxGetLimit(ctypes.byref(old), CU_LIMIT_STACK_SIZE)
    n0 = processes(nv, h).get(me, 0)
    rc = cu.cuCtxSetLimit(CU_LIMIT_STACK_SIZE, ctypes.c_size_t(old.value * 4))
    kv("stack_limit_rc", rc)
    n1 = processes(nv, h).get(me, 0)
    s1 = charged(cu)
    kv("stack_x4_nvml_mib", "%.1f" % ((n1 - n0) / MiB))
    kv("stack_x4_charged_mib", "%.1f" % ((s1 - shim) / MiB))
    if rc == 0 and listed:
        check(abs((s1 - shim) - (n1 - n0)) <= 2 * MiB, "stack limit: charged %d, NVML %d",
              s1 - shim, n1 - n0)
    kv("limit_bytes", limit)


def race_worker(threads, size_mib, seconds):
    cu, _nv = libs()
    c = ctypes.c_void_p()
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(c), 0) == 0, "cuDevicePrimaryCtxRetain failed")
    counts = {"ok": 0, "refused": 0}
    lock = threading.Lock()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()  # start together
    end = time.monotonic() + seconds

    def run():
        cu.cuCtxSetCurrent(c)
        ok = refused = 0
        while time.monotonic() < end:
            held = []
            for _ in range(4):
                p = ctypes.c_ulonglong()
                if cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(size_mib * MiB)) == 0:
                    held.append(p)
                    ok += 1
                else:
                    refused += 1
            for p in held:
                cu.cuMemFree_v2(p)
        with lock:
            counts["ok"] += ok
            counts["refused"] += refused

    ts = [threading.Thread(target=run) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("ok=%d refused=%d" % (counts["ok"], counts["refused"]), flush=True)


def race(nproc, threads, size_mib, seconds):
    uuid, limit = fraction()
    _cu, nv = libs()
    h = nvml_device(nv, uuid)
    procs = [subprocess.Popen([sys.executable, __file__, "race-worker", str(threads),
                               str(size_mib), str(seconds)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for _ in range(nproc)]
    for p in procs:
        check(p.stdout.readline().strip() == "ready", "a race worker did not start")
    pids = {p.pid for p in procs}
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    peak = samples = 0
    attributed = False
    while any(p.poll() is None for p in procs):
        seen = processes(nv, h)
        attributed = attributed or bool(pids & set(seen))  # NVML lists host pids
        peak = max(peak, sum(v for k, v in seen.items() if k in pids))
        samples += 1
    ok = refused = 0
    for p in procs:
        out = p.stdout.read()
        check(p.wait() == 0, "a race worker failed")
        fields = dict(f.split("=") for f in out.split())
        ok += int(fields["ok"])
        refused += int(fields["refused"])
    kv("race_ok", ok)
    kv("race_refused", refused)
    kv("race_samples", samples)
    kv("race_peak_nvml_mib", "%.1f" % (peak / MiB))
    kv("race_limit_mib", "%.1f" % (limit / MiB))
    check(refused > 0, "the race did not contend")
    check(attributed, "NVML never listed the workers' pids (PID namespace?)")
    tool, state = os.environ.get("GPUSIM_TOOL"), os.environ.get("GPUSIM_STATE")
    if tool and state:
        # gpusim lists its processes slot after slot while 32 threads race,
        # so the sum of one listing can be off by several allocations: its
        # own device peak (one counter, contexts included) is the exact check
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}  # the tool, not a tenant
        out = subprocess.run([tool, "dump", state], capture_output=True, text=True, env=env,
                             check=True).stdout
        dev = dict(f.split("=", 1) for f in out.split() if "=" in f)
        driver_peak = int(dev["dev0_peak"])
        kv("race_peak_driver_mib", "%.1f" % (driver_peak / MiB))
        check(driver_peak <= limit, "the fraction's processes held %d bytes (gpusim's peak), "
              "limit %d", driver_peak, limit)
        return
    # NVML's per-process figures are read one after the other while the race
    # goes on: their sum may be off by one allocation in flight
    kv("race_sampling_slack_mib", size_mib)
    check(peak <= limit + size_mib * MiB, "the fraction's processes held %d bytes (NVML), "
          "limit %d", peak, limit)


def run():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "ctx":
        ctx()
    elif mode == "race":
        race(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
             float(sys.argv[5]) if len(sys.argv) > 5 else 20.0)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "race-worker":
        race_worker(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    else:
        main(run)
