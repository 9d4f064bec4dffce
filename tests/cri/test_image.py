# SPDX-License-Identifier: Apache-2.0
"""gpufracd from the node image `make image` builds, run as the chart's
DaemonSet runs it, under real containerd through CRI: the OCI layout listed in
build-image/images is imported into the test's containerd (`ctr images
import`), the agent container is created from the rendered chart's agent
container (its command, env and hostPath mounts; privileged, host PID and IPC
namespaces) on the default runc handler, and a fractional pod on the gpufrac
handler is then admitted by that containerized agent and sees and hits its
limit. gpufrac-runtime and the shim are the build's (the installer would copy
the image's onto the host: tests/cri/test_install.py).

What differs from a cluster, and why: the kubelet is this file's CRI client
(crinode.Cri); the pods use the host's network (no CNI here); the agent's
metrics listen on 127.0.0.1, port 0 (the chart's 0.0.0.0:9464 is for Prometheus
on a node); NODE_NAME is not set (no API server to publish to); the GPU is
gpusim, bind-mounted into the agent with the libraries it needs, since it is
not in the image. Exits 77 (CTest: skipped) where containerd cannot run or no
image was built (run `make image`; GPUFRAC_IMAGE_DIR names another output dir)."""
import json
import os
import re
import shutil
import subprocess
import sys
import unittest
import urllib.request
import uuid

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import crinode  # noqa: E402
from crinode import CTR, Gi, wait_for  # noqa: E402

SRC = os.environ.get("GPUFRAC_SOURCE") or os.path.join(HERE, "..", "..")
IMAGES = os.environ.get("GPUFRAC_IMAGE_DIR") or os.path.join(SRC, "build-image")
NODE_IMAGE = "gpufrac-node"
NV = "nvidia.com/container."
DEVICES = "4Gi"


def node_image():
    """(name:tag, OCI layout dir, manifest digest) from `make image`'s list, or None."""
    try:
        with open(os.path.join(IMAGES, "images")) as f:
            lines = [ln.split() for ln in f if ln.strip()]
    except FileNotFoundError:
        return None
    for ref, layout, digest in lines:
        if ref.rsplit(":", 1)[0].endswith("/" + NODE_IMAGE) and os.path.isdir(layout):
            return ref, layout, digest
    return None


REASON = crinode.skip_reason()
if not REASON and not node_image():
    REASON = "no node image in %s/images: run `make image` first (make check does)" % IMAGES
if REASON and __name__ == "__main__":
    print("SKIP: " + REASON)
    sys.exit(77)

from harness import PROBE, kv  # noqa: E402

sys.path.insert(0, os.path.join(SRC, "deploy"))
import render  # noqa: E402


def chart_agent(state_dir):
    """The DaemonSet's pod spec and agent container, rendered for this state dir."""
    chart = os.path.join(SRC, "deploy", "helm", "gpufrac")
    with open(os.path.join(chart, "values.yaml")) as f:
        values = render.load_values(f.read())
    values["agent"]["stateDir"] = state_dir
    import yaml
    for d in yaml.safe_load_all(render.render_chart(chart, values, "gpufrac", "gpufrac-system",
                                                    False)):
        if d and d["kind"] == "DaemonSet":
            spec = d["spec"]["template"]["spec"]
            return spec, spec["containers"][0]
    raise AssertionError("no DaemonSet in the chart")


def gpusim_libs(dst):
    """gpusim's libraries and what they need beyond glibc (the sanitized
    build's libubsan, libstdc++): the image has glibc, not these."""
    os.makedirs(dst)
    glibc = ("libc.so", "libm.so", "ld-linux", "libpthread.so", "libdl.so", "librt.so")
    for lib in ("libcuda.so.1", "libnvidia-ml.so.1"):
        src = os.path.join(crinode.GPUSIM, lib)
        shutil.copy(src, os.path.join(dst, lib))
        for so in crinode.libs_of(src):
            name = os.path.basename(so)
            if not name.startswith(glibc) and not os.path.exists(os.path.join(dst, name)):
                shutil.copy(so, os.path.join(dst, name))


