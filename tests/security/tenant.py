# SPDX-License-Identifier: Apache-2.0
"""What a hostile tenant runs (as uid 65534, possibly inside its own user +
PID namespace): the first process is the fraction's init, which the test
attaches; it waits for "go", then runs the attack given as Python code with
these helpers, prints "done" and stays until its stdin closes (so that what
it started stays in the fraction)."""
import os
import socket
import subprocess
import sys
import threading  # noqa: F401 (for the attack bodies)
import time  # noqa: F401

SOCK, LEDGER, CONFIG, FORGE, PROBE, SHIM = sys.argv[1:7]
BODY = sys.argv[7]
kept = []


def say(*a):
    print(*a, flush=True)


def ask(payload, sock=SOCK):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(20)
    s.connect(sock)
    s.send(payload.encode())
    try:
        return s.recv(8192).decode()
    finally:
        s.close()


def forge(*args, background=False):
    p = subprocess.Popen([FORGE, LEDGER] + [str(a) for a in args], stdout=subprocess.PIPE,
                         text=True)
    line = p.stdout.readline().strip()
    if background:
        kept.append(p)
    else:
        p.wait()
    return line


def probe(*steps, shim=True, background=False):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if shim:
        env.update(LD_PRELOAD=SHIM, GPUFRAC_CONFIG=CONFIG)
    p = subprocess.Popen([PROBE] + [str(s) for s in steps], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    if not background:
        out = p.communicate()[0]
        return out
    out = []
    for line in p.stdout:
        out.append(line)
        if line.startswith("holding=") or "=CUDA_ERROR" in line:
            break
    kept.append(p)
    return "".join(out)


sys.stdin.readline()  # "go": the test has attached us
try:
    exec(BODY)
finally:
    say("done")
sys.stdin.read()
for p in kept:
    p.kill()
