# SPDX-License-Identifier: Apache-2.0
"""A node for the CRI tests: real containerd (Debian's package) on a private
socket with private root/state dirs, gpufracd, gpusim, and a CRI v1 client
that calls containerd as the kubelet does. Nothing here touches a system
containerd (/run/containerd/containerd.sock, /var/lib/containerd) or /etc.

The client's messages come from cri_subset.proto (a subset of the published
runtime.v1 API), compiled at run time with Debian's python3-grpc-tools."""
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import BUILD, GPUSIM, PROBE, SHIM  # noqa: E402

RUNTIME = os.path.join(BUILD, "bin", "gpufrac-runtime")
AGENT = os.path.join(BUILD, "bin", "gpufracd")
PAUSE = os.path.join(BUILD, "tests", "cri_pause")
MPS_FAKE = os.path.join(HERE, "..", "fakes", "nvidia-cuda-mps-control")


def which(name):
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")


CONTAINERD, CTR, RUNC, UMOCI = (which(n) for n in ("containerd", "ctr", "runc", "umoci"))
SHIM_V2 = which("containerd-shim-runc-v2")
BUSYBOX = next((p for p in ("/bin/busybox", "/usr/bin/busybox") if os.path.exists(p)), None)
IMAGE = "localhost/gpufrac-test/probe:1"
PAUSE_IMAGE = "localhost/gpufrac-test/pause:1"
Gi, Mi = 1 << 30, 1 << 20


def skip_reason():
    """Why containerd cannot run here, or None."""
    if os.geteuid() != 0:
        return "the CRI tests need root (containerd and runc create namespaces, cgroups, mounts)"
    for name, path in (("containerd", CONTAINERD), ("ctr", CTR), ("containerd-shim-runc-v2",
                       SHIM_V2), ("runc", RUNC), ("umoci", UMOCI), ("busybox", BUSYBOX)):
        if not path:
            return "%s is not installed (scripts/deps.sh installs containerd, runc, umoci, " \
                   "busybox-static)" % name
    try:
        import grpc  # noqa: F401
        import grpc_tools  # noqa: F401
    except ImportError:
        return "python3-grpcio / python3-grpc-tools are not installed (scripts/deps.sh)"
    for p in (RUNTIME, AGENT, PROBE, SHIM, PAUSE):
        if not os.path.exists(p):
            return "%s is not built" % p
    return None


def libs_of(path):
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    found = []
    for ln in out.splitlines():
        ln = ln.strip()
        p = (ln.split("=>", 1)[1] if "=>" in ln else ln).split("(")[0].strip()
        if p.startswith("/"):
            found.append(p)
    return found


def load_cri(tmp):
    """Compiles cri_subset.proto into tmp and imports it."""
    out = os.path.join(tmp, "cri_gen")
    os.makedirs(out, exist_ok=True)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + HERE,
                    "--python_out=" + out, "--grpc_python_out=" + out,
                    os.path.join(HERE, "cri_subset.proto")], check=True)
    sys.path.insert(0, out)
    return importlib.import_module("cri_subset_pb2"), importlib.import_module(
        "cri_subset_pb2_grpc")


def build_images(tmp):
    """An OCI layout (umoci) with the probe image (busybox-static, shimprobe,
    its libraries, gpusim) and the pause image, as a tar for ctr import."""
    layout = os.path.join(tmp, "oci")
    files = os.path.join(tmp, "rootfs")
    for d in ("bin", "usr/bin", "usr/lib/gpusim", "etc", "tmp"):
        os.makedirs(os.path.join(files, d), exist_ok=True)
    shutil.copy(BUSYBOX, os.path.join(files, "bin", "busybox"))
    for applet in ("sh", "grep", "sleep", "cat", "echo", "env", "ls", "kill", "true"):
        os.symlink("busybox", os.path.join(files, "bin", applet))
    shutil.copy(PROBE, os.path.join(files, "usr/bin/shimprobe"))
    for lib in ("libcuda.so.1", "libnvidia-ml.so.1"):
        shutil.copy(os.path.join(GPUSIM, lib), os.path.join(files, "usr/lib/gpusim", lib))
    for so in set(libs_of(PROBE) + libs_of(SHIM)):
        if so.startswith(GPUSIM):
            continue
        dst = os.path.join(files, so.lstrip("/"))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy(so, dst)
    run = lambda *a: subprocess.run([UMOCI, *a], check=True, capture_output=True)  # noqa: E731
    run("init", "--layout", layout)
    run("new", "--image", layout + ":probe")
    for name in sorted(os.listdir(files)):
        run("insert", "--image", layout + ":probe", os.path.join(files, name), "/" + name)
    run("config", "--image", layout + ":probe", "--config.env", "PATH=/bin:/usr/bin")
    run("new", "--image", layout + ":pause")
    run("insert", "--image", layout + ":pause", PAUSE, "/pause")
    run("config", "--image", layout + ":pause", "--config.entrypoint", "/pause")
    tar = os.path.join(tmp, "images.tar")
    subprocess.run(["tar", "-C", layout, "-cf", tar, "."], check=True)
    return tar


