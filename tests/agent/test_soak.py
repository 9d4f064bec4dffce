# SPDX-License-Identifier: Apache-2.0
"""A bounded soak of gpufracd under faults: one agent over a 16 GiB gpusim
GPU, its state directory on a small tmpfs, for CHURN_S seconds of

- container churn on root's socket (admit, attach of a probe init, then
  release, or the init SIGKILLed instead and left to the agent);
- users' runs of three uids through users.sock (`gpufrac run` as those
  users, some within their request, some borrowing up to their limit, some
  SIGKILLed mid-run: the run, its workload or both);
- burst storms: five fractions borrowing at once, then a guaranteed owner
  reclaiming (the first storm with the agent SIGKILLed while they hold);
- AGENT_KILLS SIGKILLs of the agent in all (restarted at once with the same
  arguments);
- one full-disk episode (the tmpfs filled, kept full FULL_DISK_S, freed).

Checked during the run and at its end: no honest process killed (only
borrowers evicted, each with its reason; no watchdog kill: every process
here stays within its fraction through the shim), no allocation within a
fraction's request refused, no loan lost across a restart (the agent's
per-fraction burst of every holding borrower is the same after it), a
refusal only while the disk is full (and saying so), every `_total`
counter never lower than a scrape showed, and after everything stopped no
fraction directory, no `.new-`/`.old-`/temp leftovers, no process and no GPU
memory left behind.

The random choices come from SEED (printed; GPUFRAC_SOAK_SEED replays
another); each worker thread has its own generator, so a failure names the
seed, the thread and its step. Needs root (the tmpfs, other uids); skips
(77) otherwise."""
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import GPUSIMTOOL, Gi, Mi, fill_disk, kv, stage_user_programs  # noqa: E402
from test_agent import AgentTestCase  # noqa: E402
from check_metrics import structure  # noqa: E402

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

SEED = int(os.environ.get("GPUFRAC_SOAK_SEED", "20240917"))
CHURN_S = float(os.environ.get("GPUFRAC_SOAK_SECONDS", "120"))
AGENT_KILLS = 5            # one of them while the first storm's borrowers hold
FULL_DISK_S = 10
STORMS = 2
STORM_BORROWERS = 5
USERS = (65534, 65533, 65532)
CONTAINER_THREADS = 2
MAX_STEPS = 200            # per worker thread, on top of the time bound
TMPFS_SIZE = "32m"
SCRAPE_EVERY_S = 2.0

# the sizes (GiB): churn guarantees at most 2 x 512Mi (containers) + 3 x 1Gi
# (users) = 4, the storm's borrowers 5 x 512Mi, its owner 6: 12.5 of 16, so
# every admission fits; the borrowers ask 5 x ~2Gi past their requests, so
# the owner's 5Gi is there only after a reclaim
STORM_B_REQ, STORM_B_LIMIT, STORM_B_OWN, STORM_B_OVER = 512 * Mi, 3 * Gi, 384 * Mi, 2 * Gi
STORM_O_REQ, STORM_O_ALLOC = 6 * Gi, 5 * Gi

REFUSAL_WORDS = re.compile(r"cannot record|no room|No space left|ENOSPC|full", re.I)
ASAN = re.compile(r"ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:")


