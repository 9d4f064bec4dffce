# SPDX-License-Identifier: Apache-2.0
"""A host for the engine suites: gpusim (the GPU), the real gpufracd on a
private state dir, the probe image built offline with umoci (as tests/cri
builds it), and gpufrac-runtime installed into the engine by `gpufrac
install` under a root the test owns. Nothing here reads or writes the host's
/etc/docker, /etc/containers or /run/gpufrac, or talks to a system engine.

What stands in for the host's files: the runtime entry the installer writes
names <tmp>/bin/gpufrac-runtime[-<real>], a script that sets the settings a
host keeps in /etc/gpufrac/runtime.conf (state dir, shim; Podman's conmon
hands the runtime an empty environment) and gpusim's environment, saves the
config.json the engine handed over (to compare the bundle with afterwards),
then execs the build's gpufrac-runtime under the name it was called by."""
import json
import os
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cri"))
import crinode  # noqa: E402
from crinode import AGENT, BUILD, GPUSIM, PROBE, RUNTIME, wait_for  # noqa: E402,F401

CLI = os.path.join(BUILD, "bin", "gpufrac")
Gi, Mi = 1 << 30, 1 << 20
DEVICES = "4Gi"
PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def which(name):
    return shutil.which(name, path=PATH)


def base_skip(engine_bins):
    """Why the suite cannot run here, or None."""
    if os.geteuid() != 0:
        return "the engine tests need root (rootful dockerd and podman)"
    for name in engine_bins + ["runc", "umoci", "skopeo"]:
        if not which(name):
            return "%s is not installed (scripts/deps.sh all installs docker.io, podman, " \
                   "crun, skopeo, umoci)" % name
    for p in (RUNTIME, AGENT, PROBE, CLI, crinode.PAUSE):
        if not os.path.exists(p):
            return "%s is not built" % p
    if not crinode.BUSYBOX:
        return "busybox-static is not installed"
    return None


WRAPPER = """#!/bin/bash
# the test's stand-in for /etc/gpufrac/runtime.conf and the host's GPU
export PATH=%(path)s GPUFRAC_STATE_DIR=%(state)s GPUFRAC_SHIM=%(shim)s
export GPUFRAC_RUNTIME_CONF=/nonexistent LD_LIBRARY_PATH=%(gpusim)s
export GPUSIM_DEVICES=%(devices)s GPUSIM_STATE=%(gpusim_state)s GPUSIM_CTX_OVERHEAD=0
export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1
unset GPUFRAC_REAL_RUNTIME
echo "$0 $*" >> %(saved)s/args.log
verb= prev=
for a in "$@"; do
  case "$a" in create|run) [ -z "$verb" ] && verb=$a;; esac
  if [ -n "$verb" ] && { [ "$prev" = --bundle ] || [ "$prev" = -b ]; }; then bundle=$a; fi
  prev=$a
done
if [ -n "$bundle" ]; then cp "$bundle/config.json" "%(saved)s/${@: -1}.json"; fi
exec -a "$0" %(runtime)s "$@"
"""


class EngineCase(unittest.TestCase):
    """A case on the suite's host (cls.host): it starts with no fraction held
    and gpufracd running."""

    host = None

    def setUp(self):
        wait_for(lambda: self.host.fractions() == [], "the previous test's fractions to go", 60)
        if self.host.agent is None or self.host.agent.poll() is not None:
            self.host.start_agent()


