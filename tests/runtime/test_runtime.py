# SPDX-License-Identifier: Apache-2.0
"""gpufrac-runtime driven as containerd's runc shim drives its BinaryName:
`gpufrac-runtime --root R --log L --log-format json create --bundle B ID`,
then start, state, delete, against Debian's real runc, with gpufracd (or,
while gpufracd lacks admit/attach/release, tests/runtime/stub_agent.py) and
gpusim shared between host and container through one bind-mounted state
file. Needs root and runc; skips with a message otherwise."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
from harness import BUILD, GPUSIM, LEDGERTOOL, PROBE, SHIM, Gi, Mi, SimTestCase, kv  # noqa: E402
from stub_agent import StubAgent  # noqa: E402

RUNTIME = os.path.join(BUILD, "bin", "gpufrac-runtime")
AGENT = os.path.join(BUILD, "bin", "gpufracd")
RUNC = shutil.which("runc") or shutil.which("runc", path="/usr/sbin:/sbin")
BUSYBOX = next((p for p in ("/bin/busybox", "/usr/bin/busybox") if os.path.exists(p)), None)
NV = "nvidia.com/container."
CRI = "io.kubernetes.cri."
SANDBOX = "5f2c8e1d9a7b3c4d6e8f0a1b2c3d4e5f"


def skip_reason():
    if os.geteuid() != 0:
        return "runtime tests need root (runc creates namespaces, cgroups and mounts)"
    if not RUNC:
        return "runc is not installed (Debian: apt-get install runc)"
    if not BUSYBOX:
        return "busybox is not installed (Debian: apt-get install busybox-static)"
    for p in (RUNTIME, PROBE, SHIM, LEDGERTOOL):
        if not os.path.exists(p):
            return "%s is not built" % p
    return None


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def libs_of(path):
    """Paths of the shared libraries ldd lists for path (and the loader)."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    found = []
    for ln in out.splitlines():
        ln = ln.strip()
        if "=>" in ln:
            p = ln.split("=>", 1)[1].split("(")[0].strip()
        else:
            p = ln.split("(")[0].strip()
        if p.startswith("/"):
            found.append(p)
    return found


