# SPDX-License-Identifier: Apache-2.0
"""Shared helpers for the integration tests: where the build is, a private
simulated GPU per test, fractions made by hand (config + ledger), and runs of
the real binaries with the shim preloaded."""
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import unittest

BUILD = os.environ.get("GPUFRAC_BUILD") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build")
BUILD = os.path.abspath(BUILD)
SHIM = os.path.join(BUILD, "lib", "libgpufrac.so")
GPUSIM = os.path.join(BUILD, "lib", "gpusim")
PROBE = os.path.join(BUILD, "tests", "shimprobe")
LEDGERTOOL = os.path.join(BUILD, "tests", "ledgertool")
GPUSIMTOOL = os.path.join(BUILD, "tests", "gpusimtool")
GPUFRAC = os.path.join(BUILD, "bin", "gpufrac")

Ki, Mi, Gi = 1 << 10, 1 << 20, 1 << 30


def kv(text):
    """key=value lines -> dict (last one wins; repeated keys also in a list)."""
    out = {}
    for line in text.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def reachable_by_others(path):
    """Whether a user that is neither the owner nor in the group can reach
    path: every directory on the way is searchable by others."""
    d = os.path.dirname(os.path.abspath(path))
    while True:
        if not os.stat(d).st_mode & stat.S_IXOTH:
            return False
        if d == "/":
            return True
        d = os.path.dirname(d)


class StagedBuild:
    """What processes of another user (uid 65534, ...) execute or read, copied
    into a private 0755 directory this makes and remove() deletes: the checkout
    may lie where only root can reach it (a clone in a 0700 mktemp directory),
    and a test never changes its modes. `rel` are paths relative to the build
    (a directory is copied whole, links kept); `sources` are files of the
    checkout, staged under src/. The build layout is kept, so bin/gpufrac
    finds ../lib/libgpufrac.so; LD_LIBRARY_PATH must name the staged gpusim
    (it wins over the binaries' RUNPATH into the build)."""

    def __init__(self, rel, sources=()):
        base = next((b for b in (tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm")
                     if os.path.isdir(b) and reachable_by_others(os.path.join(b, "x"))), None)
        if base is None:
            raise unittest.SkipTest(
                "no temporary directory other users can reach (%s, /tmp, /var/tmp and /dev/shm "
                "each have a parent without search permission for others): the binaries "
                "cannot be staged for uid 65534" % tempfile.gettempdir())
        self.dir = tempfile.mkdtemp(prefix="gpufrac-stage-", dir=base)
        try:
            os.chmod(self.dir, 0o755)
            for r in rel:
                self._copy(os.path.join(BUILD, r), os.path.join(self.dir, r))
            for src in sources:
                self._copy(src, self.src(src))
        except BaseException:
            self.remove()
            raise

    def _copy(self, src, dst):
        os.makedirs(os.path.dirname(dst), mode=0o755, exist_ok=True)
        for d in self._dirs_between(dst):
            os.chmod(d, 0o755)
        if os.path.isdir(src):
            shutil.copytree(src, dst, symlinks=True)
            for root, dirs, files in os.walk(dst):
                os.chmod(root, 0o755)
                for n in files:
                    self._open_up(os.path.join(root, n))
        else:
            shutil.copy2(src, dst)
            self._open_up(dst)

    def _dirs_between(self, dst):
        d = os.path.dirname(dst)
        while d != self.dir and d.startswith(self.dir):
            yield d
            d = os.path.dirname(d)

    @staticmethod
    def _open_up(path):
        if not os.path.islink(path):
            x = os.stat(path).st_mode & stat.S_IXUSR
            os.chmod(path, 0o755 if x else 0o644)

    def path(self, rel):
        return os.path.join(self.dir, rel)

    def src(self, source):
        return os.path.join(self.dir, "src", os.path.basename(source))

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


USER_PROGRAMS = ("bin/gpufrac", "lib/libgpufrac.so", "lib/gpusim", "tests/shimprobe")


def stage_user_programs(cls):
    """Stages what users run for a class's cases: cls.stage (remove() it in
    tearDownClass), cls.gpusim_dir, cls.GPUFRAC, cls.PROBE and cls.SHIM."""
    cls.stage = StagedBuild(USER_PROGRAMS)
    cls.gpusim_dir = cls.stage.path("lib/gpusim")
    cls.GPUFRAC = cls.stage.path("bin/gpufrac")
    cls.PROBE = cls.stage.path("tests/shimprobe")
    cls.SHIM = cls.stage.path("lib/libgpufrac.so")


def fill_disk(directory):
    """Writes zeros to directory/filler until the file system refuses; its path."""
    filler = os.path.join(directory, "filler")
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * (64 << 10))
                f.flush()
        except OSError:
            pass
    return filler


