# SPDX-License-Identifier: Apache-2.0
"""A tenant that calls the CUDA driver through ctypes from inside a fraction
(as numba does), to attack what copies, host memory, pointer queries and IPC
handles take. Prints key=value lines; exits 0 unless the driver misbehaved.

  driver_tenant.py export BYTES HANDLE_FILE RELEASE_FILE
      allocates BYTES, fills them, writes an IPC handle (hex) to HANDLE_FILE,
      waits for RELEASE_FILE, then checks its bytes are intact
  driver_tenant.py attack HANDLE_FILE FIFO_PID FIFO_FD FIFO_INO
      opens the other fraction's handle, sends forged handles (one naming a
      FIFO another process holds), bogus pointers, huge host registrations"""
import ctypes
import os
import sys
import time

SUCCESS, INVALID_VALUE, OOM, INVALID_CONTEXT, NOT_FOUND = 0, 1, 2, 201, 500
ALREADY_REGISTERED, NOT_REGISTERED = 712, 713

cu = ctypes.CDLL("libcuda.so.1")
u64 = ctypes.c_uint64


class Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


def call(name, *args):
    return getattr(cu, name)(*args)


def must(name, *args):
    rc = call(name, *args)
    if rc != SUCCESS:
        print("error=%s returned %d" % (name, rc))
        sys.exit(1)


def expect(what, rc, *allowed):
    ok = rc in allowed
    print("%s=%s" % (what, "refused" if ok else "rc %d" % rc), flush=True)
    return ok


