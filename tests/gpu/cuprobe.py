# SPDX-License-Identifier: Apache-2.0
"""The CUDA driver through ctypes, no framework: runs on a real driver and on
gpusim alike, so the agent's checks and the non-root check also run in the
suite's dry run. Steps run in order, each printing key=value:

  cuprobe.py alloc SIZE ...   cuMemAlloc_v2 of SIZE (8Gi, 512Mi, bytes): alloc=ok or
                              alloc=CUDA_ERROR_<name> (kept until exit)
             info             free= total= (cuMemGetInfo_v2)
             nvml             nvml_lists_self=0|1: NVML's process list has this pid
             hold SECONDS     prints holding=<bytes>, sleeps (until killed)
             expect-limit N   total must be N bytes (exit 1 otherwise)
Exit 0 unless a step failed (an alloc refusal is a result, not a failure)."""
import ctypes
import os
import sys
import time

from gpuprobe import MiB, ProbeFailure, check, kv, main

UNITS = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}
ERRORS = {2: "CUDA_ERROR_OUT_OF_MEMORY", 3: "CUDA_ERROR_NOT_INITIALIZED",
          100: "CUDA_ERROR_NO_DEVICE", 201: "CUDA_ERROR_INVALID_CONTEXT"}


def size(text):
    for unit, mult in UNITS.items():
        if text.endswith(unit):
            return int(float(text[:-2]) * mult)
    return int(text)


class Driver:
    def __init__(self):
        self.cu = ctypes.CDLL("libcuda.so.1")
        check(self.cu.cuInit(0) == 0, "cuInit failed")
        c = ctypes.c_void_p()
        check(self.cu.cuDevicePrimaryCtxRetain(ctypes.byref(c), 0) == 0,
              "cuDevicePrimaryCtxRetain failed")
        check(self.cu.cuCtxSetCurrent(c) == 0, "cuCtxSetCurrent failed")
        self.held = []

    def alloc(self, nbytes):
        p = ctypes.c_ulonglong()
        rc = self.cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(nbytes))
        if rc == 0:
            self.held.append(p)
            return "ok"
        return ERRORS.get(rc, "CUDA_ERROR_%d" % rc)

    def info(self):
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        check(self.cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0,
              "cuMemGetInfo_v2 failed")
        return free.value, total.value


def nvml_lists(pid):
    class Info(ctypes.Structure):
        _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong),
                    ("gi", ctypes.c_uint), ("ci", ctypes.c_uint)]
    nv = ctypes.CDLL("libnvidia-ml.so.1")
    check(nv.nvmlInit_v2() == 0, "nvmlInit_v2 failed")
    h = ctypes.c_void_p()
    check(nv.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)) == 0, "no NVML device 0")
    n = ctypes.c_uint(256)
    infos = (Info * 256)()
    rc = nv.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), infos)
    check(rc == 0, "nvmlDeviceGetComputeRunningProcesses_v3 failed (%d)", rc)
    kv("nvml_processes", n.value)
    return any(infos[i].pid == pid for i in range(n.value))


def run():
    args = sys.argv[1:]
    d = Driver()
    while args:
        verb = args.pop(0)
        if verb == "alloc":
            kv("alloc", d.alloc(size(args.pop(0))))
        elif verb == "info":
            free, total = d.info()
            kv("free", free)
            kv("total", total)
        elif verb == "nvml":
            kv("nvml_lists_self", int(nvml_lists(os.getpid())))
        elif verb == "hold":
            seconds = float(args.pop(0))
            kv("holding", len(d.held))
            time.sleep(seconds)
        elif verb == "expect-limit":
            want = size(args.pop(0))
            _free, total = d.info()
            kv("total", total)
            check(total == want, "cuMemGetInfo total %d != %d (%.1f MiB)", total, want,
                  want / MiB)
        else:
            raise ProbeFailure("unknown step %r (see cuprobe.py's docstring)" % verb)


if __name__ == "__main__":
    main(run)