def wait_for(cond, what, timeout=60):
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.1)


class Containerd:
    """containerd with its own config, root, state and sockets under d."""

    def __init__(self, d, config_text, env, images_tar, pb=None):
        self.d = d
        self.sock = os.path.join(d, "containerd.sock")
        self.config = os.path.join(d, "config.toml")
        self.log_path = os.path.join(d, "containerd.log")
        self.env = env
        os.makedirs(d, exist_ok=True)
        with open(self.config, "w") as f:
            f.write(config_text)
        self.proc = None
        self.images_tar = images_tar

    def start(self):
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            [CONTAINERD, "--config", self.config, "--root", os.path.join(self.d, "root"),
             "--state", os.path.join(self.d, "state"), "--address", self.sock],
            env=self.env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        wait_for(lambda: os.path.exists(self.sock) or self.proc.poll() is not None,
                 "containerd's socket")
        if self.proc.poll() is not None:
            raise AssertionError("containerd exited: " + self.log())
        wait_for(lambda: subprocess.run([CTR, "--address", self.sock, "version"],
                                        capture_output=True).returncode == 0, "containerd")

    def import_images(self):
        subprocess.run([CTR, "--address", self.sock, "-n", "k8s.io", "images", "import",
                        "--snapshotter", snapshotter(self.d),
                        "--base-name", "localhost/gpufrac-test/img", self.images_tar],
                       check=True, capture_output=True)
        for tag, name in (("probe", IMAGE), ("pause", PAUSE_IMAGE)):
            subprocess.run([CTR, "--address", self.sock, "-n", "k8s.io", "images", "tag",
                            "--force", "localhost/gpufrac-test/img:" + tag, name],
                           check=True, capture_output=True)

    def tag(self, src, dst):
        subprocess.run([CTR, "--address", self.sock, "-n", "k8s.io", "images", "tag", "--force",
                        src, dst], check=True, capture_output=True)

    def shim_pids(self, *args):
        """The runc shims this containerd started (whose argv also has args)."""
        want = [a.encode() for a in (self.sock,) + args]
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv[0].endswith(b"containerd-shim-runc-v2") and all(w in argv for w in want):
                yield int(p)

    def kill_shims(self):
        """Shims this containerd started that outlived it (a failed test): by pid."""
        for pid in self.shim_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def teardown(self):
        """Stopped, the shims it left (a failed test) killed, its root's mounts gone."""
        self.stop()
        self.kill_shims()
        subprocess.run(["umount", "-R", "-l", os.path.join(self.d, "root")],
                       capture_output=True)

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def spec(self, cid):
        """containerd's own copy of a container's OCI spec."""
        r = subprocess.run([CTR, "--address", self.sock, "-n", "k8s.io", "containers", "info",
                            cid], check=True, capture_output=True, text=True)
        return json.loads(r.stdout, object_pairs_hook=dict)["Spec"]

    def bundle(self, cid):
        return os.path.join(self.d, "state", "io.containerd.runtime.v2.task", "k8s.io", cid)


def snapshotter(path):
    """overlayfs, unless path is on overlayfs itself (CI in a container):
    overlay on overlay does not mount, the native snapshotter copies instead."""
    fs = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True,
                        text=True).stdout.strip()
    return "native" if fs == "overlayfs" else "overlayfs"


def test_config(d, handler_block="", cri_extra=""):
    """A containerd config for tests: private plugin dirs, no CNI (host
    network pods), no systemd (cgroupfs), oom_score_adj kept within ours."""
    return """version = 2

[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  stream_server_port = "0"
{cri_extra}
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{d}/cni-bin"
    conf_dir = "{d}/cni-conf"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "{snap}"

  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"

  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    Root = "{d}/runc"
{handler}
""".format(d=d, pause=PAUSE_IMAGE, handler=handler_block, cri_extra=cri_extra,
           snap=snapshotter(os.path.dirname(d)))


