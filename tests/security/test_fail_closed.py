# SPDX-License-Identifier: Apache-2.0
"""Fail closed where a tenant or a local user speaks first, against the real
gpufracd over gpusim. Each test is an attack: what the attacker sends, what
the agent refuses, and what must stay alive (AttackBase's canaries: a root
process holding GPU memory, another fraction's init, the agent itself)."""
import os
import re
import subprocess
import sys
import time
import unittest

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_attacks import NOBODY, AttackBase  # noqa: E402
from harness import Gi, Mi  # noqa: E402

# As uid A: a child connects to users.sock and exits at once, so the
# connection outlives the process the kernel recorded for it; the parent
# keeps the socket, says the dead child's pid, and sends what it reads from
# stdin once the test has put another process at that pid.
ORPHAN_CONNECTION = r"""
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.settimeout(20)
pid = os.fork()
if pid == 0:
    s.connect(sys.argv[1])
    os._exit(0)
os.waitpid(pid, 0)
print(pid, flush=True)
payload = sys.stdin.readline().strip()
try:
    s.send(payload.encode())
    print(s.recv(8192).decode().replace("\n", " "), flush=True)
except OSError as e:
    print("closed", e.errno, flush=True)
"""

# Connects and sends `run`, then stays (the supervisor) until stdin closes.
HOLD_RUN = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.settimeout(20)
s.connect(sys.argv[1])
s.send(sys.argv[2].encode())
print(s.recv(8192).decode().replace("\n", " "), flush=True)
sys.stdin.read()
"""


# Connects, sends `run`, then starts argv[3:] (outside the shim) as its
# child and says its pid; stays until killed.
RUN_AND_SPAWN = r"""
import socket, subprocess, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.settimeout(20)
s.connect(sys.argv[1])
s.send(sys.argv[2].encode())
print(s.recv(8192).decode().replace("\n", " "), flush=True)
child = subprocess.Popen(sys.argv[3:], stdout=subprocess.DEVNULL)
print(child.pid, flush=True)
sys.stdin.read()
"""


def spawn_at_pid(pid, argv, **kw):
    """Starts argv as the process numbered pid (root: ns_last_pid), so a
    pid reuse that would take an attacker minutes of forking is exact."""
    for _ in range(50):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        p = subprocess.Popen(argv, **kw)
        if p.pid == pid:
            return p
        p.kill()
        p.wait()
    raise unittest.SkipTest("could not reuse pid %d (other processes took it)" % pid)


class FailClosedBase(AttackBase):
    def run_payload(self, name, request=Mi, limit=Mi, devices=None):
        return ("gpufrac/1 run name=%s mode=time-slicing compute=100 devices=%s" %
                (name, devices or "%s/%d/%d" % (self.uuid, request, limit)))

    def hold_run(self, uid, payload):
        """A user's process that asks for `payload` and stays its supervisor."""
        p = subprocess.Popen([sys.executable, "-c", HOLD_RUN, self.users_sock(), payload],
                             user=uid, group=uid, extra_groups=[], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p, p.stdout.readline().strip()

    def fractions(self):
        return sorted(os.listdir(os.path.join(self.state, "fractions")))

    def open_gpusim_state(self):
        for n in os.listdir(self.tmp):
            if n.startswith("gpusim.state"):
                os.chmod(os.path.join(self.tmp, n), 0o666)
        os.chmod(self.tmp, 0o755)


class PeerIdentityTest(FailClosedBase):
    def test_a_reused_pid_is_never_attached_through_users_sock(self):
        attacker = subprocess.Popen([sys.executable, "-c", ORPHAN_CONNECTION, self.users_sock()],
                                    user=NOBODY, group=NOBODY, extra_groups=[],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs.append(attacker)
        dead = int(attacker.stdout.readline())
        # another user's GPU job now holds the dead child's number
        victim = spawn_at_pid(dead, [self.PROBE, "alloc", "256Mi", "hold", "600"],
                              env=self.env, stdout=subprocess.PIPE, text=True)
        self.procs.append(victim)
        self.wait_for(lambda: victim.stdout.readline().startswith("holding="), "the victim")
        attacker.stdin.write(self.run_payload("evil") + "\n")
        attacker.stdin.flush()
        reply = attacker.stdout.readline()
        # refused with why, or (when the child was gone before the agent
        # accepted) the connection closed: either way nobody is attached
        self.assertTrue("the process that opened this connection has exited" in reply or
                        reply.startswith("closed"), reply)
        self.assertNotIn("evil", self.fractions())
        time.sleep(1.0)  # ten watchdog periods: a wrongly attached victim would be gone
        self.assertIsNone(victim.poll(), "the victim, at a reused pid, was killed")
        self.assertNotIn("admitted fraction evil", self.events())
        self.assert_node_unharmed()

    def test_a_process_of_one_fraction_is_never_made_anothers_supervisor(self):
        _, out, _ = self.tenant("k8s.nested", 'say(ask(%r, sock=%r))' % (
            self.run_payload("nested"), self.users_sock()))
        self.assertIn("already in fraction k8s.nested", " ".join(out))
        self.assertNotIn("nested", self.fractions())
        self.assert_node_unharmed()


class OrphanTest(FailClosedBase):
    def test_killing_its_own_run_does_not_take_a_process_out_of_its_fraction(self):
        # the run's child holds a little, then (its supervisor killed by its
        # own user, so init is its parent) bypasses the shim past the limit
        self.open_gpusim_state()
        go = os.path.join(self.tmp, "go")
        sup = subprocess.Popen([sys.executable, "-c", RUN_AND_SPAWN, self.users_sock(),
                                self.run_payload("orphan", 64 * Mi, 64 * Mi), self.PROBE,
                                "alloc", "16Mi", "barrier", go, "alloc", "1Gi", "hold", "600"],
                               user=NOBODY, group=NOBODY, extra_groups=[], env=self.env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs.append(sup)
        self.assertIn("gpufrac/1 ok", sup.stdout.readline())
        child = int(sup.stdout.readline())
        time.sleep(1.0)  # ten watchdog periods: the agent has seen the child on the GPU
        sup.kill()
        sup.wait()
        open(go, "w").close()
        self.wait_watchdog_kill("orphan")
        self.assertRegex(self.events(), r"watchdog: killed pid %d of fraction orphan:" % child)
        self.assertNotIn("ending it", self.events().split("watchdog: killed")[0],
                         "the fraction was ended while its process ran")
        self.assert_node_unharmed()


class StateLeftBehindTest(FailClosedBase):
    def test_refused_runs_leave_nothing(self):
        before = self.fractions()
        dup = "%s/%d/%d,%s/%d/%d" % (self.uuid, Mi, Mi, self.uuid, Mi, Mi)
        replies = self.ask_as(NOBODY, *[self.run_payload("dup%d" % i, devices=dup)
                                        for i in range(50)])
        self.assertEqual(len(replies), 50)
        for r in replies:
            self.assertIn("named more than once", r)
        self.assertEqual(self.fractions(), before)
        self.assertEqual(self.events().count("dup"), 0, "a refusal was logged as a fraction")
        self.assert_node_unharmed()

    def test_every_user_is_bounded_without_a_policy_file(self):
        held = []
        for i in range(33):
            p, reply = self.hold_run(NOBODY, self.run_payload("mine%d" % i))
            held.append(p)
            if i < 32:
                self.assertIn("gpufrac/1 ok", reply)
        self.assertIn("built-in bound of 32 fractions", reply)
        self.assertIn("max-fractions", reply)
        self.assertEqual(len([n for n in self.fractions() if n.startswith("mine")]), 32)
        # root is never bounded by it: the runtime still admits
        self.admit("k8s.after", Mi, Mi)
        self.assert_node_unharmed()

    def test_a_ledger_cannot_be_grown(self):
        _, out, f = self.tenant("k8s.grow", 'os.truncate(LEDGER, 200 << 20); say("grown")')
        self.assertIn("grown", out)
        self.wait_for(lambda: os.stat(f["ledger"]).st_size < 4 << 20, "the ledger cut back")
        self.assertRegex(self.events(), r"fraction k8s\.grow: its ledger was grown to 209715200 "
                         r"bytes; cut back")
        self.assert_node_unharmed()


class OtherGpuTest(FailClosedBase):
    devices = "4Gi,4Gi"

    def test_a_gpu_the_fraction_was_not_given_is_judged(self):
        # the fraction is on GPU 0; its process drops the shim and uses GPU 1
        p, out, _ = self.tenant("k8s.gpu0", 'say(probe("--device", "1", "alloc", "1Gi", "hold", '
                                '"600", shim=False, background=True))', request=256 * Mi,
                                limit=256 * Mi)
        self.assertIn("holding=", " ".join(out))
        self.wait_watchdog_kill("k8s.gpu0")
        self.assertRegex(self.events(), r"watchdog: killed pid \d+ of fraction k8s\.gpu0: "
                         r"driver reports \d+ bytes on GPU-[0-9a-f-]+, bound 0 \(a GPU the "
                         r"fraction was not given")
        self.assert_node_unharmed()


class OtherUsersTest(FailClosedBase):
    def test_root_run_never_removes_a_live_users_fraction(self):
        # a client that does not lock `supervisor`, as a raw users.sock client
        p, reply = self.hold_run(NOBODY, self.run_payload("unlocked"))
        self.assertIn("gpufrac/1 ok", reply)
        r = self.run_fg("--name", "rootjob", "--memory", "64Mi", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("unlocked", self.fractions(), "root's gpufrac run removed it")
        self.assert_node_unharmed()

    def test_another_users_fraction_files_are_unreadable(self):
        p, reply = self.hold_run(65533, self.run_payload("private"))
        self.assertIn("gpufrac/1 ok", reply)
        d = os.path.join(self.state, "fractions", "private")
        for name in ("config", "supervisor", "ledger"):
            r = subprocess.run(["cat", os.path.join(d, name)], user=NOBODY, group=NOBODY,
                               extra_groups=[], capture_output=True)
            self.assertNotEqual(r.returncode, 0, "uid 65534 read %s of uid 65533" % name)
        # its owner still reads its config (the shim of its processes does)
        r = subprocess.run(["cat", os.path.join(d, "config")], user=65533, group=65533,
                           extra_groups=[], capture_output=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_node_unharmed()


if __name__ == "__main__":
    if os.getuid() != 0:
        print("security tests: need root to act as other users; skipped")
        sys.exit(77)
    cases.main(verbosity=2)
