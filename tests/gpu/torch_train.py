# SPDX-License-Identifier: Apache-2.0
"""A PyTorch training step, timed: a small transformer encoder, fixed seed,
fixed batch. Runs inside a fraction or outside (the baseline of the same run).

  torch_train.py STEPS     prints step_ms, steps_per_s; inside a fraction also
                           what NVML attributes to the process against what the
                           shim charged (the footprint check of docs/footprint.md)
"""
import ctypes
import os
import sys
import time

from gpuprobe import MiB, check, kv, main, need

WARMUP = 10


def nvml_process_used():
    """NVML's used memory of this pid on device 0, or None when not listed."""
    class Info(ctypes.Structure):
        _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong),
                    ("gi", ctypes.c_uint), ("ci", ctypes.c_uint)]
    nv = ctypes.CDLL("libnvidia-ml.so.1")
    nv.nvmlInit_v2()
    h = ctypes.c_void_p()
    idx = int(os.environ.get("GPU_TEST_DEVICE", "0"))
    nv.nvmlDeviceGetHandleByIndex_v2(idx, ctypes.byref(h))
    n = ctypes.c_uint(256)
    infos = (Info * 256)()
    if nv.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), infos) != 0:
        return None
    for i in range(n.value):
        if infos[i].pid == os.getpid():
            return infos[i].used
    return None


def run():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    torch = need("torch")
    torch.manual_seed(0)
    dev = torch.device("cuda")
    layer = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048,
                                             batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=4).to(dev)
    head = torch.nn.Linear(512, 1000).to(dev)
    opt = torch.optim.AdamW(list(model.parameters()) + list(head.parameters()), lr=1e-4)
    x = torch.randn(32, 128, 512, device=dev)
    y = torch.randint(0, 1000, (32 * 128,), device=dev)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(head(model(x)).reshape(-1, 1000), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    kv("steps", steps)
    kv("step_ms", "%.3f" % (dt * 1000 / steps))
    kv("steps_per_s", "%.2f" % (steps / dt))
    kv("final_loss", "%.4f" % loss.item())
    if os.environ.get("GPUFRAC_CONFIG") or os.path.exists("/etc/gpufrac/fraction.conf"):
        free, total = torch.cuda.mem_get_info()
        charged = total - free
        used = nvml_process_used()
        kv("footprint_charged_mib", "%.1f" % (charged / MiB))
        if used is None:
            kv("footprint_nvml_mib", "unattributed")
        else:
            kv("footprint_nvml_mib", "%.1f" % (used / MiB))
            kv("footprint_error_mib", "%.1f" % ((charged - used) / MiB))
            # the fraction is this one process: the shim's charge is its footprint
            check(charged >= used - 64 * MiB, "charged %d, NVML attributes %d", charged, used)


if __name__ == "__main__":
    main(run)
