# SPDX-License-Identifier: Apache-2.0
"""Shared helpers for the GPU probes (tests/gpu/*_probe.py).

Every probe prints one `key=value` per line on stdout, and on failure an
`error=...` line plus a message on stderr, then exits 1; a probe that cannot
run here (its framework missing, or a dry run on gpusim, GPU_SUITE_SIM=1)
prints `SKIP: <what was missing>` last and exits 77. The probes run
inside a fraction (`gpufrac run ... -- python probe.py`): the fraction's
limit comes from the config the shim reads (GPUFRAC_CONFIG, or the
runtime's read-only /etc/gpufrac/fraction.conf)."""
import importlib
import os
import sys

MiB = 1 << 20
GiB = 1 << 30
TRUSTED_CONFIG = "/etc/gpufrac/fraction.conf"


SKIP = 77


class ProbeFailure(Exception):
    pass


class ProbeSkip(Exception):
    pass


def simulated():
    """A dry run of the suite on gpusim: no real framework can drive it."""
    return os.environ.get("GPU_SUITE_SIM") == "1"


def need(module):
    """Imports MODULE (a framework) or skips the probe, naming why."""
    if simulated():
        raise ProbeSkip("%s needs a real driver (dry run on gpusim)" % module)
    try:
        return importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - any import failure is a skip, named
        first = str(e).splitlines()[0] if str(e) else ""
        raise ProbeSkip("%s not importable: %s: %s" % (module, type(e).__name__, first))


def kv(key, value):
    print("%s=%s" % (key, value), flush=True)


def check(cond, fmt, *args):
    if not cond:
        raise ProbeFailure(fmt % args if args else fmt)


def fraction():
    """(uuid, limit bytes) of the fraction's first device."""
    path = TRUSTED_CONFIG if os.path.exists(TRUSTED_CONFIG) else os.environ.get("GPUFRAC_CONFIG")
    check(path, "not inside a gpufrac fraction: GPUFRAC_CONFIG is not set")
    check("libgpufrac" in os.environ.get("LD_PRELOAD", "") or path == TRUSTED_CONFIG,
          "libgpufrac.so is not in LD_PRELOAD (%r)", os.environ.get("LD_PRELOAD", ""))
    with open(path) as f:
        for line in f:
            if line.startswith("device="):
                uuid, _request, limit = line.strip()[len("device="):].split(",")
                return uuid, int(limit)
    raise ProbeFailure("%s has no device= line" % path)


def fill(alloc, limit, oom_types, chunk=None, least=0.9):
    """Allocates chunks with alloc(nbytes) until one raises an out-of-memory
    error. Returns (held objects, bytes reached), which must be at least LEAST
    of the limit. Stops after a bound well past
    the limit, so a shim that enforces nothing cannot run the GPU dry. (The
    exception itself is not kept: its traceback would keep the chunks alive.)"""
    chunk = chunk or max(MiB, (limit // 64) // MiB * MiB)
    held, reached, oom = [], 0, None
    for _ in range(limit // chunk + 8):
        try:
            held.append(alloc(chunk))
            reached += chunk
        except oom_types as e:  # the expected refusal
            oom = type(e).__module__ + "." + type(e).__name__
            break
        except Exception as e:  # noqa: BLE001 - reported as the wrong kind of failure
            raise ProbeFailure("allocation failed with %s (%s), not an out-of-memory error"
                               % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
    kv("chunk_bytes", chunk)
    kv("reached_bytes", reached)
    kv("reached_fraction", "%.3f" % (reached / limit))
    check(oom is not None, "allocated %d bytes in %d-byte chunks, past the limit %d, without an "
          "out-of-memory error", reached, chunk, limit)
    check(reached <= limit, "reached %d bytes, more than the limit %d", reached, limit)
    check(reached >= least * limit, "reached only %d of %d bytes (%.1f%%, want >= %d%%)",
          reached, limit, 100.0 * reached / limit, round(100 * least))
    kv("oom_type", oom)
    return held, reached


def main(run):
    """Runs run() and turns a ProbeFailure into error= + exit 1, a ProbeSkip
    into SKIP: + exit 77."""
    try:
        run()
    except ProbeSkip as e:
        print("SKIP: %s" % e, flush=True)
        sys.exit(SKIP)
    except ProbeFailure as e:
        kv("error", str(e).replace("\n", " "))
        print("FAIL: %s" % e, file=sys.stderr, flush=True)
        sys.exit(1)
    kv("result", "pass")