class SimTestCase(unittest.TestCase):
    """Each test gets its own simulated GPU state and temp dir."""

    devices = "4Gi"
    ctx_overhead = "0"
    gpusim_dir = GPUSIM  # a staged copy where other users run gpusim (StagedBuild)

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpufrac-test-")
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LD_LIBRARY_PATH": self.gpusim_dir,
            "GPUSIM_DEVICES": self.devices,
            "GPUSIM_STATE": os.path.join(self.tmp, "gpusim.state"),
            "GPUSIM_CTX_OVERHEAD": self.ctx_overhead,
            "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
            "ASAN_OPTIONS": "detect_leaks=0",
        }
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                # TERM first: gpufrac run forwards it to the whole fraction
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
            p.communicate()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- fractions made by hand -------------------------------------------
    def make_fraction(self, limit, request=None, name="t", devices=("*",)):
        d = os.path.join(self.tmp, name)
        os.makedirs(d)
        ledger = os.path.join(d, "ledger")
        subprocess.run([LEDGERTOOL, "create", ledger, name], check=True)
        lines = ["version=1", "name=" + name, "ledger=" + ledger, "mode=time-slicing",
                 "compute_percent=100"]
        for uuid in devices:
            lines.append("device=%s,%d,%d" % (uuid, request or limit, limit))
        cfg = os.path.join(d, "config")
        with open(cfg, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.ledger = ledger
        self.config = cfg
        return cfg

    def shim_env(self, **extra):
        env = dict(self.env)
        env["LD_PRELOAD"] = SHIM
        env["GPUFRAC_CONFIG"] = self.config
        env.update({k: str(v) for k, v in extra.items()})
        return env

    # -- running ----------------------------------------------------------
    def probe(self, *steps, via="direct", shim=True, env=None, check=True):
        e = env or (self.shim_env() if shim else dict(self.env))
        r = subprocess.run([PROBE, "--via", via] + [str(s) for s in steps], env=e,
                           capture_output=True, text=True, timeout=120)
        if check and r.returncode != 0:
            self.fail("shimprobe %s failed (%d): %s" % (steps, r.returncode, r.stderr))
        return r

    def probe_lines(self, *steps, env=None, wrap=(), program=PROBE):
        """Starts a probe (or another program printing `holding=` when it
        holds) that ends in `hold N` (under the command wrap, if given);
        returns once it holds, with the lines it printed until then."""
        p = subprocess.Popen(list(wrap) + [program] + [str(s) for s in steps],
                             env=env or self.shim_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        out = []
        for line in p.stdout:
            out.append(line)
            if line.startswith("holding="):
                break
        return p, out

    def probe_bg(self, *steps, env=None, wrap=()):
        """probe_lines, what was printed as key=value."""
        p, out = self.probe_lines(*steps, env=env, wrap=wrap)
        return p, kv("".join(out))

    def dump(self):
        r = subprocess.run([LEDGERTOOL, "dump", self.ledger], capture_output=True, text=True,
                           check=True)
        return {k: (int(v) if v.isdigit() else v) for k, v in kv(r.stdout).items()}

    def driver(self):
        """gpusim's own count (what NVML reports): dev<i>_used, dev<i>_peak."""
        r = subprocess.run([GPUSIMTOOL, "dump", self.env["GPUSIM_STATE"]], capture_output=True,
                           text=True, check=True)
        return {k: int(v) for k, v in kv(r.stdout).items()}

    def wait_for(self, pred, what, seconds=20):
        """Bounded wait for a state (not a timing assertion): returns pred's
        first true value, fails the test after `seconds`."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            v = pred()
            if v:
                return v
            time.sleep(0.05)
        self.fail("gave up waiting for " + what)

    def kill(self, p, sig=signal.SIGKILL):
        p.send_signal(sig)
        p.wait()