def mi(n):
    return "%dMi" % (n // Mi)


def proc_start(pid):
    """The process' start time, None when it is gone or a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


class Work:
    """One workload: a probe in a fraction, made by a container admission,
    a user's run or root's run; what it must do and what it did."""

    def __init__(self, soak, kind, name, request, limit, allocs, hold, who):
        self.soak, self.kind, self.name, self.who = soak, kind, name, who
        self.request, self.limit, self.allocs, self.hold = request, limit, allocs, hold
        self.over = sum(allocs) > request  # it asks for a loan
        self.out = os.path.join(soak.tmp, name + ".out")
        self.proc = None     # gpufrac run, or the container's init (the probe itself)
        self.pid = None      # the probe
        self.start = None
        self.killed = set()  # what the soak itself SIGKILLed: "run", "work"
        self.t0 = time.monotonic()
        self.t1 = None
        self.fate = "finish"
        self.barrier = None  # a path the probe waits for before its first step

    def steps(self):
        s = ["barrier", self.barrier] if self.barrier else []
        for a in self.allocs:
            s += ["alloc", mi(a)]
        return s + ["hold", str(self.hold), "info"]

    def output(self):
        try:
            with open(self.out, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def learn_pid(self):
        if self.pid is None:
            # a whole line only: a line still being written would give a
            # prefix of the pid (another process's)
            m = re.search(r"^(?:holding|waiting)=(\d+)\n", self.output(), re.M)
            if m:
                self.pid = int(m.group(1))
                self.start = proc_start(self.pid)
        return self.pid

    def holding(self):
        return "holding=" in self.output() and "info=" not in self.output()

    def alive(self):
        return self.pid is not None and self.start is not None and \
            proc_start(self.pid) == self.start

    def kill_workload(self):
        """SIGKILL the probe through a pidfd, if it is still the one started."""
        if self.learn_pid() is None:
            return  # it never said which process it is: nothing of ours to kill
        try:
            fd = os.pidfd_open(self.pid)
        except OSError:
            return
        try:
            if proc_start(self.pid) == self.start:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
                self.killed.add("work")
        except OSError:
            pass
        finally:
            os.close(fd)

    def __repr__(self):
        return "%s %s (%s, request %s, limit %s, allocs %s)" % (
            self.kind, self.name, self.who, mi(self.request), mi(self.limit),
            "+".join(mi(a) for a in self.allocs))


class SoakTest(AgentTestCase):
    devices = "16Gi"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        stage_user_programs(cls)  # where the users can reach them wherever the checkout is

    @classmethod
    def tearDownClass(cls):
        cls.stage.remove()
        super().tearDownClass()

    def setUp(self):
        self.mnt = None
        import tempfile
        self.policy_dir = tempfile.mkdtemp(prefix="gpufrac-policy-")
        self.addCleanup(lambda: __import__("shutil").rmtree(self.policy_dir, True))
        self.policy = os.path.join(self.policy_dir, "policy.conf")
        # a run SIGKILLed while its workload lives still holds its fraction
        # (the workload is still the fraction's) until the workload ends:
        # room for those beside each user's live runs
        with open(self.policy, "w") as f:
            f.write("[default]\nmax-guaranteed = 1Gi\nmax-limit = 3Gi\nmax-fractions = 16\n")
        self.extra_args = ["--policy", self.policy]
        self.works, self.orphans, self.problems = [], [], []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.full_since = self.full_until = None
        self.high = {}       # the highest value each counter sample was seen at
        self.stats = {"kills": 0, "scrapes": 0, "refused": 0, "evicted": 0,
                      "loans_checked": 0, "storm_evictions": []}
        self.kill_request = threading.Event()
        self.kill_done = threading.Event()
        super().setUp()
        os.chmod(self.tmp, 0o755)
        self.uuid = kv(subprocess.run([self.PROBE, "uuid"], env=self.env, capture_output=True,
                                      text=True).stdout)["uuid"]

    def start_agent(self):
        if self.mnt is None:
            self.mnt = os.path.join(self.tmp, "state")
            os.makedirs(self.mnt, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=755" % TMPFS_SIZE,
                            "tmpfs", self.mnt], check=True)
        super().start_agent()
        # the simulated GPU is one device for every user
        for n in os.listdir(self.tmp):
            if n.startswith("gpusim.state"):
                os.chmod(os.path.join(self.tmp, n), 0o666)

    def tearDown(self):
        self.stop.set()
        for w in self.works:
            if w.alive():
                w.kill_workload()
        self.stop_agent()
        if self.mnt:
            subprocess.run(["umount", "-l", self.mnt])
        super().tearDown()

    # -- bookkeeping --------------------------------------------------------
    def now(self):
        return time.monotonic() - self.t_start

    def say(self, fmt, *args):
        print("[%6.1fs] %s" % (self.now(), fmt % args if args else fmt), flush=True)

    def problem(self, where, fmt, *args):
        msg = "seed %d, %s, t=%.1fs: %s" % (SEED, where, self.now(), fmt % args if args else fmt)
        with self.lock:
            self.problems.append(msg)
        print("PROBLEM: " + msg, flush=True)

    def count(self, key, n=1):
        with self.lock:
            self.stats[key] = self.stats.get(key, 0) + n

    def log_text(self):
        with open(os.path.join(self.tmp, "agent.log"), errors="replace") as f:
            return f.read()

    def disk_was_full(self, t0, t1):
        """Whether [t0, t1] (monotonic) overlaps the full-disk episode."""
        if self.full_since is None or t1 < self.full_since:
            return False
        return self.full_until is None or t0 <= self.full_until

    # -- the agent's sockets, as the runtime uses them ------------------------
    def ask_retry(self, payload, seconds=30):
        """Sends payload on root's socket; a request the agent did not answer
        because it was not there (restarting) is sent again, as the runtime
        does. Returns the reply."""
        end = time.monotonic() + seconds
        while True:
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                try:
                    s.settimeout(15)
                    s.connect(self.sock)
                    s.send(payload.encode())
                    reply = s.recv(8192)
                finally:
                    s.close()
                if reply:
                    return reply.decode()
            except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError,
                    BrokenPipeError):
                pass
            if time.monotonic() > end:
                raise AssertionError("the agent stayed unreachable for %s" % payload[:60])
            time.sleep(0.05)

    # -- workloads ------------------------------------------------------------
    def run_work(self, w, uid=None):
        """Starts w as `gpufrac run` (as uid, or root)."""
        out = open(w.out, "w")
        os.chmod(w.out, 0o666)
        kw = dict(user=uid, group=uid, extra_groups=[]) if uid else {}
        w.proc = subprocess.Popen(
            [self.GPUFRAC, "run", "--name", w.name, "--memory", mi(w.request), "--limit",
             mi(w.limit), "--", self.PROBE, *w.steps()], env=self.env, stdout=out,
            stderr=subprocess.STDOUT, **kw)
        out.close()
        self.procs.append(w.proc)
        with self.lock:
            self.works.append(w)

    def admit_work(self, w, barrier=True):
        """Admits w as a container fraction, starts its init (the probe, past a
        barrier) and attaches it. Returns the barrier's path, or None when the
        admission was refused (judged here)."""
        pod = w.name.split(".")[1]
        reply = self.ask_retry("gpufrac/1 admit name=%s ns=soak pod=%s container=main "
                               "devices=%s/%d/%d" % (w.name, pod, self.uuid, w.request, w.limit))
        if not reply.startswith("gpufrac/1 ok"):
            self.refused(w, "admit: " + reply)
            return None
        f = dict(x.split("=", 1) for x in reply.split()[2:])
        go = os.path.join(self.tmp, w.name + ".go")
        out = open(w.out, "w")
        env = dict(self.env, LD_PRELOAD=self.SHIM, GPUFRAC_CONFIG=f["config"])
        w.barrier = go
        w.proc = subprocess.Popen([self.PROBE, *w.steps()], env=env, stdout=out,
                                  stderr=subprocess.STDOUT)
        out.close()
        self.procs.append(w.proc)
        w.pid, w.start = w.proc.pid, proc_start(w.proc.pid)
        with self.lock:
            self.works.append(w)
        reply = self.ask_retry("gpufrac/1 attach name=%s pid=%d" % (w.name, w.pid))
        if not reply.startswith("gpufrac/1 ok"):
            # the runtime fails the container: its init goes, its fraction released
            w.proc.kill()
            w.proc.wait()
            w.killed.add("work")
            self.ask_retry("gpufrac/1 release name=%s remove=1" % w.name)
            self.refused(w, "attach: " + reply)
            return None
        if barrier:
            open(go, "w").close()
        return go

    def refused(self, w, why):
        w.t1 = time.monotonic()
        w.fate = "refused"
        self.count("refused")
        with self.lock:
            self.stats.setdefault("refusals", {}).setdefault(w.kind, why.strip()[-300:])
        self.stop.wait(0.5)  # as a runtime's or a user's retry would
        if not self.disk_was_full(w.t0, w.t1):
            self.problem(w.who, "%r refused with the disk not full: %s", w, why.strip()[-400:])
        elif not REFUSAL_WORDS.search(why):
            self.problem(w.who, "%r refused on the full disk without saying why: %s", w,
                         why.strip()[-400:])

    def wait_started(self, w, seconds=60):
        """Until w's probe holds, or w's run ended. True when it holds."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            w.learn_pid()
            if "holding=" in w.output():
                return True
            if w.proc.poll() is not None:
                w.learn_pid()
                return "holding=" in w.output()
            time.sleep(0.05)
        self.problem(w.who, "%r neither held nor ended within %d s: %s", w, seconds,
                     w.output()[-400:])
        return False

    def evicted_in_log(self, w, log=None):
        if w.pid is None:
            return False
        return re.search(r"reclaim: terminated pid %d of fraction %s " % (w.pid, re.escape(w.name)),
                         log if log is not None else self.log_text()) is not None

    def judge(self, w):
        """w has ended: did it get what an honest workload is promised?"""
        w.t1 = w.t1 or time.monotonic()
        out = w.output()
        rc = w.proc.returncode
        allocs = re.findall(r"^alloc=(\S+)$", out, re.M)
        if not allocs and "holding=" not in out and w.kind != "container" and rc not in (0, 75):
            # no fraction was made: a refusal of the run
            return self.refused(w, out)
        if ASAN.search(out):
            self.problem(w.who, "%r: a sanitizer report: %s", w, out[-1500:])
        if rc == 76 or "watchdog" in out:
            self.problem(w.who, "%r terminated by the watchdog (an honest process): %s", w,
                         out[-600:])
        if allocs and allocs[0] != "ok":
            self.problem(w.who, "%r: an allocation within its request refused (%s): %s", w,
                         allocs[0], out[-600:])
        for a in allocs[1:]:
            if a not in ("ok", "CUDA_ERROR_OUT_OF_MEMORY"):
                self.problem(w.who, "%r: a borrow failed with %s", w, a)
        if w.kind == "container":
            evicted = rc == -signal.SIGKILL and "work" not in w.killed
            if evicted and not self.soak_wait(lambda: self.evicted_in_log(w), 30):
                self.problem(w.who, "%r SIGKILLed by someone else, with no reclaim recorded: %s",
                             w, out[-400:])
        else:
            evicted = rc == 75
            if evicted and not re.search(r"evicted by gpufracd: its loan of .* was taken back",
                                         out):
                self.problem(w.who, "%r exited 75 without the eviction's reason: %s", w,
                             out[-400:])
        if evicted:
            self.count("evicted")
            w.fate = (w.fate or "") + "+evicted"
            if not w.over:
                self.problem(w.who, "%r evicted though it never borrowed", w)
            return
        if w.killed:
            return  # what the soak killed, or an orphan judged once it ended
        if rc != 0 or "info=" not in out:
            self.problem(w.who, "%r: an honest workload did not complete (rc %s): %s", w, rc,
                         out[-600:])

    def judge_orphan(self, w):
        """w's gpufrac run was SIGKILLed, its workload left to finish alone."""
        out = w.output()
        if "info=" in out:
            return
        log = self.log_text()
        term = os.path.join(self.state, "fractions", w.name, "terminated")
        if self.evicted_in_log(w, log) or os.path.exists(term):
            self.count("evicted")
            if not w.over:
                self.problem(w.who, "orphaned %r evicted though it never borrowed", w)
            return
        self.problem(w.who, "the orphaned workload of %r did not complete: %s", w, out[-600:])

    def soak_wait(self, pred, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            v = pred()
            if v:
                return v
            time.sleep(0.1)
        return None

    # -- the churn --------------------------------------------------------------
    def worker(self, who, body, rng):
        step = 0
        try:
            while not self.stop.is_set() and step < MAX_STEPS:
                step += 1
                body(rng, "%s step %d" % (who, step), step)
        except Exception:  # noqa: BLE001 (reported, the soak goes on)
            self.problem(who + " step %d" % step, "raised:\n%s", traceback.format_exc())

    def user_step(self, uid):
        def body(rng, who, i):
            req = rng.choice([256 * Mi, 512 * Mi, 1 * Gi])
            own = rng.choice([req // 4, req // 2, req * 3 // 4])
            allocs = [own]
            limit = req
            if rng.random() < 0.5:
                limit = min(3 * Gi, req + rng.choice([512 * Mi, 1 * Gi, 2 * Gi]))
                allocs.append(req - own + (limit - req) * rng.choice([1, 2, 3]) // 4)
            w = Work(self, "user", "u%d-%d" % (uid, i), req, limit, allocs, rng.randint(1, 3),
                     who)
            w.fate = rng.choices(["finish", "kill-run", "kill-work", "kill-both"],
                                 [5, 1, 1, 1])[0]
            self.run_work(w, uid)
            if self.wait_started(w) and w.fate != "finish":
                time.sleep(rng.uniform(0, 0.5))
                if w.fate in ("kill-run", "kill-both"):
                    w.proc.kill()
                    w.killed.add("run")
                if w.fate in ("kill-work", "kill-both"):
                    w.kill_workload()
            try:
                w.proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                self.problem(who, "%r: its gpufrac run did not end", w)
                w.proc.kill()
                w.proc.wait()
            if "run" in w.killed and w.fate == "kill-run":
                with self.lock:
                    self.orphans.append(w)
            self.judge(w)
        return body

    def container_step(self, k):
        def body(rng, who, i):
            req = rng.choice([256 * Mi, 512 * Mi])
            own = rng.choice([req // 4, req // 2, req * 3 // 4])
            allocs, limit = [own], req
            if rng.random() < 0.5:
                limit = 2 * req
                allocs.append(req - own + req * rng.choice([1, 2, 3]) // 4)
            w = Work(self, "container", "k8s.c%d-%d.main" % (k, i), req, limit, allocs,
                     rng.randint(1, 3), who)
            w.fate = rng.choices(["release", "kill"], [2, 1])[0]
            if self.admit_work(w) is None:
                return
            if w.fate == "kill" and self.wait_started(w):
                time.sleep(rng.uniform(0, 0.5))
                w.kill_workload()
            try:
                w.proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                self.problem(who, "%r: its init did not end", w)
                w.kill_workload()
                w.proc.wait()
            if w.fate == "release":  # the runtime's poststop
                reply = self.ask_retry("gpufrac/1 release name=%s remove=1" % w.name)
                if not reply.startswith("gpufrac/1 ok"):
                    self.problem(who, "%r: release refused: %s", w, reply)
            self.judge(w)
        return body

    # -- burst storms -------------------------------------------------------------
    def storms(self, times):
        for n, at in enumerate(times):
            while self.now() < at and not self.stop.is_set():
                time.sleep(0.1)
            # a storm on a full disk would borrow nothing
            while self.full_since is not None and self.full_until is None and \
                    not self.stop.is_set():
                time.sleep(0.1)
            if self.stop.is_set():
                return
            who = "storm %d" % n
            self.say("%s: %d borrowers", who, STORM_BORROWERS)
            borrowers = []
            for b in range(STORM_BORROWERS):
                w = Work(self, "storm", "s%d-b%d" % (n, b), STORM_B_REQ, STORM_B_LIMIT,
                         [STORM_B_OWN, STORM_B_OVER], 12, who)
                self.run_work(w)
                borrowers.append(w)
            for w in borrowers:
                self.wait_started(w)
            granted = sum(1 for w in borrowers if w.output().count("alloc=ok") == 2)
            self.say("%s: %d of %d borrowed %s", who, granted, len(borrowers), mi(STORM_B_OVER))
            if n == 0:  # the agent dies while they hold their loans
                self.kill_request.set()
                if not self.kill_done.wait(120):
                    self.problem(who, "the mid-storm agent kill did not happen")
                self.kill_done.clear()
            before = self.log_text().count("reclaim: terminated pid")
            if n % 2 == 0:
                w = Work(self, "storm", "s%d-owner" % n, STORM_O_REQ, STORM_O_REQ,
                         [STORM_O_ALLOC], 2, who)
                self.run_work(w)
            else:
                w = Work(self, "container", "k8s.s%d-owner.main" % n, STORM_O_REQ, STORM_O_REQ,
                         [STORM_O_ALLOC], 2, who)
                w.fate = "release"
                if self.admit_work(w) is None:
                    w = None
            if w is not None:
                try:
                    w.proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    self.problem(who, "the owner %r did not end", w)
                    w.kill_workload()
                    w.proc.wait()
                if w.kind == "container":
                    self.ask_retry("gpufrac/1 release name=%s remove=1" % w.name)
                self.judge(w)
            for b in borrowers:
                try:
                    b.proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    self.problem(who, "the borrower %r did not end", b)
                    b.kill_workload()
                    b.proc.wait()
                self.judge(b)
            evicted = self.log_text().count("reclaim: terminated pid") - before
            with self.lock:
                self.stats["storm_evictions"].append(evicted)
            self.say("%s: the owner %s; %d borrower(s) evicted", who,
                     "allocated %s" % mi(STORM_O_ALLOC) if w and "alloc=ok" in w.output()
                     else "FAILED", evicted)
            if granted == len(borrowers) and evicted == 0:
                self.problem(who, "every borrower held its loan and the owner's reclaim "
                             "evicted none of them")

    # -- metrics ------------------------------------------------------------------
    def scrape(self, when):
        """The counter samples (_total) on /metrics, checked against the
        highest each was seen at; the whole page by sample."""
        url = "http://127.0.0.1:%s/metrics" % self.metrics_port()
        with urllib.request.urlopen(url, timeout=30) as r:
            text = r.read().decode()
        bad = structure(text)
        if bad:
            self.problem("metrics " + when, "the page's structure: %s", bad)
        counters, samples = {}, {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                key = (s.name, tuple(sorted(s.labels.items())))
                samples[key] = s.value
                if fam.type == "counter" and s.name.endswith("_total"):
                    counters[key] = s.value
        lower = {k: (self.high[k], v) for k, v in counters.items()
                 if k in self.high and v < self.high[k]}
        if lower:
            self.problem("metrics " + when, "counters lower than a scrape showed (seen, now): "
                         "%s", {"%s%s" % (n, dict(lb)): p for (n, lb), p in lower.items()})
        for k, v in counters.items():
            self.high[k] = max(v, self.high.get(k, v))
        self.count("scrapes")
        return counters, samples

    def burst_of(self, samples, name):
        for (n, lb), v in samples.items():
            if n == "gpufrac_fraction_memory_burst_bytes" and dict(lb).get("fraction") == name:
                return v
        return 0.0

    # -- faults -------------------------------------------------------------------
    def kill_agent(self, why):
        n = self.stats["kills"] + 1
        c_before, s_before = self.scrape("before kill %d" % n)
        with self.lock:
            works = list(self.works)
        holders = [(w, self.burst_of(s_before, w.name)) for w in works
                   if w.over and w.holding() and w.alive()]
        holders = [(w, b) for w, b in holders if b > 0]
        self.stop_agent(signal.SIGKILL)
        self.start_agent()
        self.count("kills")
        c_after, s_after = self.scrape("after restart %d" % n)
        gone = [k for k in c_before if k not in c_after and "fraction" not in dict(k[1])]
        if gone:
            self.problem("restart %d" % n, "agent-wide counter samples gone: %s", gone)
        checked = 0
        for w, b in holders:
            # still holding after the scrape: it held its loan all along
            term = os.path.join(self.state, "fractions", w.name, "terminated")
            if not (w.holding() and w.alive()) or os.path.exists(term):
                continue
            checked += 1
            if self.burst_of(s_after, w.name) != b:
                self.problem("restart %d (%s)" % (n, why), "the loan of %r (pid %d): %d bytes "
                             "before the SIGKILL, %d after", w, w.pid, b,
                             self.burst_of(s_after, w.name))
        self.count("loans_checked", checked)
        self.say("agent SIGKILL %d (%s): restarted; %d loan(s) held across it, %d counter "
                 "samples", n, why, checked, len(c_after))

    def fill(self):
        # a borrower already running asks for burst while the disk is full
        w = Work(self, "root", "fd-b", 256 * Mi, 1 * Gi, [128 * Mi, 512 * Mi], 1,
                 "full disk")
        w.barrier = os.path.join(self.tmp, "fd-b.go")
        self.run_work(w)
        if not self.soak_wait(lambda: "waiting=" in w.output(), 60):
            self.problem("full disk", "its borrower did not start: %s", w.output())
        self.full_since = time.monotonic()
        rooms = self.log_text().count("journal: no room")
        filler = fill_disk(self.mnt)
        self.say("full disk: %s filled (%d MiB)", self.mnt, os.path.getsize(filler) >> 20)
        if not self.soak_wait(lambda: self.log_text().count("journal: no room") > rooms, 60):
            self.problem("full disk", "the agent never saw the disk full")
        self.fd_work = w
        return filler

    def free(self, filler):
        os.unlink(filler)

        def healthy():
            try:
                url = "http://127.0.0.1:%s/healthz" % self.metrics_port()
                with urllib.request.urlopen(url, timeout=10) as r:
                    return r.read().decode() == "ok\n"
            except (OSError, urllib.error.URLError):
                return False
        if not self.soak_wait(healthy, 60):
            self.problem("full disk", "/healthz never said ok again after the disk was freed")
        self.full_until = time.monotonic()
        self.say("full disk: freed, the agent grants again")

    # -- the soak ---------------------------------------------------------------
    def test_soak(self):
        self.t_start = time.monotonic()
        rng = random.Random(SEED)
        print("\nsoak: seed %d (GPUFRAC_SOAK_SEED=%d replays it), %d s of churn, %d agent "
              "SIGKILLs, %d storms, a full disk of %d s, state on a %s tmpfs" % (
                  SEED, SEED, CHURN_S, AGENT_KILLS, STORMS, FULL_DISK_S, TMPFS_SIZE), flush=True)
        # the plan: kills spread over the run (one more inside the first storm),
        # the full disk in its middle, storms before and after it
        slot = (CHURN_S - 12) / (AGENT_KILLS - 1)
        plan = [(6 + slot * (k + rng.uniform(0.15, 0.85)), "kill") for k in range(AGENT_KILLS - 1)]
        fill_at = CHURN_S * rng.uniform(0.35, 0.5)
        plan += [(fill_at, "fill"), (fill_at + FULL_DISK_S, "free")]
        plan.sort()
        storm_at = [CHURN_S * rng.uniform(0.08, 0.18), CHURN_S * rng.uniform(0.65, 0.75)][:STORMS]
        print("soak: plan %s; storms at %s" % (
            ", ".join("%s@%.1fs" % (a, t) for t, a in plan),
            ", ".join("%.1fs" % t for t in storm_at)), flush=True)

        threads = [threading.Thread(target=self.worker, name="users %d" % uid,
                                    args=("users %d" % uid, self.user_step(uid),
                                          random.Random(SEED * 31 + uid))) for uid in USERS]
        threads += [threading.Thread(target=self.worker, name="containers %d" % k,
                                     args=("containers %d" % k, self.container_step(k),
                                           random.Random(SEED * 37 + k)))
                    for k in range(CONTAINER_THREADS)]
        storm = threading.Thread(target=self.guard, args=("storms", self.storms, storm_at))
        for t in threads + [storm]:
            t.start()
        filler, last_scrape, last_note = None, 0, 0
        while self.now() < CHURN_S or plan or self.kill_request.is_set():
            if plan and self.now() >= plan[0][0]:
                _, action = plan.pop(0)
                if action == "kill":
                    self.kill_agent("scheduled")
                elif action == "fill":
                    filler = self.fill()
                    open(self.fd_work.barrier, "w").close()
                elif action == "free":
                    self.free(filler)
            if self.kill_request.is_set():
                self.kill_request.clear()
                self.kill_agent("storm 0's borrowers holding")
                self.kill_done.set()
            if self.agent.poll() is not None:
                self.problem("agent", "gpufracd died by itself (status %s): %s",
                             self.agent.returncode, self.log_text()[-2000:])
                self.stop_agent()
                self.start_agent()
            if self.now() - last_scrape >= SCRAPE_EVERY_S:
                self.scrape("periodic")
                last_scrape = self.now()
            if self.now() - last_note >= 15:
                last_note = self.now()
                self.say("%d workloads so far, %d refused, %d evicted, %d problem(s)",
                         len(self.works), self.stats["refused"], self.stats["evicted"],
                         len(self.problems))
            time.sleep(0.1)
        self.stop.set()
        self.say("churn over; waiting for the workers")
        for t in threads + [storm]:
            t.join(timeout=180)
            if t.is_alive():
                self.problem(t.name, "did not finish within 180 s of the end")
        self.finish_checks()

    def guard(self, who, fn, *args):
        try:
            fn(*args)
        except Exception:  # noqa: BLE001
            self.problem(who, "raised:\n%s", traceback.format_exc())

    def orphaned_borrower(self):
        """The churn's kill-run, made decisive: on the quiet GPU the only loan
        is held by a user's workload whose gpufrac run was SIGKILLed, and a
        guaranteed owner's allocation within its request needs that memory
        back. The owner must get it (the orphan evicted with its reason)."""
        who = "orphaned borrower"
        fractions = os.path.join(self.state, "fractions")
        if self.soak_wait(lambda: not [n for n in os.listdir(fractions) if not n.startswith(".")],
                          30) is None:
            return self.problem(who, "the GPU never became quiet: %s", os.listdir(fractions))
        w = Work(self, "user", "orphan-b", 1 * Gi, 3 * Gi, [512 * Mi, 2 * Gi], 60, who)
        w.fate = "kill-run"
        self.run_work(w, USERS[0])
        if not self.wait_started(w) or "alloc=ok\nalloc=ok" not in w.output():
            return self.problem(who, "%r did not borrow: %s", w, w.output()[-400:])
        w.proc.kill()
        w.proc.wait()
        w.killed.add("run")
        lent = self.soak_wait(lambda: self.burst_of(self.scrape(who)[1], w.name), 30)
        # 16Gi: 1Gi guaranteed to the orphan's fraction, 15Gi to the owner, whose
        # 14Gi is there only once 0.5Gi of the orphan's loan is back
        o = Work(self, "root", "orphan-owner", 15 * Gi, 15 * Gi, [14 * Gi], 1, who)
        self.run_work(o)
        o.proc.wait(timeout=120)
        self.judge(o)
        ok = "alloc=ok" in o.output()
        self.say("%s: pid %s of fraction %s kept a loan of %s after its gpufrac run was "
                 "SIGKILLed; the owner's %s within its request %s", who, w.pid, w.name,
                 mi(int(lent or 0)), mi(14 * Gi), "was granted" if ok else "was REFUSED")
        if not ok:
            self.problem(who, "the only loan on the GPU, %s held by pid %s of fraction %s (its "
                         "gpufrac run SIGKILLed, its workload reparented), was not reclaimed "
                         "for a guaranteed owner: agent log %s", mi(int(lent or 0)), w.pid,
                         w.name, [ln for ln in self.log_text().splitlines()
                                  if "orphan-" in ln][-5:])
        if w.alive() and not self.evicted_in_log(w):
            w.kill_workload()
        if not self.soak_wait(lambda: not w.alive(), 30):
            self.problem(who, "%r did not end", w)

    def finish_checks(self):
        # the full-disk borrower: its own memory granted, the loan refused, alive
        w = getattr(self, "fd_work", None)
        if w is not None:
            w.proc.wait(timeout=120)
            self.judge(w)
            allocs = re.findall(r"^alloc=(\S+)$", w.output(), re.M)
            if allocs[1:] != ["CUDA_ERROR_OUT_OF_MEMORY"]:
                self.problem("full disk", "a loan asked for on the full disk: %s", allocs)
        # orphans: workloads whose gpufrac run the soak SIGKILLed end by themselves
        for w in self.orphans:
            if not self.soak_wait(lambda: not w.alive(), 60):
                self.problem(w.who, "the orphaned workload of %r did not end", w)
                w.kill_workload()
            self.judge_orphan(w)
        for p in self.procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.problem("end", "a process the soak started did not end: %s", p.args)
        self.orphaned_borrower()
        self.scrape("final")
        log = self.log_text()
        # nobody was the watchdog's; every eviction took a borrower's loan
        for m in re.finditer(r"watchdog: killed pid (\d+) of fraction (\S+)", log):
            self.problem("end", "the watchdog killed pid %s of fraction %s: every process here "
                         "is honest", m.group(1), m.group(2))
        over = {w.name for w in self.works if w.over}
        for m in re.finditer(r"reclaim: terminated pid (\d+) of fraction (\S+) ", log):
            if m.group(2) not in over:
                self.problem("end", "fraction %s was evicted from and never borrowed",
                             m.group(2))
        if ASAN.search(log):
            self.problem("end", "a sanitizer report in the agent's log: %s",
                         log[ASAN.search(log).start():][:2000])
        # nothing left behind
        fractions = os.path.join(self.state, "fractions")

        def dirs():  # (.lock is gpufrac run's admission lock, a file)
            return sorted(n for n in os.listdir(fractions)
                          if os.path.isdir(os.path.join(fractions, n)))
        if self.soak_wait(lambda: not dirs(), 30) is None:
            self.problem("end", "fraction directories left after everything ended: %s", dirs())
        junk = []
        for root, dirs, files in os.walk(self.state):
            for n in dirs + files:
                if n.startswith((".new-", ".old-")) or re.search(r"\.tmp\d*$", n):
                    junk.append(os.path.join(root, n))
        if junk:
            self.problem("end", "leftovers in the state directory: %s", junk)
        mine = "GPUSIM_STATE=" + self.env["GPUSIM_STATE"]
        strays = []
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) in (os.getpid(), self.agent.pid):
                continue
            try:
                with open("/proc/%s/environ" % d, "rb") as f:
                    env = f.read().decode(errors="replace").split("\0")
            except OSError:
                continue
            if mine in env and proc_start(int(d)) is not None:
                strays.append(int(d))
        if strays:
            self.problem("end", "stray processes of the soak: %s", strays)
        used = kv(subprocess.run([GPUSIMTOOL, "dump", self.env["GPUSIM_STATE"]],
                                 capture_output=True, text=True).stdout).get("dev0_used")
        if used not in ("0", None):
            self.problem("end", "GPU memory left in use after everything ended: %s bytes", used)
        self.assertIsNone(self.agent.poll(), "the agent died")
        self.summary()
        self.assertEqual(self.problems, [], "the soak found %d problem(s) (seed %d)" %
                         (len(self.problems), SEED))

    def summary(self):
        by = {}
        for w in self.works:
            key = "%s %s" % (w.kind, w.fate)
            by[key] = by.get(key, 0) + 1
        log = self.log_text()
        print("\nsoak summary (seed %d, %.1f s):" % (SEED, self.now()))
        print("  workloads: %d (%s)" % (len(self.works), ", ".join(
            "%s: %d" % kv_ for kv_ in sorted(by.items()))))
        print("  borrowers: %d asked for a loan; %d evicted with a reason; refused (full disk): "
              "%d; orphaned runs: %d" % (sum(1 for w in self.works if w.over),
                                         self.stats["evicted"], self.stats["refused"],
                                         len(self.orphans)))
        print("  storms: %d, evictions per storm %s" % (len(self.stats["storm_evictions"]),
                                                       self.stats["storm_evictions"]))
        print("  agent: %d SIGKILLs and restarts, %d loans checked across them, %d scrapes, "
              "%d counter samples watched; agent log: %d reclaims, %d loans refused on the full "
              "disk" % (self.stats["kills"], self.stats["loans_checked"], self.stats["scrapes"],
                        len(self.high), log.count("reclaim: terminated pid"),
                        log.count("refused a loan")))
        for kind, why in sorted(self.stats.get("refusals", {}).items()):
            print("  a %s refused on the full disk: %s" % (kind, why.replace("\n", " | ")))
        print("  problems: %d" % len(self.problems), flush=True)
        if self.problems:
            print("the agent's log, its last lines:\n" + "\n".join(log.splitlines()[-80:]))
        if os.environ.get("GPUFRAC_SOAK_KEEP_LOG"):
            with open(os.environ["GPUFRAC_SOAK_KEEP_LOG"], "w") as f:
                f.write(log)


if __name__ == "__main__":
    if os.getuid() != 0:
        print("agent.soak: needs root (a small tmpfs, runs as other users); skipped")
        sys.exit(77)
    cases.main(verbosity=2)