def gpufrac_handler(binary, runc_root):
    return """
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.gpufrac]
    runtime_type = "io.containerd.runc.v2"
    pod_annotations = ["nvidia.com/*", "gpu-fraction*", "gpu-memory*", "kai.scheduler/*"]

  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.gpufrac.options]
    BinaryName = "{b}"
    Root = "{r}"
    SystemdCgroup = false
""".format(b=binary, r=runc_root)


def gpufrac_containerd(d, env, images_tar):
    """containerd under d whose gpufrac handler runs the build's gpufrac-runtime
    (over runc, its root under d)."""
    return Containerd(d, test_config(d, gpufrac_handler(os.path.realpath(RUNTIME),
                                                        os.path.join(d, "runc"))),
                      env, images_tar)


def node_env(gpusim_state, devices, state_dir):
    """The environment of a test node's containerd (what its shims and
    gpufrac-runtime get) and gpufracd: gpusim's devices and state, the
    agent's state dir, no runtime.conf, runc as the real runtime, the
    build's shim."""
    return {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LD_LIBRARY_PATH": GPUSIM, "GPUSIM_DEVICES": devices,
        "GPUSIM_STATE": gpusim_state, "GPUSIM_CTX_OVERHEAD": "0",
        "GPUFRAC_STATE_DIR": state_dir, "GPUFRAC_RUNTIME_CONF": "/nonexistent",
        "GPUFRAC_REAL_RUNTIME": RUNC, "GPUFRAC_SHIM": SHIM,
        "ASAN_OPTIONS": "detect_leaks=0", "UBSAN_OPTIONS": "halt_on_error=1",
    }