class ImageNode:
    def __init__(self):
        self.ref, self.layout, self.digest = node_image()
        self.tmp = crinode.mkdtemp()
        self.gpusim_dir = os.path.join(self.tmp, "gpusim")
        self.state = os.path.join(self.tmp, "gpufrac")
        self.logs = os.path.join(self.tmp, "pods")
        for d in (self.gpusim_dir, self.state, self.logs):
            os.makedirs(d)
        self.gpusim_state = os.path.join(self.gpusim_dir, "state")
        self.libs = os.path.join(self.tmp, "gpusim-libs")
        gpusim_libs(self.libs)
        self.gpusim_env = {"GPUSIM_DEVICES": DEVICES, "GPUSIM_STATE": self.gpusim_state,
                           "GPUSIM_CTX_OVERHEAD": "0"}
        # containerd's environment is what its shims and gpufrac-runtime get
        self.env = crinode.node_env(self.gpusim_state, DEVICES, self.state)
        subprocess.run([PROBE, "info"], env=self.env, check=True, capture_output=True)
        self.pb, self.stubs = crinode.load_cri(self.tmp)
        tar = crinode.build_images(self.tmp)
        self.ctd = crinode.gpufrac_containerd(os.path.join(self.tmp, "containerd"), self.env,
                                              tar)
        self.ctd.start()
        self.cri = crinode.Cri(self.pb, self.stubs, self.ctd.sock)
        self.ctd.import_images()
        self.import_node_image()

    def import_node_image(self):
        """The OCI layout as ctr takes it: a tar stream; its tag gets the name."""
        tar = subprocess.Popen(["tar", "-C", self.layout, "-cf", "-", "."],
                               stdout=subprocess.PIPE)
        r = subprocess.run([CTR, "--address", self.ctd.sock, "-n", "k8s.io", "images", "import",
                            "--snapshotter", crinode.snapshotter(self.ctd.d),
                            "--base-name", self.ref.rsplit(":", 1)[0], "-"],
                           stdin=tar.stdout, capture_output=True, text=True)
        tar.stdout.close()
        if tar.wait() != 0 or r.returncode != 0:
            raise AssertionError("importing %s failed: %s" % (self.layout, r.stderr))

    def close(self):
        crinode.close_node(self.cri, self.ctd, self.tmp)


NODE = None


def setUpModule():
    global NODE
    NODE = ImageNode()


def tearDownModule():
    if NODE:
        NODE.close()


