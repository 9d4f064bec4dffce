# SPDX-License-Identifier: Apache-2.0
"""numba's CUDA driver binding, unmodified, inside a fraction: the one script
that both `make check` (tests/integration/test_numba.py, over gpusim) and
tests/gpu/run.sh (on a real driver) run.

  numba_probe.py [all]   cuda.detect() names the fraction's GPU; the context's
                         memory info total = the limit; every entry point numba
                         binds resolves; device arrays round-trip
                         exactly (HtoD, DtoH, DtoD, slices, pinned async copies,
                         memset); numba's deallocate-and-retry succeeds where
                         only its pending frees stood in the way; filling past
                         the limit ends in numba's own CUDA_ERROR_OUT_OF_MEMORY;
                         a second numba process of the fraction sees what the
                         first holds (share); an IPC handle exported here and
                         opened there maps the same bytes and is charged once.
  numba_probe.py hold N  allocates N bytes, prints holding=N, sleeps (to be
                         evicted when N goes past the fraction's request).

Prints key=value lines (see gpuprobe.py); a failed check exits 1."""
import contextlib
import gc
import io
import os
import pickle
import subprocess
import sys
import time

from gpuprobe import MiB, ProbeFailure, check, fill, fraction, kv, main, need

SEED = 7


class NumbaOOM(Exception):
    pass


def numba():
    cuda = need("numba.cuda")
    np = need("numpy")
    driver = need("numba.cuda.cudadrv.driver")
    return cuda, np, driver


def device_array(cuda, np, driver, n):
    """n bytes on the device, or NumbaOOM with numba's own message when numba
    (after flushing its pending frees and retrying) raises out of memory."""
    try:
        return cuda.device_array(n, dtype=np.uint8)
    except driver.CudaAPIError as e:
        if int(getattr(e, "code", 0) or 0) == 2 and "CUDA_ERROR_OUT_OF_MEMORY" in str(e):
            raise NumbaOOM(str(e))
        raise


def flush(cuda):
    """Frees what nothing holds now: arrays kept only by a spent exception's
    frames are collected first, so each step starts from what it holds."""
    ctx = cuda.current_context()
    gc.collect()
    ctx.memory_manager.deallocations.clear()  # device memory (numba's own queue)
    ctx.deallocations.clear()  # streams, events


def pattern(np, n):
    return np.random.default_rng(SEED).integers(0, 256, size=n, dtype=np.uint8)


def shows_fraction(cuda, uuid, limit):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ok = cuda.detect()
    text = out.getvalue()
    check(ok, "cuda.detect() found no supported device:\n%s", text)
    check(uuid in text, "cuda.detect() does not name the fraction's GPU %s:\n%s", uuid, text)
    kv("detect_uuid", uuid)
    nvvm = need("numba.cuda.cudadrv.nvvm")
    kv("nvvm", "found" if nvvm.is_available() else "missing")
    free, total = cuda.current_context().get_memory_info()
    kv("limit_bytes", limit)
    kv("mem_get_info_total", total)
    kv("mem_get_info_free", free)
    check(total == limit, "numba get_memory_info total %d != limit %d", total, limit)
    check(free <= total, "free %d > total %d", free, total)


def binds_everything(driver):
    """Every driver entry point numba's ctypes binding knows resolves (numba
    would otherwise raise "Driver missing function" at its first use)."""
    drvapi = need("numba.cuda.cudadrv.drvapi")
    missing = [n for n in sorted(drvapi.API_PROTOTYPES)
               if getattr(driver.driver._find_api(n), "__name__", "") == "absent_function"]
    kv("driver_api_bound", len(drvapi.API_PROTOTYPES) - len(missing))
    kv("driver_api_missing", ",".join(missing) or "none")
    check(not missing, "the driver lacks %s", ", ".join(missing))


def round_trip(cuda, np, driver):
    a = pattern(np, 8 * MiB + 3)
    d = cuda.to_device(a)
    check(np.array_equal(d.copy_to_host(), a), "HtoD + DtoH changed the bytes")
    d2 = cuda.device_array_like(a)
    d2.copy_to_device(d)
    check(np.array_equal(d2.copy_to_host(), a), "DtoD changed the bytes")
    check(np.array_equal(d[12345:67890].copy_to_host(), a[12345:67890]), "a slice differs")
    s = cuda.stream()
    pinned = cuda.pinned_array(a.shape, dtype=a.dtype)
    start, end = cuda.event(), cuda.event()
    start.record(s)
    d.copy_to_host(pinned, stream=s)
    end.record(s)
    end.synchronize()
    check(np.array_equal(pinned, a), "an async copy into pinned memory differs")
    check(cuda.event_elapsed_time(start, end) >= 0, "negative elapsed time")
    called = []
    s.add_callback(lambda stream, status, arg: called.append(arg), "done")
    s.synchronize()
    check(called == ["done"], "the stream callback ran %r", called)
    driver.device_memset(d2, 0, a.nbytes)
    check(not d2.copy_to_host().any(), "memset left non-zero bytes")
    kv("roundtrip", "exact")


