# SPDX-License-Identifier: Apache-2.0
"""The node agent against a hostile tenant. Every
attack runs as uid 65534 in a fraction given to it (admitted on root's
socket as the container runtime does, its init attached), some inside a
user + PID namespace, against the real gpufracd over gpusim. After each:
the canaries (a root process holding GPU memory, another fraction's init)
live, the agent answers and is healthy, no root file changed."""
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import urllib.request
import unittest

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "agent"))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import BUILD, Gi, Mi, StagedBuild, kv  # noqa: E402, F401
from test_agent import AgentTestCase  # noqa: E402

TENANT = os.path.join(HERE, "tenant.py")
NOBODY = 65534
# what the tenant runs, staged where uid 65534 can reach it wherever the
# checkout is (its binaries are found by the same names in the build)
STAGED = ("bin/gpufrac", "lib/libgpufrac.so", "lib/gpusim", "tests/shimprobe",
          "tests/ledger_forge")


def userns_works():
    r = subprocess.run(["unshare", "--user", "--pid", "--fork", "--map-root-user", "true"],
                       user=NOBODY, capture_output=True)
    return r.returncode == 0


class AttackBase(AgentTestCase):
    devices = "4Gi"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.stage = StagedBuild(STAGED, [TENANT])
        cls.gpusim_dir = cls.stage.path("lib/gpusim")
        cls.PROBE = cls.stage.path("tests/shimprobe")
        cls.FORGE = cls.stage.path("tests/ledger_forge")
        cls.SHIM = cls.stage.path("lib/libgpufrac.so")
        cls.GPUFRAC = cls.stage.path("bin/gpufrac")
        cls.TENANT = cls.stage.src(TENANT)

    @classmethod
    def tearDownClass(cls):
        cls.stage.remove()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        for d in (self.tmp, self.state, os.path.join(self.state, "fractions")):
            os.chmod(d, 0o755)
        os.chmod(self.env["GPUSIM_STATE"], 0o666)
        self.uuid = kv(subprocess.run([self.PROBE, "uuid"], env=self.env, capture_output=True,
                                      text=True).stdout)["uuid"]
        # canaries: a root job on the GPU and another fraction's init
        self.root_canary = subprocess.Popen([self.PROBE, "alloc", "64Mi", "hold", "600"],
                                            env=self.env, stdout=subprocess.PIPE, text=True)
        self.procs.append(self.root_canary)
        self.wait_for(lambda: self.root_canary.stdout.readline().startswith("holding="),
                      "the root canary")
        self.admit("k8s.other", 256 * Mi, 256 * Mi, uid=65533)
        self.other = subprocess.Popen(["sleep", "600"], user=65533)
        self.procs.append(self.other)
        self.attach("k8s.other", self.other.pid)
        self.root_file = os.path.join(self.tmp, "root-owned")
        with open(self.root_file, "w") as f:
            f.write("root's\n")
        os.chmod(self.root_file, 0o600)
        self.tenants = []

    def tearDown(self):
        for t in self.tenants:
            if t.poll() is None:
                t.stdin.close()
                t.kill()
                t.wait()
        super().tearDown()

    # -- the node's side --------------------------------------------------
    def admit(self, name, request, limit, uid=NOBODY, termlog=None):
        reply = self.ask(("gpufrac/1 admit name=%s ns=t pod=%s container=c uid=%d "
                          "devices=%s/%d/%d" % (name, name, uid, self.uuid, request, limit) +
                          (" termlog=%s" % termlog if termlog else "")).encode())
        self.assertTrue(reply.startswith("gpufrac/1 ok"), reply)
        return dict(x.split("=", 1) for x in reply.split()[2:])

    def attach(self, name, pid):
        reply = self.ask(b"gpufrac/1 attach name=%s pid=%d" % (name.encode(), pid))
        self.assertTrue(reply.startswith("gpufrac/1 ok"), reply)

    def start_tenant(self, name, body, request=512 * Mi, limit=512 * Mi, ns=False,
                     termlog=None):
        """Admits fraction `name` for uid 65534, starts its init as the
        tenant running `body` (tenant.py), attaches it and lets it go."""
        f = self.admit(name, request, limit, termlog=termlog)
        cmd = [sys.executable, self.TENANT, f["socket"], f["ledger"], f["config"], self.FORGE,
               self.PROBE, self.SHIM, body]
        if ns:
            cmd = ["unshare", "--user", "--pid", "--fork", "--map-root-user"] + cmd
        env = dict(self.env, PYTHONDONTWRITEBYTECODE="1")
        p = subprocess.Popen(cmd, user=NOBODY, group=NOBODY, env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.tenants.append(p)
        self.attach(name, p.pid)
        p.stdin.write("go\n")
        p.stdin.flush()
        self.last_fraction = f
        return p, []

    def read_tenant(self, p, out):
        """The tenant's output lines up to "done"."""
        for line in p.stdout:
            out.append(line.rstrip("\n"))
            if line.strip() == "done":
                break
        return out

    def tenant(self, name, body, request=512 * Mi, limit=512 * Mi, ns=False, termlog=None):
        p, out = self.start_tenant(name, body, request, limit, ns, termlog)
        return p, self.read_tenant(p, out), self.last_fraction

    def healthz(self):
        url = "http://127.0.0.1:%s/healthz" % self.metrics_port()
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def assert_node_unharmed(self):
        self.assertIsNone(self.root_canary.poll(), "the root canary was killed")
        self.assertIsNone(self.other.poll(), "another fraction's process was killed")
        self.assertIsNone(self.agent.poll(), "the agent died")
        self.assertTrue(self.ask(b"gpufrac/1 ping").startswith("gpufrac/1 ok"))
        self.wait_for(lambda: self.healthz() == 200, "a healthy agent")
        st = os.stat(self.root_file)
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (0, 0o600))
        with open(self.root_file) as f:
            self.assertEqual(f.read(), "root's\n")

    def wait_watchdog_kill(self, fraction):
        self.wait_for(lambda: re.search(r"watchdog: killed pid \d+ of fraction %s:" %
                                        re.escape(fraction), self.events()),
                      "the watchdog to kill the bypasser of " + fraction)

    def users_sock(self):
        return os.path.join(self.state, "users.sock")

    def ask_as(self, uid, *payloads, sock=None):
        """Each payload on one connection to users.sock (or sock), as uid."""
        r = subprocess.run([sys.executable, "-c", ASK_USERS, sock or self.users_sock(),
                            *payloads], user=uid, group=uid, extra_groups=[],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.splitlines()


class AttackTest(AttackBase):
    # -- the attacks ------------------------------------------------------
    def test_terminal_controls_in_a_process_name_never_reach_roots_terminal(self):
        # the tenant names its CUDA process with controls: clear the screen, retitle the terminal
        p, out, f = self.tenant("k8s.esc", (
            "import tempfile\n"
            "exe = os.path.join(tempfile.mkdtemp(), '\\x1b[2J\\x1b]0;pwn\\x07')\n"
            "os.symlink(PROBE, exe)\n"
            "q = subprocess.Popen([exe, 'alloc', '16Mi', 'hold', '600'], stdout=subprocess.PIPE,\n"
            "                     env=dict(os.environ, LD_PRELOAD=SHIM, GPUFRAC_CONFIG=CONFIG))\n"
            "while not q.stdout.readline().startswith(b'holding='):\n"
            "    pass\n"
            "kept.append(q)\n"
            "say('named', q.pid)\n"))
        pid = int([ln for ln in out if ln.startswith("named ")][0].split()[1])
        env = dict(self.env, GPUFRAC_STATE_DIR=self.state)
        for args in (["status"], ["status", "--brief"], ["top", "--iterations", "1"]):
            with self.subTest(args=args):
                r = subprocess.run([self.GPUFRAC, *args], env=env, capture_output=True,
                                   timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                shown = [ln for ln in r.stdout.splitlines() if b"pid %d " % pid in ln]
                self.assertEqual(len(shown), 1, r.stdout)
                self.assertIn(b"?[2J?]0;pwn?", shown[0])
                self.assertEqual([c for c in r.stdout if c < 0x20 and c != 0x0a], [],
                                 "a control byte reached the terminal")
        r = subprocess.run([self.GPUFRAC, "status", "--json"], env=env, capture_output=True,
                           text=True, timeout=60, check=True)
        self.assertEqual([c for c in r.stdout if ord(c) < 0x20 and c not in "\n"], [])
        names = [q["name"] for fr in json.loads(r.stdout)["fractions"]
                 for d in fr["devices"] for q in d["processes"] if q["pid"] == pid]
        self.assertEqual(names, ["\x1b[2J\x1b]0;pwn\x07"])  # escaped by the JSON, kept
        self.assert_node_unharmed()

    def test_kill_anything_forged_borrower_slot(self):
        body = ("say('forge', forge('slot', %d, 1 << 60, 1 << 30, 60, background=True))\n"
                "say('forge-1', forge('slot', -1, (1 << 60) + 1, 1 << 30, 60, background=True))\n"
                "say('reply', ask('gpufrac/1 reclaim dev=%s bytes=1073741824'))\n"
                % (self.root_canary.pid, self.uuid))
        _, out, _ = self.tenant("k8s.t1", body)
        self.assertIn("forge forged", out)
        reply = [ln for ln in out if ln.startswith("reply")][0]
        self.assertRegex(reply, "nothing on loan|ok evicted=0")
        self.assertNotIn(str(self.root_canary.pid), reply)
        self.assert_node_unharmed()

    def test_misattribute_and_forged_supervisor_file(self):
        # a root job with GPU memory written into the tenant's live slot, and
        # (as a tenant can where it owns the fraction's directory) its pid in
        # the fraction's supervisor file; the tenant's own bypasser, started
        # after both, shows a watchdog pass saw them
        sup_file = os.path.join(self.state, "fractions", "k8s.t2", "supervisor")
        body = ("say('forge', forge('slot', %d, 1, 0, 60, background=True))\n"
                "while not os.path.exists(%r): time.sleep(0.02)\n"
                "say(probe('alloc', '1Gi', 'hold', '60', shim=False, background=True))\n"
                % (self.root_canary.pid, sup_file + ".forged"))
        p, out = self.start_tenant("k8s.t2", body, 256 * Mi, 256 * Mi)
        with open(sup_file, "w") as f:
            f.write("%d\n" % self.root_canary.pid)
        open(sup_file + ".forged", "w").close()
        self.read_tenant(p, out)
        self.assertIn("forge forged", out)
        self.wait_watchdog_kill("k8s.t2")
        self.assertNotIn("pid %d " % self.root_canary.pid, self.events())
        self.assert_node_unharmed()

    def test_freeze_device_state_init(self):
        body = ("say('forge', forge('state', 0, 1))\n"
                "say(probe('alloc', '1Gi', 'hold', '60', shim=False, background=True))\n")
        self.tenant("k8s.t3", body, 256 * Mi, 256 * Mi)
        self.wait_watchdog_kill("k8s.t3")  # the watchdog still ticks
        self.assert_node_unharmed()

    def test_crash_truncated_ledger_then_restart(self):
        again = os.path.join(self.tmp, "bypass-again")
        body = ("say('forge', forge('truncate'))\n"
                "say(probe('alloc', '1Gi', 'hold', '60', shim=False, background=True))\n"
                "def later():\n"
                "    while not os.path.exists(%r): time.sleep(0.02)\n"
                "    say(probe('alloc', '1Gi', 'hold', '60', shim=False, background=True))\n"
                "threading.Thread(target=later, daemon=True).start()\n" % again)
        _, out, _ = self.tenant("k8s.t4", body, 256 * Mi, 256 * Mi)
        self.assertIn("forge forged", out)
        self.wait_watchdog_kill("k8s.t4")
        self.assertIn("judged by the driver only", self.events())
        self.assert_node_unharmed()
        # after a restart the fraction is still watched, judged by the driver
        self.stop_agent(signal.SIGKILL)
        self.start_agent()
        open(again, "w").close()
        self.wait_for(lambda: self.events().count("of fraction k8s.t4:") >= 2,
                      "the watchdog to kill the second bypasser after the restart")
        self.assert_node_unharmed()

    def test_out_borrow_by_writing_lent(self):
        # the rest of the GPU is guaranteed to an owner: the agent lends nothing,
        # so whatever the tenant gets past its request comes from the forged copy
        owner = self.admit("k8s.owner5", 4 * Gi - 768 * Mi, 4 * Gi - 768 * Mi, uid=0)
        body = ("say('forge', forge('lent', 0, 3 << 30))\n"
                "say(probe('alloc', '2560Mi', 'hold', '60', background=True))\n")
        _, out, _ = self.tenant("k8s.t5", body, 512 * Mi, 3584 * Mi)
        text = "\n".join(out)
        if "alloc=ok" in text:  # the shim believed the forged copy: the watchdog does not
            self.wait_watchdog_kill("k8s.t5")
        self.assertNotIn("lend k8s.t5", open(os.path.join(self.state, "agent", "journal")).read())
        # the guaranteed owner gets its request
        r = subprocess.run([self.PROBE, "alloc", "3Gi"],
                           env=dict(self.env, LD_PRELOAD=self.SHIM, GPUFRAC_CONFIG=owner["config"]),
                           capture_output=True, text=True, timeout=60)
        self.assertIn("alloc=ok", r.stdout, r.stderr)
        self.assert_node_unharmed()

    def test_reclaim_without_need_evicts_nobody(self):
        # a real borrower in another fraction; the tenant asks to reclaim while
        # the GPU has the memory free: nobody is evicted
        b = self.admit("k8s.lender", 256 * Mi, 1 * Gi, uid=0)
        init = subprocess.Popen(["sh", "-c", "read x; exec %s alloc 700Mi hold 60" % self.PROBE],
                                env=dict(self.env, LD_PRELOAD=self.SHIM,
                                         GPUFRAC_CONFIG=b["config"]),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs.append(init)
        self.attach("k8s.lender", init.pid)
        init.stdin.write("go\n")
        init.stdin.flush()
        self.assertTrue(init.stdout.readline().startswith("alloc=ok"))
        body = "say('reply', ask('gpufrac/1 reclaim dev=%s bytes=536870912'))\n" % self.uuid
        _, out, _ = self.tenant("k8s.t9", body)
        self.assertIn("ok evicted=0", [ln for ln in out if ln.startswith("reply")][0])
        self.assertIsNone(init.poll(), "a borrower was evicted for nothing")
        self.assert_node_unharmed()

    def test_release_itself(self):
        body = "say('reply', ask('gpufrac/1 release name=k8s.t6 remove=1'))\n"
        _, out, _ = self.tenant("k8s.t6", body)
        reply = [ln for ln in out if ln.startswith("reply")][0]
        self.assertIn("only root on the agent's own socket", reply)
        self.assertTrue(os.path.isdir(os.path.join(self.state, "fractions", "k8s.t6")))
        self.assert_node_unharmed()

    def test_exhaust_connections(self):
        body = ("import resource\n"
                "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
                "resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))\n"
                "conns = []\n"
                "for i in range(min(1300, hard - 64)):\n"
                "    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
                "    s.connect(SOCK)\n"
                "    conns.append(s)\n"
                "say('opened', len(conns))\n")
        p, out, _ = self.tenant("k8s.t7", body)
        opened = int([ln for ln in out if ln.startswith("opened")][0].split()[1])
        self.assertGreater(opened, 1024, "the tenant could not open enough connections")
        # another fraction still borrows, root still admits and pings
        b = self.admit("k8s.burst7", 256 * Mi, 1 * Gi, uid=0)
        init = subprocess.Popen(["sh", "-c", "read x; exec %s alloc 700Mi" % self.PROBE],
                                env=dict(self.env, LD_PRELOAD=self.SHIM,
                                         GPUFRAC_CONFIG=b["config"]),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs.append(init)
        self.attach("k8s.burst7", init.pid)
        out, _ = init.communicate("go\n", timeout=60)
        self.assertIn("alloc=ok", out)
        self.assert_node_unharmed()

    def test_amplify_with_idle_helpers(self):
        # eight helpers that bypass the shim, 300Mi each, in a 1Gi fraction:
        # no allowance per process, so the watchdog brings it back under
        body = "\n".join("say(probe('alloc', '300Mi', 'hold', '60', shim=False, background=True))"
                         for _ in range(8)) + "\n"
        self.tenant("k8s.t8", body, 1 * Gi, 1 * Gi)

        def footprint():
            m = self.metrics()
            return self.sample(m, "gpufrac_fraction_memory_used_bytes", fraction="k8s.t8",
                               source="driver")
        # 8 x 300Mi: at least five must go before the rest fits 1Gi + the tolerance
        self.wait_for(lambda: self.events().count("of fraction k8s.t8:") >= 5,
                      "the watchdog to kill the helpers past the limit")
        self.wait_for(lambda: (footprint() or 0) and footprint() <= 1 * Gi + 64 * Mi,
                      "the fraction's footprint back within its limit")
        self.assert_node_unharmed()

    def test_root_files_in_a_user_state_dir(self):
        # the state directory is the tenant's; it plants links where the agent
        # writes: events.log, and the socket of a fraction it makes itself
        self.stop_agent()
        os.chown(self.state, NOBODY, NOBODY)
        os.chown(os.path.join(self.state, "fractions"), NOBODY, NOBODY)
        os.unlink(os.path.join(self.state, "events.log"))
        os.symlink(self.root_file, os.path.join(self.state, "events.log"))
        d = os.path.join(self.state, "fractions", "mine")
        os.mkdir(d)
        subprocess.run([os.path.join(BUILD, "tests", "ledgertool"), "create",
                        os.path.join(d, "ledger"), "mine"], check=True)
        with open(os.path.join(d, "config"), "w") as f:
            f.write("version=1\nname=mine\nledger=%s/ledger\nmode=time-slicing\n"
                    "compute_percent=100\ndevice=%s,%d,%d\n" % (d, self.uuid, Mi, Mi))
        os.symlink(self.root_file, os.path.join(d, "agent.sock"))
        for root, dirs, files in os.walk(d):
            for n in dirs + files:
                os.lchown(os.path.join(root, n), NOBODY, NOBODY)
        os.lchown(d, NOBODY, NOBODY)
        self.start_agent()
        self.wait_for(lambda: stat.S_ISSOCK(os.lstat(os.path.join(d, "agent.sock")).st_mode),
                      "the fraction's socket in place of the link")
        self.assertEqual(os.lstat(os.path.join(d, "agent.sock")).st_uid, NOBODY)
        self.assertTrue(os.path.islink(os.path.join(self.state, "events.log")))
        self.assert_node_unharmed()

    def test_cross_fraction_cleanup(self):
        # an attached container fraction with no process in a slot survives an
        # unrelated gpufrac run
        r = subprocess.run([self.GPUFRAC, "run", "--memory", "64Mi", "--", "true"], env=self.env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isdir(os.path.join(self.state, "fractions", "k8s.other")))
        self.assert_node_unharmed()

    def test_stale_fraction_releases_its_guarantee(self):
        f = self.admit("k8s.stale", 3 * Gi, 3 * Gi, uid=0)
        init = subprocess.Popen(["sleep", "600"])
        self.attach("k8s.stale", init.pid)
        self.assertTrue(os.path.isdir(os.path.dirname(f["config"])))
        init.kill()
        init.wait()
        self.wait_for(lambda: not os.path.exists(os.path.dirname(f["config"])),
                      "the agent to release the stale fraction")
        reply = self.ask(("gpufrac/1 admit name=k8s.next ns=t pod=p container=c devices=%s/%d/%d"
                          % (self.uuid, 3 * Gi, 3 * Gi)).encode())
        self.assertTrue(reply.startswith("gpufrac/1 ok"), reply)
        self.assert_node_unharmed()


@unittest.skipUnless(userns_works(), "unprivileged user namespaces are not available")
class PidNamespaceTest(AttackBase):
    def test_burst_and_eviction_inside_a_pid_namespace(self):
        body = "say(probe('alloc', '3276Mi', 'hold', '120', background=True))\n"
        # its termination message "file" is a link to a file of root's: the
        # agent writes the reason through no link (O_NOFOLLOW)
        victim = os.path.join(self.tmp, "root-file")
        with open(victim, "w") as f:
            f.write("root's\n")
        termlog = os.path.join(self.tmp, "termination-log")
        os.symlink(victim, termlog)
        _, out, _ = self.tenant("k8s.ns", body, 512 * Mi, 3584 * Mi, ns=True, termlog=termlog)
        text = "\n".join(out)
        self.assertIn("alloc=ok", text)
        ns_pid = int(kv(text)["holding"])
        self.wait_for(lambda: "k8s.ns" in self.status() and self.status()["k8s.ns"].get("burst"),
                      "the loan in a PID namespace")
        # a guaranteed owner needs its memory: the borrower inside the namespace goes
        owner = self.admit("k8s.owner", 2 * Gi, 2 * Gi, uid=0)
        init = subprocess.Popen(["sh", "-c", "read x; exec %s alloc 1536Mi" % self.PROBE],
                                env=dict(self.env, LD_PRELOAD=self.SHIM,
                                         GPUFRAC_CONFIG=owner["config"]),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs.append(init)
        self.attach("k8s.owner", init.pid)
        out, _ = init.communicate("go\n", timeout=60)
        self.assertIn("alloc=ok", out)
        m = re.search(r"reclaim: terminated pid (\d+) of fraction k8s.ns", self.events())
        self.assertTrue(m, self.events())
        host_pid = int(m.group(1))
        self.assertNotEqual(host_pid, ns_pid, "the agent used the container's pid")
        with open(victim) as f:
            self.assertEqual(f.read(), "root's\n", "the reason was written through a link")
        self.assertIn("cannot write the termination message of fraction k8s.ns to " + termlog,
                      self.events())
        self.assertFalse(os.path.exists("/proc/%d" % host_pid) and
                         open("/proc/%d/stat" % host_pid).read().split()[2] != "Z")
        self.assert_node_unharmed()

    def test_kill_anything_from_a_container(self):
        body = ("say('forge', forge('slot', %d, 1 << 60, 1 << 30, 60, background=True))\n"
                "say('reply', ask('gpufrac/1 reclaim dev=%s bytes=1073741824'))\n"
                "say('borrow', ask('gpufrac/1 borrow dev=%s bytes=1'))\n"
                % (self.root_canary.pid, self.uuid, self.uuid))
        _, out, _ = self.tenant("k8s.nsk", body, ns=True)
        self.assertRegex([ln for ln in out if ln.startswith("reply")][0],
                         "nothing on loan|ok evicted=0")
        self.assert_node_unharmed()


ASK_USERS = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.settimeout(20)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect-refused", e.errno)
    sys.exit(0)
for payload in sys.argv[2:]:
    s.send(payload.encode())
    print(s.recv(8192).decode().replace("\n", " "))
"""


class UsersSockTest(AttackBase):
    """<state>/users.sock is everyone's: through it a user gets
    ping, run and end of their own fraction, and nothing of root's socket,
    whoever connects (root included)."""

    def test_root_verbs_through_users_sock_are_refused(self):
        st = os.lstat(self.users_sock())
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (0, 0o666))
        other = os.path.join(self.state, "fractions", "k8s.other")
        attacks = [
            "gpufrac/1 release name=k8s.other remove=1",
            "gpufrac/1 attach name=k8s.other pid=%d" % self.root_canary.pid,
            "gpufrac/1 admit name=k8s.evil ns=t pod=evil container=c uid=65534 "
            "devices=%s/%d/%d" % (self.uuid, 3 * Gi, 3 * Gi),
            "gpufrac/1 reclaim dev=%s bytes=%d" % (self.uuid, 1 * Gi),
            "gpufrac/1 borrow dev=%s bytes=%d" % (self.uuid, 1 * Gi),
            "gpufrac/1 mps dev=%s" % self.uuid,
        ]
        for uid in (NOBODY, 0):  # root too: the socket decides, not only the uid
            replies = self.ask_as(uid, *attacks)
            self.assertEqual(len(replies), len(attacks), replies)
            for payload, reply in zip(attacks, replies):
                self.assertIn("is not served on users.sock", reply,
                              "%s via users.sock as uid %d" % (payload.split()[1], uid))
            self.assertEqual(self.ask_as(uid, "gpufrac/1 ping")[0][:12], "gpufrac/1 ok")
        self.assertTrue(os.path.isdir(other), "k8s.other was released through users.sock")
        self.assertFalse(os.path.exists(os.path.join(self.state, "fractions", "k8s.evil")))
        self.assert_node_unharmed()

    def test_another_users_fraction_cannot_be_ended_stopped_or_reached(self):
        # uid 65533 holds a fraction made through users.sock by the real gpufrac run
        for n in os.listdir(self.tmp):
            if n.startswith("gpusim.state"):
                os.chmod(os.path.join(self.tmp, n), 0o666)
        os.chmod(self.tmp, 0o755)
        victim = subprocess.Popen([self.GPUFRAC, "run", "--state-dir", self.state, "--name",
                                   "victim", "--memory", "256Mi", "--", "sleep", "600"],
                                  env=self.env, user=65533, group=65533, extra_groups=[],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs.append(victim)
        vdir = os.path.join(self.state, "fractions", "victim")
        self.wait_for(lambda: os.path.exists(os.path.join(vdir, "agent.sock")),
                      "the victim's fraction")
        # root's directory; only the ledger and the socket are the user's
        self.assertEqual(os.lstat(vdir).st_uid, 0)
        self.assertEqual(os.lstat(os.path.join(vdir, "config")).st_uid, 0)
        self.assertEqual(os.lstat(os.path.join(vdir, "supervisor")).st_uid, 0)
        self.assertEqual(os.lstat(os.path.join(vdir, "ledger")).st_uid, 65533)
        self.assertEqual(os.lstat(os.path.join(vdir, "agent.sock")).st_uid, 65533)
        # the attacker (uid 65534): end through users.sock, stop through the CLI,
        # the victim's own socket, a run under the same name
        reply = self.ask_as(NOBODY, "gpufrac/1 end name=victim exit=0")[0]
        self.assertIn("only the fraction's supervisor or root may end it", reply)
        r = subprocess.run([self.GPUFRAC, "stop", "--state-dir", self.state, "victim"],
                           env=self.env, user=NOBODY, group=NOBODY, extra_groups=[],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("is not yours", r.stderr)
        self.assertEqual(self.ask_as(NOBODY, "gpufrac/1 ping",
                                     sock=os.path.join(vdir, "agent.sock"))[0].split()[0],
                         "connect-refused")
        reply = self.ask_as(NOBODY, "gpufrac/1 run name=victim mode=time-slicing compute=100 "
                            "devices=%s/%d/%d" % (self.uuid, 64 * Mi, 64 * Mi))[0]
        self.assertIn("is in use", reply)
        self.assertIsNone(victim.poll(), "the victim's gpufrac run was stopped")
        self.assertTrue(os.path.isdir(vdir))
        # its supervisor is attached like every other (pidfd, journal): the
        # agent attributes the run's own processes to it
        self.assertIn("admitted fraction victim of uid 65533 (pid %d)" % victim.pid,
                      self.events())
        # the owner may stop it; the agent then keeps it for status under ended/
        r = subprocess.run([self.GPUFRAC, "stop", "--state-dir", self.state, "victim"],
                           env=self.env, user=65533, group=65533, extra_groups=[],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        victim.wait(timeout=60)
        self.wait_for(lambda: not os.path.exists(vdir), "the ended fraction to move")
        self.assertTrue(any(n.startswith("victim.") for n in
                            os.listdir(os.path.join(self.state, "ended"))))
        self.assert_node_unharmed()


if __name__ == "__main__":
    if os.getuid() != 0:
        print("security tests: need root to run attacks as uid 65534; skipped")
        sys.exit(77)
    cases.main(verbosity=2)
