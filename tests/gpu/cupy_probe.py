# SPDX-License-Identifier: Apache-2.0
"""CuPy inside a fraction: memGetInfo total = limit, filling past it raises
cupy.cuda.memory.OutOfMemoryError."""
from gpuprobe import check, fill, fraction, kv, main, need


def run():
    _uuid, limit = fraction()
    cupy = need("cupy")
    free, total = cupy.cuda.runtime.memGetInfo()
    kv("limit_bytes", limit)
    kv("mem_get_info_total", total)
    kv("mem_get_info_free", free)
    check(total == limit, "cupy memGetInfo total %d != limit %d", total, limit)
    check(free <= total, "free %d > total %d", free, total)
    held, _reached = fill(lambda n: cupy.empty((n,), dtype=cupy.uint8), limit,
                                (cupy.cuda.memory.OutOfMemoryError,))
    del held
    cupy.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main(run)