class AgentHost:
    """gpufracd on a test node: self.tmp (its log), self.state and self.env
    are the node's; the fractions and containers it holds."""

    agent = None

    def start_agent(self):
        log = open(os.path.join(self.tmp, "agent.log"), "a")
        self.agent = subprocess.Popen(
            [AGENT, "--state-dir", self.state, "--metrics-listen", "off",
             "--watchdog-period-ms", "100", "--mps-control", MPS_FAKE],
            env=self.env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        wait_for(lambda: "ready:" in self.agent_log() or self.agent.poll() is not None,
                 "gpufracd to be ready")
        if self.agent.poll() is not None:
            raise AssertionError("gpufracd exited: " + self.agent_log())

    def stop_agent(self, sig=signal.SIGTERM):
        if self.agent and self.agent.poll() is None:
            self.agent.send_signal(sig)
            self.agent.wait(timeout=30)
        self.agent = None

    def agent_log(self):
        with open(os.path.join(self.tmp, "agent.log"), errors="replace") as f:
            return f.read()

    def fractions(self):
        return fractions(self.state)

    def container_entries(self):
        d = os.path.join(self.state, "containers")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []


def fractions(state_dir):
    """The fractions the agent holds (its state dir's fractions/)."""
    d = os.path.join(state_dir, "fractions")
    return sorted(n for n in os.listdir(d) if not n.startswith(".")) \
        if os.path.isdir(d) else []


def close_node(cri, ctd, tmp):
    """A CRI suite's node gone: every pod removed as the kubelet would,
    containerd torn down, tmp removed (also after a failed test)."""
    try:
        if cri:
            cri.remove_everything()
            cri.close()
    finally:
        if ctd:
            ctd.teardown()
        subprocess.run(["rm", "-rf", tmp], capture_output=True)


class Cri:
    """The kubelet's side of CRI, as far as the tests need it."""

    def __init__(self, pb, stubs, sock, wait_ready=True):
        import grpc
        self.pb = pb
        self.grpc = grpc
        self.channel = grpc.insecure_channel("unix://" + sock)
        self.rt = stubs.RuntimeServiceStub(self.channel)
        self.img = stubs.ImageServiceStub(self.channel)
        # containerd opens its socket before its CRI plugin has restored the
        # containers it had; until then every call answers "server is not
        # initialized yet". The kubelet waits for RuntimeReady too.
        if wait_ready:
            wait_for(self.runtime_ready, "containerd's CRI to report RuntimeReady")

    def runtime_ready(self):
        try:
            conditions = self.rt.Status(self.pb.StatusRequest(), timeout=10).status.conditions
        except self.grpc.RpcError:
            return False
        return any(c.type == "RuntimeReady" and c.status for c in conditions)

    def close(self):
        self.channel.close()

    def version(self):
        return self.rt.Version(self.pb.VersionRequest(version="v1"), timeout=30)

    def ns(self, pid):
        pb = self.pb
        return pb.NamespaceOption(network=pb.NODE, pid=pid, ipc=pb.POD)

    def sandbox_config(self, name, uid, namespace, annotations, log_dir, pid):
        pb = self.pb
        return pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=uid, namespace=namespace),
            log_directory=log_dir, annotations=annotations,
            labels={"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": namespace},
            linux=pb.LinuxPodSandboxConfig(security_context=pb.LinuxSandboxSecurityContext(
                namespace_options=self.ns(pid))))

    def run_sandbox(self, config, handler):
        return self.rt.RunPodSandbox(self.pb.RunPodSandboxRequest(
            config=config, runtime_handler=handler), timeout=120).pod_sandbox_id

    def create(self, sandbox, sconfig, name, command, env, mounts, attempt=0, pid=None):
        pb = self.pb
        cfg = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name, attempt=attempt),
            image=pb.ImageSpec(image=IMAGE), command=command,
            envs=[pb.KeyValue(key=k, value=v) for k, v in env.items()],
            # a mount is a path (the same on both sides) or (host, container)
            mounts=[pb.Mount(container_path=m, host_path=m) if isinstance(m, str) else
                    pb.Mount(host_path=m[0], container_path=m[1]) for m in mounts],
            labels={"io.kubernetes.container.name": name},
            # as the kubelet annotates every container (the default path)
            annotations={"io.kubernetes.container.restartCount": str(attempt),
                         "io.kubernetes.container.terminationMessagePath":
                             "/dev/termination-log"},
            log_path="%s/%d.log" % (name, attempt),
            linux=pb.LinuxContainerConfig(security_context=pb.LinuxContainerSecurityContext(
                namespace_options=self.ns(pb.CONTAINER if pid is None else pid))))
        return self.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sandbox, config=cfg, sandbox_config=sconfig),
            timeout=120).container_id

    def start(self, cid):
        self.rt.StartContainer(self.pb.StartContainerRequest(container_id=cid), timeout=120)

    def status(self, cid):
        return self.rt.ContainerStatus(self.pb.ContainerStatusRequest(container_id=cid),
                                       timeout=30).status

    def host_pid(self, cid):
        """The container's init as the host sees it (ContainerStatus verbose info)."""
        r = self.rt.ContainerStatus(self.pb.ContainerStatusRequest(container_id=cid,
                                                                   verbose=True), timeout=30)
        return json.loads(r.info["info"])["pid"]

    def exec_sync(self, cid, cmd, timeout=60):
        return self.rt.ExecSync(self.pb.ExecSyncRequest(container_id=cid, cmd=cmd,
                                                        timeout=timeout), timeout=timeout + 30)

    def stop(self, cid, timeout=0):
        self.rt.StopContainer(self.pb.StopContainerRequest(container_id=cid, timeout=timeout),
                              timeout=120)

    def remove(self, cid):
        self.rt.RemoveContainer(self.pb.RemoveContainerRequest(container_id=cid), timeout=120)

    def stop_sandbox(self, sid):
        self.rt.StopPodSandbox(self.pb.StopPodSandboxRequest(pod_sandbox_id=sid), timeout=120)

    def remove_sandbox(self, sid):
        self.rt.RemovePodSandbox(self.pb.RemovePodSandboxRequest(pod_sandbox_id=sid),
                                 timeout=120)

    def sandboxes(self):
        return [p.id for p in self.rt.ListPodSandbox(self.pb.ListPodSandboxRequest(),
                                                     timeout=30).items]

    def remove_everything(self):
        """What a test left: every pod stopped and removed, as the kubelet would."""
        for sid in self.sandboxes():
            try:
                self.stop_sandbox(sid)
                self.remove_sandbox(sid)
            except self.grpc.RpcError:
                pass

    def containers(self, sandbox):
        return self.rt.ListContainers(self.pb.ListContainersRequest(
            filter=self.pb.ContainerFilter(pod_sandbox_id=sandbox)), timeout=30).containers


def cri_log(path):
    """The text of a CRI container log (`<time> <stream> <P|F> <text>` lines)."""
    if not os.path.exists(path):
        return ""
    out = []
    with open(path, errors="replace") as f:
        for ln in f:
            parts = ln.rstrip("\n").split(" ", 3)
            if len(parts) == 4:
                out.append(parts[3])
    return "\n".join(out) + ("\n" if out else "")


def mkdtemp():
    return tempfile.mkdtemp(prefix="gpufrac-cri-")