def retry_after_flush(cuda, np, driver):
    """Frees numba has only queued hold memory until its out-of-memory path
    flushes them: an allocation that fits only once they are done succeeds."""
    chunk = cuda.current_context().get_memory_info().total // 32
    smalls = [device_array(cuda, np, driver, chunk) for _ in range(4)]
    del smalls  # queued: 4 < the pending count, limit/8 < the pending bytes
    free = cuda.current_context().get_memory_info().free
    big = device_array(cuda, np, driver, free + chunk)
    kv("retry_after_flush", "ok")
    del big
    flush(cuda)


def out_of_memory(cuda, np, driver, limit):
    errors = []

    def alloc(n):
        try:
            return device_array(cuda, np, driver, n)
        except NumbaOOM as e:
            errors.append(str(e))
            raise

    held, reached = fill(alloc, limit, (NumbaOOM,))
    kv("oom_reached_bytes", reached)
    kv("oom_error", errors[-1])
    del held
    flush(cuda)


def child(mode, payload, env=None):
    r = subprocess.run([sys.executable, os.path.abspath(__file__), mode], input=payload,
                       capture_output=True, env=env, timeout=300)
    out = r.stdout.decode()
    if r.returncode != 0:
        raise ProbeFailure("%s child failed (%d): %s %s" % (mode, r.returncode, out,
                                                              r.stderr.decode()[-2000:]))
    return dict(ln.split("=", 1) for ln in out.splitlines() if "=" in ln)


def share(cuda, np, driver, limit):
    """A second process of the fraction sees what this one holds."""
    held = device_array(cuda, np, driver, limit // 2)
    got = child("share-child", b"%d" % (limit // 2))
    for k in ("share_child_free", "share_child_over", "share_child_half"):
        kv(k, got[k])
    check(int(got["share_child_free"]) <= limit - limit // 2,
          "the second process sees %s free beside %d held", got["share_child_free"], limit // 2)
    check(got["share_child_over"] == "CUDA_ERROR_OUT_OF_MEMORY",
          "the second process allocated past the shared limit: %s", got["share_child_over"])
    check(got["share_child_half"] == "ok", "the second process could not allocate what is left")
    del held
    flush(cuda)


def share_child(cuda, np, driver):
    free, _total = cuda.current_context().get_memory_info()
    kv("share_child_free", free)
    try:
        device_array(cuda, np, driver, free + 64 * MiB)
        kv("share_child_over", "ok")
    except NumbaOOM:
        kv("share_child_over", "CUDA_ERROR_OUT_OF_MEMORY")
    flush(cuda)
    x = device_array(cuda, np, driver, free // 2)
    kv("share_child_half", "ok")
    del x


def ipc(cuda, np, driver, limit):
    """Exported here, opened in a second process of the fraction: the same
    bytes, and the fraction's count does not grow by the import."""
    n = limit // 8
    d = cuda.to_device(pattern(np, n))
    handle = d.get_ipc_handle()
    got = child("ipc-child", pickle.dumps((handle, n)))
    for k in ("ipc_child_free_before", "ipc_child_free_after", "ipc_child_data"):
        kv(k, got[k])
    before, after = int(got["ipc_child_free_before"]), int(got["ipc_child_free_after"])
    check(got["ipc_child_data"] == "exact", "the importer read other bytes")
    check(before <= limit - n, "the exporter's %d bytes are not in the count (%d free)", n, before)
    check(before - after < n // 2, "the import was charged again: free %d -> %d", before, after)
    check(d[:16].copy_to_host().tolist() == [0x5A] * 16, "the importer's write is not seen here")
    kv("ipc_shared_bytes", "same")
    del d
    flush(cuda)


def ipc_child(cuda, np, driver):
    handle, n = pickle.loads(sys.stdin.buffer.read())
    ctx = cuda.current_context()
    kv("ipc_child_free_before", ctx.get_memory_info().free)
    with handle as arr:
        kv("ipc_child_free_after", ctx.get_memory_info().free)
        same = np.array_equal(arr.copy_to_host(), pattern(np, n))
        kv("ipc_child_data", "exact" if same else "differs")
        arr[:16].copy_to_device(np.full(16, 0x5A, dtype=np.uint8))


def hold(cuda, np, driver, n):
    x = device_array(cuda, np, driver, n)
    kv("holding", n)
    time.sleep(120)
    del x


def run():
    mode = sys.argv[1] if len(sys.argv) > 1 else "all"
    cuda, np, driver = numba()
    if mode == "share-child":
        return share_child(cuda, np, driver)
    if mode == "ipc-child":
        return ipc_child(cuda, np, driver)
    if mode == "hold":
        return hold(cuda, np, driver, int(sys.argv[2]))
    check(mode == "all", "unknown mode %r (all, hold N)", mode)
    uuid, limit = fraction()
    try:
        shows_fraction(cuda, uuid, limit)
        binds_everything(driver)
        round_trip(cuda, np, driver)
        retry_after_flush(cuda, np, driver)
        out_of_memory(cuda, np, driver, limit)
        share(cuda, np, driver, limit)
        ipc(cuda, np, driver, limit)
    except driver.CudaAPIError as e:
        # a 13.0 driver's cuCtxGetDevice_v2 takes a context this numba does not pass
        check("cuCtxGetDevice" not in str(e), "%s: this numba's ctypes binding predates CUDA "
              "13.0 (it calls cuCtxGetDevice_v2 without its context); use a 12.x driver or a "
              "numba that knows 13.0", e)
        raise

if __name__ == "__main__":
    main(run)
