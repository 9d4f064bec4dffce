# SPDX-License-Identifier: Apache-2.0
"""JAX inside a fraction, with XLA_PYTHON_CLIENT_PREALLOCATE as given (false
when unset; the suite runs it both ways): the device's bytes_limit is within the
limit, and an allocation past the limit fails as out of memory."""
import os

from gpuprobe import MiB, check, fraction, kv, main, need

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def oom_like(e):
    s = str(e)
    return "RESOURCE_EXHAUSTED" in s or "out of memory" in s.lower() or "OOM" in s


def run():
    _uuid, limit = fraction()
    jax = need("jax")
    jnp = need("jax.numpy")
    kv("preallocate", os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"])
    dev = jax.devices()[0]
    kv("limit_bytes", limit)
    kv("platform", dev.platform)
    check(dev.platform == "gpu", "jax.devices()[0] is %s, not a GPU", dev.platform)
    stats = dev.memory_stats() or {}
    bl = stats.get("bytes_limit", 0)
    kv("bytes_limit", bl)
    check(0 < bl <= limit, "memory_stats() bytes_limit %d is not within the limit %d", bl, limit)
    small = jnp.ones((64 * MiB,), dtype=jnp.uint8).block_until_ready()
    kv("small_alloc", int(small.size))
    err = None
    try:
        jnp.ones((limit + 512 * MiB,), dtype=jnp.uint8).block_until_ready()
    except Exception as e:  # noqa: BLE001 - XlaRuntimeError's module moves between versions
        err = e
    check(err is not None, "an array of %d bytes (past the limit %d) was allocated",
          limit + 512 * MiB, limit)
    kv("past_limit_error", type(err).__name__)
    check(oom_like(err), "allocation past the limit failed, but not as out of memory: %s",
          str(err).splitlines()[0] if str(err) else type(err).__name__)
    del small


if __name__ == "__main__":
    main(run)
