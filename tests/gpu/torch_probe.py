# SPDX-License-Identifier: Apache-2.0
"""PyTorch inside a fraction.

  torch_probe.py limits        mem_get_info / device properties = limit; fill to
                               >= 90% of it, the next chunk raises OutOfMemoryError
  torch_probe.py share         two processes of one fraction share the limit
  torch_probe.py hold FRAC     (helper) holds FRAC of the limit until stdin closes
  torch_probe.py portion MIB   (--memory 0.5) limit = half of a MIB-MiB device
  torch_probe.py footprint     after cuBLAS work, fill to the limit: the process's
                               whole footprint as NVML attributes it (context,
                               cuBLAS workspace, allocations) is <= the limit
"""
import ctypes
import gc
import os
import subprocess
import sys

from gpuprobe import MiB, ProbeFailure, ProbeSkip, check, fill, fraction, kv, main, need

torch = None  # imported by run(), after the fraction is checked
OOM = None


def alloc(nbytes):
    return torch.empty(nbytes, dtype=torch.uint8, device="cuda")


def sees_limit(limit):
    free, total = torch.cuda.mem_get_info()
    props = torch.cuda.get_device_properties(0).total_memory
    kv("limit_bytes", limit)
    kv("mem_get_info_total", total)
    kv("mem_get_info_free", free)
    kv("props_total_memory", props)
    check(total == limit, "torch.cuda.mem_get_info() total %d != limit %d", total, limit)
    check(free <= total, "free %d > total %d", free, total)
    check(props == limit, "get_device_properties(0).total_memory %d != limit %d", props, limit)


def limits():
    _uuid, limit = fraction()
    sees_limit(limit)
    held, _reached = fill(alloc, limit, (OOM,))
    del held
    gc.collect()
    torch.cuda.empty_cache()
    free, _total = torch.cuda.mem_get_info()
    kv("free_after_release", free)
    check(free >= 0.9 * limit, "after freeing everything only %d of %d bytes are free", free, limit)


def part(limit, frac):
    return int(limit * frac) // MiB * MiB


def hold(frac):
    _uuid, limit = fraction()
    x = alloc(part(limit, frac))
    torch.cuda.synchronize()
    kv("holding", x.numel())
    sys.stdin.read()  # until the parent closes our stdin


def try_alloc(nbytes):
    try:
        x = alloc(nbytes)
        torch.cuda.synchronize()
        del x
        torch.cuda.empty_cache()
        return True
    except OOM:
        return False


def start_holder(frac):
    p = subprocess.Popen([sys.executable, __file__, "hold", str(frac)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    for line in p.stdout:
        if line.startswith("holding="):
            kv("holder_bytes", line.strip().split("=", 1)[1])
            return p
        if line.startswith("error="):
            break
    p.kill()
    p.wait()
    raise ProbeFailure("the holder process could not take its share (exit %s)" % p.returncode)


def share():
    _uuid, limit = fraction()
    holder = start_holder(0.6)
    try:
        got = try_alloc(part(limit, 0.6))
        kv("second_got_60pct_while_held", int(got))
        check(not got, "a second process got 60%% of the limit while the first held 60%%")
        got = try_alloc(part(limit, 0.3))
        kv("second_got_30pct_while_held", int(got))
        check(got, "a second process could not get 30%% of the limit next to 60%%")
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    got = try_alloc(part(limit, 0.6))
    kv("second_got_60pct_after_release", int(got))
    check(got, "60%% of the limit was still unavailable after the first process exited")


def portion(device_total_mib):
    _uuid, limit = fraction()
    want = device_total_mib * MiB // 2 // MiB * MiB
    kv("device_total_mib", device_total_mib)
    kv("expected_limit_bytes", want)
    check(abs(limit - want) <= 2 * MiB, "--memory 0.5 gave a limit of %d bytes, expected half of "
          "%d MiB = %d bytes (+-2 MiB)", limit, device_total_mib, want)
    sees_limit(limit)


def nvml_used(pid):
    """NVML's used memory of PID on the fraction's device, or None when not listed."""
    class Info(ctypes.Structure):
        _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong),
                    ("gi", ctypes.c_uint), ("ci", ctypes.c_uint)]
    uuid, _limit = fraction()
    nv = ctypes.CDLL("libnvidia-ml.so.1")
    check(nv.nvmlInit_v2() == 0, "nvmlInit_v2 failed")
    h = ctypes.c_void_p()
    if uuid.startswith("GPU-"):
        rc = nv.nvmlDeviceGetHandleByUUID(uuid.encode(), ctypes.byref(h))
    else:
        rc = nv.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h))
    check(rc == 0, "no NVML handle for %s (%d)", uuid, rc)
    n = ctypes.c_uint(256)
    infos = (Info * 256)()
    rc = nv.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), infos)
    check(rc == 0, "nvmlDeviceGetComputeRunningProcesses_v3 failed (%d)", rc)
    for i in range(n.value):
        if infos[i].pid == pid:
            return infos[i].used
    return None


def footprint():
    _uuid, limit = fraction()
    a = torch.randn(4096, 4096, device="cuda")
    b = (a @ a).sum().item()  # a cuBLAS handle and its workspace
    kv("matmul_sum_finite", int(b == b))
    # what the context and cuBLAS take is the point here, not how much is left
    held, reached = fill(alloc, limit, (OOM,), least=0.5)
    torch.cuda.synchronize()
    used = nvml_used(os.getpid())
    free, total = torch.cuda.mem_get_info()
    kv("charged_at_oom_mib", "%.1f" % ((total - free) / MiB))
    kv("allocated_at_oom_mib", "%.1f" % (reached / MiB))
    if used is None:
        raise ProbeSkip("NVML does not list pid %d (a PID namespace without host pids): the "
                        "footprint cannot be attributed" % os.getpid())
    kv("nvml_used_at_oom_mib", "%.1f" % (used / MiB))
    kv("limit_mib", "%.1f" % (limit / MiB))
    kv("footprint_headroom_mib", "%.1f" % ((limit - used) / MiB))
    check(used <= limit, "NVML attributes %d bytes to the process at its OOM, past the limit %d",
          used, limit)
    del held


def run():
    global torch, OOM
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd != "hold":
        fraction()  # inside a fraction with the shim, before any framework
    torch = need("torch")
    OOM = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    check(torch.cuda.is_available(), "torch.cuda.is_available() is False inside the fraction")
    if cmd == "limits":
        limits()
    elif cmd == "share":
        share()
    elif cmd == "hold":
        hold(float(sys.argv[2]))
    elif cmd == "portion":
        portion(int(sys.argv[2]))
    elif cmd == "footprint":
        footprint()
    else:
        raise ProbeFailure("usage: torch_probe.py limits|share|hold FRAC|portion MIB|footprint")


if __name__ == "__main__":
    main(run)