class RuntimeTestCase(SimTestCase):
    devices = "4Gi"

    def setUp(self):
        super().setUp()
        self.state = os.path.join(self.tmp, "state")
        self.root = os.path.join(self.tmp, "runc-root")
        self.log = os.path.join(self.tmp, "runc-log.json")
        self.env.update({"GPUFRAC_STATE_DIR": self.state, "GPUFRAC_RUNTIME_CONF": "/nonexistent",
                         "GPUFRAC_REAL_RUNTIME": RUNC})
        # the simulated GPU's state exists before it is bind-mounted
        subprocess.run([PROBE, "info"], env=self.env, check=True, capture_output=True)
        self.containers = []
        self.agent = self.stub = None
        self.start_agent()

    def tearDown(self):
        for cid in self.containers:
            subprocess.run([RUNC, "--root", self.root, "delete", "--force", cid],
                           capture_output=True)
        if self.agent and self.agent.poll() is None:
            self.agent.terminate()
            self.agent.wait(timeout=30)
        if self.stub:
            self.stub.stop()
        super().tearDown()

    # -- the agent ---------------------------------------------------------
    def start_agent(self):
        os.makedirs(self.state, exist_ok=True)
        log = open(os.path.join(self.tmp, "agent.log"), "a")
        self.agent = subprocess.Popen(
            [AGENT, "--state-dir", self.state, "--metrics-listen", "off",
             "--watchdog-period-ms", "100"], env=self.env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.wait_for(lambda: "ready:" in read(os.path.join(self.tmp, "agent.log"))
                      or self.agent.poll() is not None, "gpufracd to be ready")
        self.assertIsNone(self.agent.poll(), "gpufracd did not start:\n"
                          + read(os.path.join(self.tmp, "agent.log")))
        if not os.environ.get("GPUFRAC_TEST_STUB_AGENT"):
            self.assertNotIn("unknown verb", self.ask("gpufrac/1 admit"))
            self.real_agent = True
            return
        # GPUFRAC_TEST_STUB_AGENT: the stand-in serves the wrapper
        if self.agent.poll() is None:
            self.agent.terminate()
            self.agent.wait(timeout=30)
        self.agent = None
        self.real_agent = False
        uuid = kv(subprocess.run([PROBE, "uuid"], env=self.env, capture_output=True,
                                 text=True).stdout)["uuid"]
        self.stub = StubAgent(self.state, LEDGERTOOL, 4 * Gi, uuid)

    def ask(self, text):
        import socket
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(10)
        s.connect(os.path.join(self.state, "agent.sock"))
        s.send(text.encode())
        r = s.recv(8192).decode()
        s.close()
        return r

    def fractions(self):
        d = os.path.join(self.state, "fractions")
        return sorted(n for n in os.listdir(d) if not n.startswith(".")) if os.path.isdir(d) else []

    # -- bundles -----------------------------------------------------------
    def bundle(self, args, annotations=None, env=(), name="b"):
        b = os.path.join(self.tmp, name)
        rootfs = os.path.join(b, "rootfs")
        for d in ("bin", "usr/bin", "usr/lib/gpusim", "etc", "tmp"):
            os.makedirs(os.path.join(rootfs, d), exist_ok=True)
        shutil.copy(BUSYBOX, os.path.join(rootfs, "bin", "busybox"))
        for applet in ("sh", "grep", "sleep", "cat", "echo"):
            os.symlink("busybox", os.path.join(rootfs, "bin", applet))
        shutil.copy(PROBE, os.path.join(rootfs, "usr", "bin", "shimprobe"))
        for lib in ("libcuda.so.1", "libnvidia-ml.so.1"):
            shutil.copy(os.path.join(GPUSIM, lib), os.path.join(rootfs, "usr/lib/gpusim", lib))
        for so in set(libs_of(PROBE) + libs_of(SHIM)):
            if so.startswith(GPUSIM):
                continue
            dst = os.path.join(rootfs, so.lstrip("/"))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy(so, dst)
        subprocess.run([RUNC, "spec", "--rootless"], cwd=b, check=True)
        with open(os.path.join(b, "config.json")) as f:
            spec = json.load(f)
        spec["process"]["terminal"] = False
        spec["process"]["args"] = list(args)
        spec["process"]["env"] = [
            "PATH=/bin:/usr/bin", "LD_LIBRARY_PATH=/usr/lib/gpusim",
            "GPUSIM_DEVICES=" + self.devices, "GPUSIM_STATE=" + self.env["GPUSIM_STATE"],
            "GPUSIM_CTX_OVERHEAD=0"] + list(env)
        # /tmp first: the simulated GPU's state (under the host's /tmp) goes on top
        spec["mounts"].append({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
                               "options": ["nosuid", "nodev"]})
        spec["mounts"].append({"destination": self.env["GPUSIM_STATE"], "type": "bind",
                               "source": self.env["GPUSIM_STATE"], "options": ["rbind", "rw"]})
        if annotations is not None:
            spec["annotations"] = annotations
        with open(os.path.join(b, "config.json"), "w") as f:
            json.dump(spec, f, indent="\t")
        return b

    def pod(self, container="main", **keys):
        """CRI identity of a container plus NvFractions keys for it."""
        a = {CRI + "container-type": "container", CRI + "container-name": container,
             CRI + "sandbox-namespace": "ml", CRI + "sandbox-name": "train-0",
             CRI + "sandbox-id": SANDBOX}
        for k, v in keys.items():
            a[NV + container + "." + k.replace("_", "-")] = v
        return a

    def spec_of(self, b):
        with open(os.path.join(b, "config.json")) as f:
            return json.load(f)

    # -- runc through the wrapper -----------------------------------------
    def wrapper(self, *args, out=None):
        cmd = [RUNTIME, "--root", self.root, "--log", self.log, "--log-format", "json", *args]
        if out:
            with open(out, "w") as f:
                return subprocess.run(cmd, env=self.env, stdout=f, stderr=subprocess.STDOUT,
                                      timeout=120)
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=120)

    def create(self, b, cid):
        out = os.path.join(self.tmp, cid + ".out")
        r = self.wrapper("create", "--bundle", b, cid, out=out)
        self.containers.append(cid)
        r.output = read(out)
        return r

    def status(self, cid):
        r = self.wrapper("state", cid)
        return json.loads(r.stdout)["status"] if r.returncode == 0 else None

    def run_container(self, b, cid):
        """create, start, wait until stopped, delete; returns the output."""
        r = self.create(b, cid)
        self.assertEqual(r.returncode, 0, r.output)
        self.assertEqual(self.status(cid), "created")
        r = self.wrapper("start", cid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.wait_for(lambda: self.status(cid) == "stopped", "the container to stop", 60)
        r = self.wrapper("delete", cid)
        self.assertEqual(r.returncode, 0, r.stderr)
        return read(os.path.join(self.tmp, cid + ".out"))

    def log_entries(self):
        if not os.path.exists(self.log):
            return []
        return [json.loads(ln) for ln in read(self.log).splitlines() if ln.startswith("{")]

    def log_errors(self):
        if not os.path.exists(self.log):
            return []
        lines = [json.loads(ln) for ln in read(self.log).splitlines() if ln.startswith("{")]
        return [e for e in lines if e.get("level") == "error"]


class FractionalContainerTest(RuntimeTestCase):
    def test_container_sees_its_limit_and_fails_past_it(self):
        b = self.bundle(["/usr/bin/shimprobe", "info", "alloc", "600Mi", "alloc", "600Mi",
                         "nvml"], self.pod(**{"gpu-memory.request": "1Gi"}))
        out = self.run_container(b, "frac1")
        got = kv(out)
        self.assertEqual(int(got["total"]), 1 * Gi, out)
        allocs = [ln for ln in out.splitlines() if ln.startswith("alloc=")]
        self.assertEqual(allocs, ["alloc=ok", "alloc=CUDA_ERROR_OUT_OF_MEMORY"], out)
        self.assertEqual(self.fractions(), [], "delete released the fraction")
        self.assertEqual(os.listdir(os.path.join(self.state, "containers")), [])

    def test_spec_gets_mounts_env_and_hooks(self):
        b = self.bundle(["/usr/bin/shimprobe", "info"],
                        self.pod(**{"gpu-memory.request": "1Gi", "gpu-memory.limit": "1536Mi"}),
                        env=["NVIDIA_GPU_MEMORY_LIMIT=99999", "CUDA_MPS_PIPE_DIRECTORY=/x"])
        r = self.create(b, "frac2")
        self.assertEqual(r.returncode, 0, r.output)
        spec = self.spec_of(b)
        env = spec["process"]["env"]
        self.assertIn("NVIDIA_GPU_MEMORY_REQUEST=1024", env)
        self.assertIn("NVIDIA_GPU_MEMORY_LIMIT=1536", env)
        self.assertEqual([e for e in env if e.startswith("NVIDIA_GPU_MEMORY_LIMIT=")],
                         ["NVIDIA_GPU_MEMORY_LIMIT=1536"])
        self.assertFalse([e for e in env if e.startswith("CUDA_MPS_")], env)
        vis = [e for e in env if e.startswith("NVIDIA_VISIBLE_DEVICES=GPU-")]
        self.assertEqual(len(vis), 1, env)
        dests = {m["destination"]: m for m in spec["mounts"]}
        for d in ("/usr/local/lib/gpufrac/libgpufrac.so", "/etc/ld.so.preload",
                  "/etc/gpufrac/fraction.conf"):
            self.assertIn("ro", dests[d]["options"], d)
        name = "k8s.%s.main" % SANDBOX[:12]
        self.assertEqual(self.fractions(), [name])
        # the fraction's own socket, not the agent's root-only one
        self.assertIn(os.path.join(self.state, "fractions", name, "agent.sock"), dests)
        self.assertNotIn(os.path.join(self.state, "agent.sock"), dests)
        self.assertEqual(spec["hooks"]["createRuntime"][-1]["args"][1:],
                         ["hook", "attach", name])
        self.assertEqual(spec["hooks"]["poststop"][-1]["args"][1:], ["hook", "release", name])
        self.assertEqual(spec["hooks"]["createRuntime"][-1]["path"], os.path.realpath(RUNTIME))
        entry = read(os.path.join(self.state, "containers", "frac2")).splitlines()
        self.assertEqual(entry[0], name)
        # then the env exec'd processes get (containerd's exec does not read config.json)
        self.assertIn("NVIDIA_GPU_MEMORY_LIMIT=1536", entry[1:])
        self.assertEqual(sorted(entry[1:]), sorted(e for e in env if e.split("=")[0] in (
            "NVIDIA_VISIBLE_DEVICES", "NVIDIA_GPU_MEMORY_REQUEST", "NVIDIA_GPU_MEMORY_LIMIT")))
        if not self.real_agent:
            attached = os.path.join(self.state, "fractions", name, "attached")
            self.assertTrue(os.path.exists(attached), "createRuntime hook attached the pid")
        self.assertEqual(self.wrapper("delete", "--force", "frac2").returncode, 0)
        self.assertEqual(self.fractions(), [])

    def test_the_rest_of_the_spec_is_kept_nvidias_hooks_included(self):
        # what docker run --gpus (or the NVIDIA Container Toolkit) puts in a spec: a prestart
        # hook and its env; plus an engine's own createRuntime hook, rlimits and annotations
        nv_hook = {"path": "/bin/true", "args": ["nvidia-container-runtime-hook", "prestart"]}
        own_hook = {"path": "/bin/true", "args": ["true", "engine's own"]}
        b = self.bundle(["/usr/bin/shimprobe", "info"], self.pod(**{"gpu-memory.request": "1Gi"}),
                        env=["NVIDIA_DRIVER_CAPABILITIES=compute,utility", "KEEP=1"])
        spec = self.spec_of(b)
        spec["hooks"] = {"prestart": [nv_hook], "createRuntime": [own_hook]}
        spec["process"]["rlimits"] = [{"type": "RLIMIT_NOFILE", "hard": 4096, "soft": 1024}]
        spec["annotations"]["org.example/kept"] = "yes"
        with open(os.path.join(b, "config.json"), "w") as f:
            json.dump(spec, f)
        r = self.create(b, "keep")
        self.assertEqual(r.returncode, 0, r.output)
        after = self.spec_of(b)
        self.assertEqual(after["hooks"]["prestart"], [nv_hook])
        self.assertEqual(after["hooks"]["createRuntime"][0], own_hook)
        self.assertEqual(len(after["hooks"]["createRuntime"]), 2)
        for key in set(spec) - {"process", "mounts", "hooks"}:
            self.assertEqual(after[key], spec[key], key)
        for key in set(spec["process"]) - {"env"}:
            self.assertEqual(after["process"][key], spec["process"][key], key)
        for e in ("NVIDIA_DRIVER_CAPABILITIES=compute,utility", "KEEP=1"):
            self.assertIn(e, after["process"]["env"])
        for m in spec["mounts"]:
            self.assertIn(m, after["mounts"])
        self.assertEqual(self.wrapper("delete", "--force", "keep").returncode, 0)

    def test_two_processes_share_the_limit(self):
        script = ("shimprobe alloc 700Mi hold 30 > /tmp/a & "
                  "while ! grep -q holding /tmp/a; do sleep 0.1; done; "
                  "shimprobe info alloc 600Mi alloc 300Mi; cat /tmp/a; kill %1")
        b = self.bundle(["/bin/sh", "-c", script], self.pod(**{"gpu-memory.request": "1Gi"}))
        out = self.run_container(b, "frac3")
        allocs = [ln for ln in out.splitlines() if ln.startswith("alloc=")]
        # 700Mi held by the first: the second gets 300Mi, not 600Mi
        self.assertEqual(allocs, ["alloc=CUDA_ERROR_OUT_OF_MEMORY", "alloc=ok", "alloc=ok"], out)
        self.assertIn("free=%d" % (324 * Mi), out)

    def test_container_cannot_raise_its_limit(self):
        b = self.bundle(
            ["/usr/bin/shimprobe", "info", "alloc", "2Gi", "alloc", "900Mi"],
            self.pod(**{"gpu-memory.request": "1Gi"}),
            env=["GPUFRAC_MEMORY_LIMIT=3Gi", "LD_PRELOAD=/usr/lib/gpusim/libnvidia-ml.so.1",
                 "GPUFRAC_CONFIG=/etc/mine.conf"])
        rootfs = os.path.join(b, "rootfs")
        big = ("version=1\nname=mine\nledger=/etc/mine.ledger\nmode=time-slicing\n"
               "compute_percent=100\ndevice=*,3221225472,3221225472\n")
        subprocess.run([LEDGERTOOL, "create", os.path.join(rootfs, "etc/mine.ledger"), "mine"],
                       check=True)
        with open(os.path.join(rootfs, "etc/mine.conf"), "w") as f:
            f.write(big.replace("/etc/mine.ledger", "/etc/mine.ledger"))
        os.makedirs(os.path.join(rootfs, "etc/gpufrac"))
        with open(os.path.join(rootfs, "etc/gpufrac/fraction.conf"), "w") as f:
            f.write(big)  # an image that ships its own "trusted" config
        with open(os.path.join(rootfs, "etc/ld.so.preload"), "w") as f:
            f.write("\n")  # and an empty preload list
        out = self.run_container(b, "frac4")
        got = kv(out)
        self.assertEqual(int(got["total"]), 1 * Gi, out)
        allocs = [ln for ln in out.splitlines() if ln.startswith("alloc=")]
        self.assertEqual(allocs, ["alloc=CUDA_ERROR_OUT_OF_MEMORY", "alloc=ok"], out)

    def test_agent_refusal_fails_create_and_leaves_nothing(self):
        b1 = self.bundle(["/usr/bin/shimprobe", "info"],
                         self.pod(**{"gpu-memory.request": "3Gi"}), name="b1")
        self.assertEqual(self.create(b1, "big1").returncode, 0)
        a2 = self.pod(container="other", **{"gpu-memory.request": "3Gi"})
        b2 = self.bundle(["/usr/bin/shimprobe", "info"], a2, name="b2")
        before = read(os.path.join(b2, "config.json"), "rb")
        r = self.create(b2, "big2")
        self.assertEqual(r.returncode, 1, r.output)
        self.assertIn("gpufracd", r.output)
        self.assertIn("not guaranteed", self.log_errors()[-1]["msg"])
        self.assertEqual(self.fractions(), ["k8s.%s.main" % SANDBOX[:12]])
        self.assertEqual(read(os.path.join(b2, "config.json"), "rb"), before)
        self.assertFalse(os.path.exists(os.path.join(self.state, "containers", "big2")))


class PassThroughTest(RuntimeTestCase):
    def assert_untouched(self, annotations, cid):
        b = self.bundle(["/usr/bin/shimprobe", "info"], annotations)
        before = read(os.path.join(b, "config.json"), "rb")
        r = self.create(b, cid)
        self.assertEqual(r.returncode, 0, r.output)
        self.assertEqual(read(os.path.join(b, "config.json"), "rb"), before)
        self.assertEqual(self.fractions(), [])
        self.assertEqual(self.wrapper("start", cid).returncode, 0)
        self.wait_for(lambda: self.status(cid) == "stopped", "the container to stop", 60)
        out = read(os.path.join(self.tmp, cid + ".out"))
        self.assertEqual(int(kv(out)["total"]), 4 * Gi, out)
        self.assertEqual(self.wrapper("delete", cid).returncode, 0)

    def test_plain_container_is_byte_identical(self):
        self.assert_untouched(None, "plain")

    def test_sandbox_is_passed_through(self):
        a = self.pod(**{"gpu-memory.request": "1Gi"})
        a[CRI + "container-type"] = "sandbox"
        self.assert_untouched(a, "sandbox")

    def test_prefix_trap_other_containers_keys_do_not_apply(self):
        a = self.pod(container="trainer")
        a[NV + "trainer-2.gpu-memory.request"] = "1Gi"
        self.assert_untouched(a, "trainer")

    def test_kai_pod_level_forms_need_nvfractions(self):
        # gpu-fraction is KAI's pod-level form (the binder adds gpus.devices):
        # honoured only with NvFractions compatibility on (the chart's
        # nvFractions.enabled -> nvfractions=1). Off, main's own gpus.devices
        # key asks no memory: refused, never started with the whole GPU
        a = self.pod(**{"gpus.devices": "0"})
        a["gpu-fraction"] = "0.25"
        self.env["GPUFRAC_NVFRACTIONS"] = "0"
        b = self.bundle(["/usr/bin/shimprobe", "info"], dict(a), name="b1")
        before = read(os.path.join(b, "config.json"), "rb")
        r = self.create(b, "kai-off")
        self.assertEqual(r.returncode, 1, r.output)
        self.assertIn(NV + "main.gpus.devices", r.output)
        self.assertIn("nvfractions=1", r.output)
        self.assertEqual(read(os.path.join(b, "config.json"), "rb"), before)
        self.assertEqual(self.fractions(), [])
        self.assertIsNone(self.status("kai-off"))
        self.env["GPUFRAC_NVFRACTIONS"] = "1"
        b = self.bundle(["/usr/bin/shimprobe", "info"], a, name="b2")
        out = self.run_container(b, "kai-on")
        self.assertEqual(int(kv(out)["total"]), 1 * Gi, out)

    def test_other_verbs_pass_through(self):
        r = self.wrapper("--version")
        self.assertEqual(r.returncode, 0)
        self.assertIn("runc version", r.stdout)
        r = self.wrapper("state", "nosuch")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("does not exist", r.stderr)


class MalformedAnnotationTest(RuntimeTestCase):
    def refused(self, annotations, container, must_name):
        b = self.bundle(["/usr/bin/shimprobe", "info"], annotations)
        before = read(os.path.join(b, "config.json"), "rb")
        r = self.create(b, "bad")
        self.assertEqual(r.returncode, 1, r.output)
        errs = self.log_errors()
        self.assertTrue(errs, "an error line in the --log file")
        self.assertIn("time", errs[-1])
        for s in must_name:
            self.assertIn(s, r.output)
            self.assertIn(s, errs[-1]["msg"])
        self.assertEqual(self.fractions(), [])
        self.assertEqual(read(os.path.join(b, "config.json"), "rb"), before)
        self.assertIsNone(self.status("bad"), "runc never ran")
        return errs[-1]["msg"]

    def test_memory_with_a_wrong_unit(self):
        self.refused(self.pod(**{"gpu-memory.request": "1gb"}), "main",
                     [NV + "main.gpu-memory.request", "1gb"])

    def test_unknown_compute_mode(self):
        msg = self.refused(self.pod(**{"gpu-memory.request": "1Gi", "gpu-compute.mode": "fast"}),
                           "main", [NV + "main.gpu-compute.mode", "fast"])
        self.assertIn("time-slicing", msg)

    def test_container_name_prefix_trap(self):
        a = self.pod(container="trainer-2", **{"gpu-memory.request": "1Gi"})
        a["gpu-fraction-container-name"] = "trainer"
        self.refused(a, "trainer-2", ["gpu-fraction-container-name", "trainer-2"])

    def test_request_larger_than_the_gpu(self):
        self.refused(self.pod(**{"gpu-memory.request": "5Gi"}), "main", ["5"])


class ReleaseTest(RuntimeTestCase):
    def start_holding(self, cid):
        b = self.bundle(["/usr/bin/shimprobe", "alloc", "100Mi", "hold", "60"],
                        self.pod(container=cid, **{"gpu-memory.request": "1Gi"}), name=cid)
        self.assertEqual(self.create(b, cid).returncode, 0)
        self.assertEqual(self.wrapper("start", cid).returncode, 0)
        self.wait_for(lambda: "holding=" in read(os.path.join(self.tmp, cid + ".out")),
                      "the container to hold memory")
        # host and container share one simulated GPU
        host = kv(subprocess.run([PROBE, "info"], env=self.env, capture_output=True,
                                 text=True).stdout)
        self.assertEqual(int(host["free"]), 4 * Gi - 100 * Mi)
        return "k8s.%s.%s" % (SANDBOX[:12], cid)

    def lose_runc_state(self, cid):
        """The container dies and runc forgets it: no poststop hook ever runs."""
        st = json.loads(self.wrapper("state", cid).stdout)
        os.kill(st["pid"], signal.SIGKILL)
        self.wait_for(lambda: not os.path.exists("/proc/%d" % st["pid"]), "the init to die")
        shutil.rmtree(os.path.join(self.root, cid))

    def test_delete_of_a_running_container_releases(self):
        name = self.start_holding("run1")
        self.assertEqual(self.fractions(), [name])
        r = self.wrapper("delete", "--force", "run1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.fractions(), [])
        self.assertFalse(os.path.exists(os.path.join(self.state, "containers", "run1")))

    def test_delete_releases_when_runc_lost_the_container(self):
        self.start_holding("lost1")
        self.lose_runc_state("lost1")
        self.wrapper("delete", "lost1")
        self.assertEqual(self.fractions(), [])
        self.assertFalse(os.path.exists(os.path.join(self.state, "containers", "lost1")))

    def test_delete_with_a_hung_agent_does_not_wait_on_it(self):
        if not self.real_agent:
            self.skipTest("gpufracd does not serve admit/attach yet (stand-in agent in use)")
        name = self.start_holding("hung1")
        os.kill(self.agent.pid, signal.SIGSTOP)  # alive, its socket accepting, never answering
        try:
            r = self.wrapper("delete", "--force", "hung1")
        finally:
            os.kill(self.agent.pid, signal.SIGCONT)
        self.assertEqual(r.returncode, 0, r.stderr)
        # the release's short limit (not the 20 s of admit) is what it waited
        warn = [e.get("msg", "") for e in self.log_entries() if name in e.get("msg", "")]
        self.assertTrue(any("did not answer within 2 s" in w for w in warn), warn)
        self.assertFalse(os.path.exists(os.path.join(self.state, "containers", "hung1")))
        self.wait_for(lambda: self.fractions() == [], "gpufracd to remove the dead fraction", 30)

    def test_agent_reconciles_when_nothing_releases(self):
        if not self.real_agent:
            self.skipTest("gpufracd does not serve admit/attach yet (stand-in agent in use)")
        self.start_holding("gone1")
        self.lose_runc_state("gone1")
        self.wait_for(lambda: self.fractions() == [], "gpufracd to remove the dead fraction", 30)


if __name__ == "__main__":
    if skip_reason():
        print("runtime.runc: skipped: " + skip_reason())
        sys.exit(77)
    cases.main(verbosity=2)