def init():
    ctx = ctypes.c_void_p()
    must("cuInit", 0)
    must("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), 0)
    must("cuCtxSetCurrent", ctx)


def used():
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    must("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
    return total.value - free.value


def export(nbytes, handle_file, release_file):
    init()
    d = u64()
    must("cuMemAlloc_v2", ctypes.byref(d), ctypes.c_size_t(nbytes))
    pattern = bytes(range(256)) * 16
    must("cuMemcpyHtoD_v2", d, pattern, ctypes.c_size_t(len(pattern)))
    h = Handle()
    must("cuIpcGetMemHandle", ctypes.byref(h), d)
    with open(handle_file + ".tmp", "w") as f:
        f.write(ctypes.string_at(ctypes.addressof(h), 64).hex())
    os.rename(handle_file + ".tmp", handle_file)
    print("exported=%d" % nbytes, flush=True)
    while not os.path.exists(release_file):
        time.sleep(0.05)
    back = ctypes.create_string_buffer(len(pattern))
    must("cuMemcpyDtoH_v2", back, d, ctypes.c_size_t(len(pattern)))
    print("exporter_bytes=%s" % ("intact" if back.raw == pattern else "changed"))
    print("exporter_used=%d" % used())


def forged(raw, pid=None, fd=None, ino=None):
    b = bytearray(raw)
    for off, v, n in ((8, pid, 4), (12, fd, 4), (16, ino, 8)):
        if v is not None:
            b[off:off + n] = int(v).to_bytes(n, "little")
    return Handle.from_buffer_copy(bytes(b))


def attack_ipc(raw, fifo_pid, fifo_fd, fifo_ino):
    d = u64()
    refused = True
    # the other fraction's own handle: opens (the driver allows it between
    # processes of one user) and charges this fraction nothing
    before = used()
    rc = call("cuIpcOpenMemHandle_v2", ctypes.byref(d), Handle.from_buffer_copy(raw), 1)
    print("other_fraction_open=%s" % ("ok" if rc == SUCCESS else "rc %d" % rc))
    print("charged_by_open=%d" % (used() - before))
    if rc == SUCCESS:
        must("cuIpcCloseMemHandle", d)
    # every byte of it changed: refused
    for i in range(8, 56):
        b = bytearray(raw)
        b[i] ^= 0x5A
        rc = call("cuIpcOpenMemHandle_v2", ctypes.byref(d), Handle.from_buffer_copy(bytes(b)), 1)
        refused = refused and rc == INVALID_VALUE
    print("forged_bytes=%s" % ("refused" if refused else "opened"), flush=True)
    # a handle naming a FIFO another process holds: refused without opening it
    refused = expect("fifo_handle", call("cuIpcOpenMemHandle_v2", ctypes.byref(d),
                                         forged(raw, fifo_pid, fifo_fd, fifo_ino), 1),
                     INVALID_VALUE)
    refused &= expect("random_handle", call("cuIpcOpenMemHandle_v2", ctypes.byref(d),
                                            Handle.from_buffer_copy(os.urandom(64)), 1),
                      INVALID_VALUE)
    refused &= expect("own_pid_handle", call("cuIpcOpenMemHandle_v2", ctypes.byref(d),
                                             forged(raw, os.getpid()), 1),
                      INVALID_VALUE, INVALID_CONTEXT)
    refused &= expect("close_bogus", call("cuIpcCloseMemHandle", u64(0xdeadbeef000)),
                      INVALID_VALUE)
    return refused


def attack_pointers(other_ptr):
    data = ctypes.create_string_buffer(64)
    ok = True
    base, size = u64(), ctypes.c_size_t()
    for p in (0, 1, 0xFFFFFFFFFFFFFFFF, other_ptr, id(data)):
        ok &= call("cuPointerGetAttribute", data, 2, u64(p)) == INVALID_VALUE
        ok &= call("cuMemGetAddressRange_v2", ctypes.byref(base), ctypes.byref(size),
                   u64(p)) == NOT_FOUND
        ok &= call("cuMemcpyDtoH_v2", data, u64(p), ctypes.c_size_t(8)) == INVALID_VALUE
        ok &= call("cuMemsetD8_v2", u64(p), 0, ctypes.c_size_t(8)) == INVALID_VALUE
    print("bogus_pointers=%s" % ("refused" if ok else "accepted"), flush=True)
    return ok


def attack_host_memory():
    buf = ctypes.create_string_buffer(1 << 16)
    addr = ctypes.addressof(buf)
    ok = True
    for p, n in ((addr, 1 << 62), (addr, (1 << 64) - 1), (0x1000, 4096), (addr, 1 << 40)):
        rc = call("cuMemHostRegister_v2", ctypes.c_void_p(p), ctypes.c_size_t(n), 0)
        ok &= expect("register_%#x_%#x" % (p - addr if p >= addr else p, n), rc, INVALID_VALUE)
    must("cuMemHostRegister_v2", buf, ctypes.c_size_t(1 << 16), 0)
    ok &= call("cuMemHostRegister_v2", ctypes.c_void_p(addr + 4096), ctypes.c_size_t(16), 0) == \
        ALREADY_REGISTERED
    must("cuMemHostUnregister", buf)
    ok &= call("cuMemHostUnregister", buf) == NOT_REGISTERED
    hp = ctypes.c_void_p()
    rc = call("cuMemHostAlloc", ctypes.byref(hp), ctypes.c_size_t(1 << 62), 0)
    ok &= rc in (INVALID_VALUE, OOM)
    ok &= call("cuMemFreeHost", ctypes.c_void_p(addr)) == INVALID_VALUE
    print("host_memory=%s" % ("refused" if ok else "accepted"), flush=True)
    return ok


def attack(handle_file, fifo_pid, fifo_fd, fifo_ino):
    init()
    raw = bytes.fromhex(open(handle_file).read())
    before = used()
    ok = attack_ipc(raw, fifo_pid, fifo_fd, fifo_ino)
    ok &= attack_pointers(0x200000000000)
    ok &= attack_host_memory()
    print("attacker_used_before=%d" % before)
    print("attacker_used_after=%d" % used())
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    cu.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, u64]
    if sys.argv[1] == "export":
        export(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        attack(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