class AgentFromImageTest(unittest.TestCase):
    def sandbox(self, name, namespace, annotations, pid, privileged=False):
        pb = NODE.pb
        uid = str(uuid.uuid4())
        log_dir = os.path.join(NODE.logs, uid)
        os.makedirs(log_dir)
        ns = pb.NamespaceOption(network=pb.NODE, pid=pid, ipc=pb.NODE if privileged else pb.POD)
        config = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=uid, namespace=namespace),
            log_directory=log_dir, annotations=annotations,
            labels={"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": namespace},
            linux=pb.LinuxPodSandboxConfig(security_context=pb.LinuxSandboxSecurityContext(
                namespace_options=ns, privileged=privileged)))
        return config, log_dir, ns

    def start_agent(self):
        """The DaemonSet's agent container, as the kubelet creates it."""
        pb = NODE.pb
        spec, agent = chart_agent(NODE.state)
        self.assertEqual(agent["image"], NODE.ref, "the chart runs the image make image built")
        self.assertIs(spec["hostPID"], True)
        self.assertIs(spec["hostIPC"], True)
        self.assertIs(agent["securityContext"]["privileged"], True)
        config, log_dir, ns = self.sandbox("gpufrac-agent-test", "gpufrac-system", {},
                                           pb.NODE, privileged=True)
        # no runtimeClassName: the node's default handler (runc)
        sid = NODE.cri.run_sandbox(config, spec.get("runtimeClassName", ""))
        cmd = list(agent["command"])
        cmd[cmd.index("--metrics-listen") + 1] = "127.0.0.1:0"
        env = {e["name"]: e["value"] for e in agent["env"] if "value" in e}
        env.update(NODE.gpusim_env, LD_LIBRARY_PATH="/usr/lib/gpusim")
        vols = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
        mounts = [pb.Mount(container_path=m["mountPath"], host_path=vols[m["name"]])
                  for m in agent["volumeMounts"]]
        mounts += [pb.Mount(container_path="/usr/lib/gpusim", host_path=NODE.libs, readonly=True),
                   pb.Mount(container_path=NODE.gpusim_dir, host_path=NODE.gpusim_dir)]
        cfg = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=agent["name"]), image=pb.ImageSpec(image=agent[
                "image"]), command=cmd, envs=[pb.KeyValue(key=k, value=v) for k, v in env.items()],
            mounts=mounts, labels={"io.kubernetes.container.name": agent["name"]},
            log_path="agent/0.log",
            linux=pb.LinuxContainerConfig(security_context=pb.LinuxContainerSecurityContext(
                privileged=True, namespace_options=ns)))
        cid = NODE.cri.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sid, config=cfg, sandbox_config=config), timeout=120).container_id
        NODE.cri.start(cid)
        log = os.path.join(log_dir, "agent", "0.log")
        text = wait_for(lambda: (lambda t: t if "ready:" in t or NODE.cri.status(cid).state ==
                                 pb.CONTAINER_EXITED else None)(crinode.cri_log(log)),
                        "the agent container to be ready")
        self.assertIn("ready:", text, "gpufracd from the image: " + text)
        ready = [ln for ln in text.splitlines() if "ready:" in ln][0]
        self.assertIn("1 GPU(s)", ready)
        self.assertIn("socket %s/agent.sock" % NODE.state, ready)
        return sid, cid, ready.rsplit("metrics ", 1)[1].strip()

    def events(self):
        with open(os.path.join(NODE.state, "events.log")) as f:
            return f.read()

    def fractions(self):
        return crinode.fractions(NODE.state)

    def test_fractional_pod_admitted_by_the_agent_from_the_image(self):
        pb = NODE.pb
        # the imported image is the one make image listed, by manifest digest
        out = subprocess.run([CTR, "--address", NODE.ctd.sock, "-n", "k8s.io", "images", "ls"],
                             check=True, capture_output=True, text=True).stdout
        row = [ln.split() for ln in out.splitlines() if ln.split()[:1] == [NODE.ref]]
        self.assertEqual(len(row), 1, out)
        self.assertEqual(row[0][2], NODE.digest)

        asid, acid, metrics = self.start_agent()
        # the agent is the image's gpufracd, running in its container's root
        pid = NODE.cri.host_pid(acid)
        exe = "/proc/%d/exe" % pid
        self.assertEqual(os.readlink(exe), "/usr/sbin/gpufracd")
        self.assertTrue(os.path.samefile(exe, "/proc/%d/root/usr/sbin/gpufracd" % pid))
        self.assertFalse(os.path.samefile(exe, crinode.AGENT))

        annotations = {NV + "main.gpu-memory.request": "1Gi", NV + "main.gpu-memory.limit": "1Gi"}
        config, log_dir, ns = self.sandbox("pod-" + uuid.uuid4().hex[:6], "ml", annotations,
                                           pb.POD)
        sid = NODE.cri.run_sandbox(config, "gpufrac")
        env = dict(NODE.gpusim_env, PATH="/bin:/usr/bin", LD_LIBRARY_PATH="/usr/lib/gpusim")
        cid = NODE.cri.create(sid, config, "main", ["/usr/bin/shimprobe", "info", "alloc", "700Mi",
                                                    "hold", "300"], env, [NODE.gpusim_dir])
        NODE.cri.start(cid)
        name = "k8s.%s.main" % sid[:12]
        text = wait_for(lambda: (lambda t: t if "holding" in t else None)(
            crinode.cri_log(os.path.join(log_dir, "main", "0.log"))), "the fractional container")
        self.assertEqual(int(kv(text)["total"]), 1 * Gi, text)
        self.assertIn("alloc=ok", text)
        self.assertEqual(self.fractions(), [name])
        self.assertIn("admitted container fraction %s" % name, self.events())
        # the containerized agent serves the fraction's metrics
        with urllib.request.urlopen("http://%s/metrics" % metrics, timeout=30) as r:
            body = r.read().decode()
        line = [ln for ln in body.splitlines() if ln.startswith(
            "gpufrac_fraction_memory_limit_bytes{") and '"%s"' % name in ln]
        self.assertEqual(len(line), 1, body)
        self.assertEqual(float(line[0].rsplit(" ", 1)[1]), float(1 * Gi))
        # a second process (exec) shares the limit
        r = NODE.cri.exec_sync(cid, ["/usr/bin/shimprobe", "alloc", "400Mi", "alloc", "300Mi"])
        got = [ln for ln in r.stdout.decode().splitlines() if ln.startswith("alloc=")]
        self.assertEqual(got, ["alloc=CUDA_ERROR_OUT_OF_MEMORY", "alloc=ok"],
                         r.stdout.decode() + r.stderr.decode())
        NODE.cri.stop(cid, timeout=0)
        wait_for(lambda: self.fractions() == [], "the fraction's release")
        # by the runtime's poststop, or first by the agent itself once the
        # container's processes are gone: either way, the image's agent did it
        self.assertRegex(self.events(), r"released (container )?fraction %s\n" % re.escape(name))
        self.assertEqual(NODE.cri.status(acid).state, pb.CONTAINER_RUNNING)
        # the agent container stops as the kubelet stops it (SIGTERM)
        NODE.cri.stop(acid, timeout=30)
        st = NODE.cri.status(acid)
        self.assertEqual(st.exit_code, 0, json.dumps(st.message))
        free = kv(subprocess.run([PROBE, "info"], env=NODE.env, capture_output=True,
                                 text=True).stdout)["free"]
        self.assertEqual(int(free), 4 * Gi)


if __name__ == "__main__":
    cases.main(verbosity=2)
