# SPDX-License-Identifier: Apache-2.0
"""numba (numba-cuda) inside a fraction: the context's memory info total =
limit, and filling past it raises CudaAPIError with CUDA_ERROR_OUT_OF_MEMORY
(numba retries once after flushing its deferred frees, then raises)."""
from gpuprobe import check, fill, fraction, kv, main, need


class NumbaOOM(Exception):
    pass


def run():
    _uuid, limit = fraction()
    cuda = need("numba.cuda")
    np = need("numpy")
    driver = need("numba.cuda.cudadrv.driver")
    check(cuda.is_available(), "numba.cuda.is_available() is False inside the fraction")
    free, total = cuda.current_context().get_memory_info()
    kv("limit_bytes", limit)
    kv("mem_get_info_total", total)
    kv("mem_get_info_free", free)
    check(total == limit, "numba get_memory_info total %d != limit %d", total, limit)
    check(free <= total, "free %d > total %d", free, total)

    def alloc(n):
        try:
            return cuda.device_array(n, dtype=np.uint8)
        except driver.CudaAPIError as e:
            code = getattr(e, "code", None)
            if "OUT_OF_MEMORY" in str(e) or (code is not None and int(code) == 2):
                raise NumbaOOM(str(e))
            raise

    held, _reached = fill(alloc, limit, (NumbaOOM,))
    del held


if __name__ == "__main__":
    main(run)
