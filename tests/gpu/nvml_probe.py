# SPDX-License-Identifier: Apache-2.0
"""NVML inside a fraction: pynvml (if installed) and nvidia-smi report the limit."""
import subprocess

from gpuprobe import MiB, check, fraction, kv, main


def pynvml_total(uuid, limit):
    try:
        import pynvml
    except ImportError:
        kv("pynvml", "not-installed")
        return
    pynvml.nvmlInit()
    try:
        if uuid.startswith("GPU-"):
            h = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        else:
            h = pynvml.nvmlDeviceGetHandleByIndex(0)
        mem = pynvml.nvmlDeviceGetMemoryInfo(h)
    finally:
        pynvml.nvmlShutdown()
    kv("pynvml_total", mem.total)
    kv("pynvml_free", mem.free)
    check(mem.total == limit, "pynvml nvmlDeviceGetMemoryInfo total %d != limit %d", mem.total,
          limit)
    check(mem.free <= limit, "pynvml free %d > limit %d", mem.free, limit)


def smi_total(uuid, limit):
    cmd = ["nvidia-smi", "--query-gpu=memory.total,memory.free", "--format=csv,noheader,nounits"]
    if uuid.startswith("GPU-"):
        cmd += ["-i", uuid]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "%s failed (%d): %s", " ".join(cmd), r.returncode, r.stderr.strip())
    total_mib, free_mib = (int(x) for x in r.stdout.strip().splitlines()[0].split(","))
    kv("smi_total_mib", total_mib)
    kv("smi_free_mib", free_mib)
    check(abs(total_mib - limit / MiB) <= 1, "nvidia-smi memory.total %d MiB != limit %.1f MiB",
          total_mib, limit / MiB)


def run():
    uuid, limit = fraction()
    kv("limit_bytes", limit)
    pynvml_total(uuid, limit)
    smi_total(uuid, limit)


if __name__ == "__main__":
    main(run)