class Host(crinode.AgentHost):
    """gpusim, gpufracd and the images, shared by a suite."""

    def __init__(self, prefix):
        import uuid
        # lower-case letters and digits only (not $TMPDIR's): podman names an oci: image after
        # its path
        self.tmp = "/tmp/gpufrac-engines-" + uuid.uuid4().hex[:10]
        os.mkdir(self.tmp, 0o700)
        os.chmod(self.tmp, 0o755)
        self.gpusim_dir = os.path.join(self.tmp, "gpusim")
        self.state = os.path.join(self.tmp, "gpufrac")
        self.bin = os.path.join(self.tmp, "bin")
        self.saved = os.path.join(self.tmp, "saved")
        self.root = os.path.join(self.tmp, "root")  # the installer's /
        for d in (self.gpusim_dir, self.state, self.bin, self.saved, self.root):
            os.makedirs(d)
        self.gpusim_state = os.path.join(self.gpusim_dir, "state")
        self.env = crinode.node_env(self.gpusim_state, DEVICES, self.state)
        self.env.pop("GPUFRAC_REAL_RUNTIME")
        self.env["PATH"] = PATH
        self.agent = None
        self.layout = self.build_layout()
        subprocess.run([PROBE, "info"], env=self.env, check=True, capture_output=True)
        self.start_agent()

    def build_layout(self):
        crinode.build_images(self.tmp)
        return os.path.join(self.tmp, "oci")

    def wrapper(self, name):
        """<bin>/<name>: the script the engine's runtime entry names."""
        path = os.path.join(self.bin, name)
        with open(path, "w") as f:
            f.write(WRAPPER % {"path": PATH, "state": self.state, "shim": crinode.SHIM,
                               "gpusim": GPUSIM, "devices": DEVICES,
                               "gpusim_state": self.gpusim_state, "saved": self.saved,
                               "runtime": os.path.realpath(RUNTIME)})
        os.chmod(path, 0o755)
        return path

    def install(self, engine, *flags):
        """`gpufrac install ENGINE --root <root>`, naming the wrapper script."""
        r = subprocess.run([CLI, "install", engine, "--root", self.root, "--runtime",
                            os.path.join(self.bin, "gpufrac-runtime"), *flags],
                           capture_output=True, text=True, env=self.env)
        if r.returncode != 0:
            raise AssertionError("gpufrac install %s failed: %s" % (engine, r.stderr))
        return r.stdout

    def run_args(self, image, flags, extra=(), name=None):
        """`run` through the gpufrac runtime with gpusim's state shared, then
        the engine's own request flags (extra), the name, flags and image."""
        out = ["run", "--runtime", "gpufrac", "-v", "%s:%s" % (self.gpusim_dir, self.gpusim_dir)]
        for e in container_env() + ["GPUSIM_STATE=" + self.gpusim_state]:
            out += ["-e", e]
        out += list(extra)
        if name:
            out += ["--name", name]
        return out + list(flags) + [image]

    def wait_released(self, what, timeout=60):
        wait_for(lambda: self.fractions() == [] and self.container_entries() == [], what,
                 timeout)

    def status_json(self):
        r = subprocess.run([CLI, "status", "--json", "--state-dir", self.state],
                           capture_output=True, text=True, env=self.env)
        if r.returncode != 0:
            raise AssertionError("gpufrac status failed: " + r.stderr)
        return json.loads(r.stdout)

    def status_text(self):
        env = dict(self.env, COLUMNS="160")
        return subprocess.run([CLI, "status", "--state-dir", self.state], capture_output=True,
                              text=True, env=env).stdout

    def gpufrac_run(self, *args):
        """A `gpufrac run` of the host (the agent's other kind of fraction)."""
        return subprocess.Popen([CLI, "run", "--state-dir", self.state, *args],
                                env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def saved_config(self, cid):
        with open(os.path.join(self.saved, cid + ".json"), "rb") as f:
            return f.read()

    def close(self):
        self.stop_agent()
        unmount_under(self.tmp)
        subprocess.run(["rm", "-rf", self.tmp], capture_output=True)


def unmount_under(path):
    """Every mount at or under path, deepest first (dockerd binds its data-root onto
    itself and leaves it when it stops)."""
    with open("/proc/self/mountinfo") as f:
        points = [ln.split()[4].encode().decode("unicode_escape") for ln in f]
    for p in sorted({p for p in points if p == path or p.startswith(path + "/")},
                    key=len, reverse=True):
        subprocess.run(["umount", "-l", p], capture_output=True)


def hide_var_lib(argv):
    """argv in a mount namespace of its own whose /var/lib is an empty tmpfs: as root,
    skopeo and podman's image copies keep a blob cache in /var/lib/containers/cache,
    which is the host's. Everything else they write is under the test's directories."""
    return [which("unshare"), "--mount", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs tmpfs /var/lib && exec "$@"', "sh", *argv]


def docker_archive(host, tag):
    """skopeo copy oci:<layout>:probe docker-archive:<tar>:<tag>, for docker load."""
    tar = os.path.join(host.tmp, "probe.tar")
    subprocess.run(hide_var_lib([which("skopeo"), "copy", "oci:%s:probe" % host.layout,
                                 "docker-archive:%s:%s" % (tar, tag)]),
                   check=True, capture_output=True, env={"PATH": PATH, "HOME": host.tmp})
    return tar


def container_env():
    """What a container needs to find gpusim (mounted at the same path)."""
    return ["PATH=/bin:/usr/bin", "LD_LIBRARY_PATH=/usr/lib/gpusim", "GPUSIM_DEVICES=" + DEVICES,
            "GPUSIM_CTX_OVERHEAD=0"]


def kv(text):
    out = {}
    for tok in text.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            out[k] = v
    return out


def allocs(text):
    return [ln for ln in text.splitlines() if ln.startswith("alloc=")]
