# SPDX-License-Identifier: Apache-2.0
"""A real one-node cluster runs a fractional pod end to end: etcd,
kube-apiserver, kube-scheduler (layout B: the default scheduler with the
extender) and gpufrac-scheduler from cluster.py; the REAL kubelet (built by
scripts/kube-build.sh from the same source tree) driving the real containerd
of the CRI suite (tests/cri/crinode.py: private socket and dirs, the gpufrac
handler, local umoci images) with gpufrac-runtime over runc, and gpufracd
publishing the node's GPUs with --node-name. The GPU is gpusim, MPS is
tests/fakes/nvidia-cuda-mps-control: the only stand-ins.

What the kubelet needs here: a loopback-only CNI conflist
(hostNetwork pods), --hostname-override=127.0.0.1 (loopback InternalIP, so the
API server reaches the kubelet for pods/log), the cgroupfs driver, its own
--cgroup-root, --fail-swap-on=false, and the not-ready taint removed (no
controller-manager). Its hard-coded host paths (/var/log/pods,
/var/log/containers, /var/lib/kubelet/device-plugins) and containerd's
/run/containerd/s are kept off the host: the test re-executes itself in a
private mount namespace (unshare -m) with tmpfs over /var/log, /var/lib and
/run/containerd. The kubelet (protectKernelDefaults off) sets
vm.overcommit_memory, kernel.panic and kernel.panic_on_oops machine-wide:
the test puts the values it found back when it ends.

Exits 77 (skipped) with the reason when the kubelet or the control plane is
not built, containerd or the CNI plugins are not installed, or not root."""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "cri"))
import cluster as C  # noqa: E402
import crinode  # noqa: E402
import device_plugin  # noqa: E402
from crinode import AGENT, Gi, Mi, MPS_FAKE  # noqa: E402
from harness import PROBE, kv  # noqa: E402

NODE_NAME = "127.0.0.1"
P = "nvidia.com/container."
DEVICES = "4Gi,4Gi"
CNI_LOOPBACK = next((p for p in ("/usr/lib/cni/loopback", "/opt/cni/bin/loopback")
                     if os.access(p, os.X_OK)), None)
NS_MARK = "GPUFRAC_KUBE_NODE_PRIVATE_NS"
PRIVATE = ("/var/log", "/var/lib", "/run/containerd")  # tmpfs in the test's namespace
SYSCTLS = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops")


def kubelet():
    d = C.kube_bin()
    k = os.path.join(d, "kubelet") if d else None
    return k if k and os.access(k, os.X_OK) else None


def skip_reason():
    why = C.missing()
    if why:
        return why
    if not kubelet():
        return "kubelet not built: run scripts/kube-build.sh (it builds kubelet with the others)"
    why = crinode.skip_reason()  # root, containerd, runc, umoci, the build's binaries
    if why:
        return why
    if not CNI_LOOPBACK:
        return "the CNI loopback plugin is not installed (containernetworking-plugins, " \
               "scripts/deps.sh)"
    if not shutil.which("unshare"):
        return "unshare (util-linux) is not installed"
    return None


def enter_private_namespace():
    """Re-executes this file in its own mount namespace, tmpfs over the
    paths the kubelet and containerd hard-code. Returns in the child."""
    if os.environ.get(NS_MARK) == "1":
        for d in PRIVATE:
            while not os.path.isdir(d):  # e.g. no /run/containerd yet: over /run instead
                d = os.path.dirname(d)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "gpufrac-test", d],
                           check=True)
        return
    env = dict(os.environ, **{NS_MARK: "1"})
    argv = ["unshare", "--mount", "--propagation", "private", sys.executable,
            os.path.abspath(__file__)] + sys.argv[1:]
    saved = {}
    for s in SYSCTLS:
        with open("/proc/sys/" + s) as f:
            saved[s] = f.read()
    child = subprocess.Popen(argv, env=env)
    try:
        rc = child.wait()
    except BaseException:  # SIGTERM (cluster.py makes it SystemExit): the child too
        child.terminate()
        child.wait(60)
        raise
    finally:
        for s, v in saved.items():  # what the kubelet changed machine-wide
            with open("/proc/sys/" + s, "w") as f:
                f.write(v)
    sys.exit(rc)


class Node:
    """The cluster, the node's containerd, gpufracd and the kubelet."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="gpufrac-kube-node-")
        self.cluster = self.gf = self.ks = self.ctd = self.kubelet = self.agent = None
        try:
            self.setup()
        except BaseException:
            self.close()
            raise

    def setup(self):
        t = self.tmp
        self.cluster = C.Cluster(t).start()
        for f in ("rbac.yaml", "rbac-second-scheduler.yaml"):
            self.cluster.apply_all(C.yaml_docs(os.path.join(C.DEPLOY, f)))
        # reservation pods (WholeGpuTest): the test's local image, given back soon
        self.gf = C.GpufracScheduler(self.cluster, t, self.cluster.sa_token(), extra=[
            "--reservation-image", crinode.IMAGE, "--reservation-idle-s", "2"]).start()
        self.ks = C.KubeScheduler(self.cluster, "B", self.gf.url, t, C.KSCHED_TOKEN).start()
        # the GPU: gpusim's shared state, reached from the pod by a hostPath volume
        self.gpusim_dir = os.path.join(t, "gpusim")
        self.gpusim_state = os.path.join(self.gpusim_dir, "state")
        self.state = os.path.join(t, "gpufrac")
        for d in (self.gpusim_dir, self.state):
            os.makedirs(d)
        self.env = crinode.node_env(self.gpusim_state, DEVICES, self.state)
        subprocess.run([PROBE, "info"], env=self.env, check=True, capture_output=True)
        # containerd as in the CRI suite, with a loopback-only CNI for the kubelet
        d = os.path.join(t, "containerd")
        self.ctd = crinode.gpufrac_containerd(d, self.env, crinode.build_images(t))
        os.makedirs(os.path.join(d, "cni-bin"))
        os.makedirs(os.path.join(d, "cni-conf"))
        os.symlink(CNI_LOOPBACK, os.path.join(d, "cni-bin", "loopback"))
        with open(os.path.join(d, "cni-conf", "10-loopback.conflist"), "w") as f:
            json.dump({"cniVersion": "0.4.0", "name": "gpufrac-test-lo",
                       "plugins": [{"type": "loopback"}]}, f)
        self.ctd.start()
        # whatever ends the test: containerd is not a cluster.Proc
        atexit.register(self.ctd.kill_shims)
        atexit.register(self.ctd.stop)
        self.ctd.import_images()
        self.start_kubelet()
        self.start_agent()

    def start_kubelet(self):
        t = self.tmp
        self.kubelet_port, healthz = C.free_port(), C.free_port()
        cfg = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "address": "127.0.0.1", "port": self.kubelet_port, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": healthz,
            # the API server's pods/log: no client certificate, allowed
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "cgroupDriver": "cgroupfs", "cgroupRoot": "/gpufrac-test-%d" % os.getpid(),
            "failSwapOn": False, "protectKernelDefaults": False,
            "staticPodPath": "", "syncFrequency": "2s", "nodeStatusUpdateFrequency": "2s",
            "fileCheckFrequency": "2s", "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            # a full build disk must not evict the test's pods
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "0%",
                             "imagefs.available": "0%", "nodefs.inodesFree": "0%"},
            "serializeImagePulls": False,
        }
        self.make_cgroups()
        self.kubelet_config = os.path.join(t, "kubelet.json")
        with open(self.kubelet_config, "w") as f:
            json.dump(cfg, f)
        kc = self.cluster.kubeconfig(os.path.join(t, "kubelet.kubeconfig"), C.ADMIN_TOKEN)
        self.admin_kubeconfig = kc
        self.kubelet = C.Proc("kubelet", [
            kubelet(), "--config", self.kubelet_config, "--kubeconfig", kc,
            "--root-dir", os.path.join(t, "kubelet"),
            "--cert-dir", os.path.join(t, "kubelet-pki"),
            "--container-runtime", "remote",
            "--container-runtime-endpoint", "unix://" + self.ctd.sock,
            "--hostname-override", NODE_NAME, "--v=2"],
            os.path.join(t, "kubelet.log"), env=self.env).start()
        api = self.cluster
        C.wait_for(lambda: self.ready(), "the kubelet's Node %s Ready" % NODE_NAME,
                   timeout=120, proc=self.kubelet, interval=0.2)
        # no controller-manager lifts TaintNodesByCondition's not-ready taint
        api.req("PATCH", "/api/v1/nodes/" + NODE_NAME, {"spec": {"taints": None}},
                ctype="application/merge-patch+json")

    def ready(self):
        n = self.cluster.get_or_none("/api/v1/nodes/" + NODE_NAME)
        return n and any(c["type"] == "Ready" and c["status"] == "True"
                         for c in n.get("status", {}).get("conditions", []))

    def start_agent(self):
        t = self.tmp
        self.metrics_port = C.free_port()
        token = os.path.join(t, "agent.token")
        with open(token, "w") as f:
            f.write(C.ADMIN_TOKEN + "\n")
        self.agent = C.Proc("gpufracd", [
            AGENT, "--state-dir", self.state,
            "--metrics-listen", "127.0.0.1:%d" % self.metrics_port,
            "--watchdog-period-ms", "100", "--mps-control", MPS_FAKE,
            "--node-name", NODE_NAME, "--api-server", self.cluster.url,
            "--token-file", token, "--ca-file", self.cluster.certs["ca"]],
            os.path.join(t, "gpufracd.log"), env=self.env).start()
        C.wait_for(lambda: self.gf.metric("gpufrac_scheduler_gpu_total_bytes",
                                          'node="%s"' % NODE_NAME) > 0,
                   "the agent's GPUs of node %s in gpufrac-scheduler" % NODE_NAME,
                   proc=self.agent, timeout=60)

    def gpus(self):
        n = self.cluster.get("/api/v1/nodes/" + NODE_NAME)
        return json.loads(n["metadata"]["annotations"]["gpufrac.io/gpus"])

    def metrics(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port,
                                    timeout=10) as r:
            return r.read().decode()

    def fractions(self):
        return crinode.fractions(self.state)

    def pod_log(self, name, container="main"):
        status, data = self.cluster.raw(
            "GET", "/api/v1/namespaces/default/pods/%s/log?container=%s" % (name, container))
        return data.decode(errors="replace") if status == 200 else ""

    def logs(self):
        return "\n".join("--- %s\n%s" % (p.name, p.tail(30))
                         for p in (self.kubelet, self.agent, self.ks, self.gf))

    def close(self):
        """Everything stopped and removed; also after a failed setup."""
        try:
            if self.kubelet and self.kubelet.p:
                for pod in self.cluster.pods():
                    self.cluster.delete_pod(pod["metadata"]["name"])
                C.wait_for(lambda: not self.cluster.pods() and self.kubelet_idle(),
                           "the kubelet to remove every pod", timeout=60)
        except (AssertionError, OSError, C.ApiError):
            pass
        finally:
            for p in (self.kubelet, self.ctd, self.agent, self.ks, self.gf, self.cluster):
                if p:
                    p.stop()
            if self.ctd:
                self.ctd.teardown()
            subprocess.run(["umount", "-R", "-l", os.path.join(self.tmp, "kubelet")],
                           capture_output=True)
            self.remove_cgroups()
            subprocess.run(["rm", "-rf", self.tmp], capture_output=True)

    def kubelet_idle(self):
        r = subprocess.run([crinode.CTR, "--address", self.ctd.sock, "-n", "k8s.io", "tasks",
                            "ls", "-q"], capture_output=True, text=True)
        return r.returncode == 0 and not r.stdout.strip()

    def cgroup_tops(self):
        base = "/sys/fs/cgroup"
        if os.path.exists(os.path.join(base, "cgroup.controllers")):
            return [base]  # v2
        return [os.path.join(base, h) for h in sorted(os.listdir(base))
                if os.path.isdir(os.path.join(base, h))]

    def make_cgroups(self):
        """The kubelet wants its --cgroup-root to exist in every hierarchy."""
        name = "gpufrac-test-%d" % os.getpid()
        for top in self.cgroup_tops():
            os.makedirs(os.path.join(top, name), exist_ok=True)
            for f in ("cpuset.cpus", "cpuset.mems"):  # v1 cpuset starts empty
                if os.path.exists(os.path.join(top, f)):
                    with open(os.path.join(top, f)) as src:
                        v = src.read().strip()
                    with open(os.path.join(top, name, f), "w") as dst:
                        dst.write(v)

    def remove_cgroups(self):
        """The kubelet's --cgroup-root in every v1 hierarchy (or the v2 tree)."""
        name = "gpufrac-test-%d" % os.getpid()
        for top in self.cgroup_tops():
            root = os.path.join(top, name)
            if not os.path.isdir(root):
                continue
            for dirpath, _, _ in sorted(os.walk(root), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(dirpath)
                except OSError:
                    pass


NODE = None


def setUpModule():
    global NODE
    NODE = Node()


def tearDownModule():
    if NODE:
        NODE.close()


def pod_obj(name, ann, command, node_name=None):
    spec = {
        "hostNetwork": True, "runtimeClassName": "gpufrac", "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "containers": [{
            "name": "main", "image": crinode.IMAGE, "imagePullPolicy": "Never",
            "command": command,
            "env": [{"name": k, "value": v} for k, v in (
                ("PATH", "/bin:/usr/bin"), ("LD_LIBRARY_PATH", "/usr/lib/gpusim"),
                ("GPUSIM_DEVICES", DEVICES), ("GPUSIM_STATE", NODE.gpusim_state),
                ("GPUSIM_CTX_OVERHEAD", "0"))],
            "volumeMounts": [{"name": "gpusim", "mountPath": NODE.gpusim_dir}]}],
        "volumes": [{"name": "gpusim", "hostPath": {"path": NODE.gpusim_dir}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": ann},
            "spec": spec}


def allocs(text):
    return [ln for ln in text.splitlines() if ln.startswith("alloc=")]


class NodeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        NODE.cluster.apply_all([{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                                 "metadata": {"name": "gpufrac"}, "handler": "gpufrac"}])

    def wait(self, fn, what, timeout=90):
        try:
            return C.wait_for(fn, what, timeout=timeout, interval=0.2)
        except AssertionError as e:
            raise AssertionError("%s\n%s" % (e, NODE.logs())) from None

    def test_fractional_pod_end_to_end(self):
        api = NODE.cluster
        api.create(pod_obj("frac", {P + "main.gpu-memory.request": "1Gi"},
                           ["/usr/bin/shimprobe", "info", "alloc", "600Mi", "alloc", "600Mi",
                            "hold", "300"]))
        # scheduled by the extender: kube-scheduler bound it with the devices
        pod = self.wait(lambda: (lambda p: p if p and p["spec"].get("nodeName") else None)(
            api.pod("frac")), "pod frac bound")
        self.assertEqual(pod["spec"]["nodeName"], NODE_NAME)
        devs = pod["metadata"]["annotations"][P + "main.gpus.devices"].split(",")
        self.assertEqual(len(devs), 1, devs)
        self.assertIn(devs[0], [g["uuid"] for g in NODE.gpus()])
        # admitted and enforced on the node: the container's log, through the API
        out = self.wait(lambda: (lambda t: t if "holding=" in t else None)(
            NODE.pod_log("frac")), "the pod's log through pods/log")
        self.assertEqual(int(kv(out)["total"]), 1 * Gi, out)
        self.assertEqual(allocs(out), ["alloc=ok", "alloc=CUDA_ERROR_OUT_OF_MEMORY"], out)
        kubectl = shutil.which("kubectl")  # scripts/deps.sh installs one
        if kubectl:  # the same log as a user reads it (kubelet's API through the API server)
            r = subprocess.run([kubectl, "--kubeconfig", NODE.admin_kubeconfig, "logs", "frac",
                                "-c", "main"], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(kv(r.stdout)["total"], str(Gi), r.stdout)
        self.assertEqual(len(NODE.fractions()), 1, NODE.fractions())
        self.assertEqual(api.pod("frac")["status"]["phase"], "Running")
        # scraped from gpufracd with the pod's labels
        labels = 'namespace="default",pod="frac",container="main"'
        text = NODE.metrics()
        got = {}
        for ln in text.splitlines():
            if labels in ln and 'UUID="%s"' % devs[0] in ln:
                got[ln.split("{", 1)[0] + ('/' + ln.split('source="')[1].split('"')[0]
                                           if 'source="' in ln else "")] = \
                    float(ln.rsplit(" ", 1)[1])
        self.assertEqual(got.get("gpufrac_fraction_memory_limit_bytes"), float(Gi), text)
        self.assertEqual(got.get("gpufrac_fraction_memory_request_bytes"), float(Gi), text)
        self.assertEqual(got.get("gpufrac_fraction_memory_used_bytes/accounted"),
                         float(600 * Mi), text)
        # deleting the pod releases the fraction (after its grace period)
        api.req("DELETE", "/api/v1/namespaces/default/pods/frac", ok=(200, 202))
        self.wait(lambda: api.pod("frac") is None, "the kubelet to finish deleting pod frac")
        self.wait(lambda: NODE.fractions() == [], "the fraction released")
        self.wait(lambda: NODE.gf.metric("gpufrac_scheduler_pods") == 0,
                  "gpufrac-scheduler to forget the pod")

    def run_and_delete(self, names, restart):
        """Runs fractional pods, restarts gpufracd and containerd under them
        (restart), deletes them; -> seconds until the kubelet finished."""
        api = NODE.cluster
        for n in names:
            api.create(pod_obj(n, {P + "main.gpu-memory.request": "512Mi"},
                               ["/usr/bin/shimprobe", "info", "hold", "300"]))
        for n in names:
            self.wait(lambda n=n: "holding=" in NODE.pod_log(n), "pod %s running" % n)
        self.assertEqual(len(NODE.fractions()), len(names))
        if restart:
            NODE.agent.stop()
            NODE.ctd.stop()
            NODE.ctd.start()
            NODE.agent.start()
        t0 = time.monotonic()
        for n in names:
            api.req("DELETE", "/api/v1/namespaces/default/pods/" + n, ok=(200, 202))
        for n in names:
            self.wait(lambda n=n: api.pod(n) is None, "the kubelet to finish deleting " + n)
        took = time.monotonic() - t0
        self.wait(lambda: NODE.fractions() == [], "the fractions released")
        return took

    def test_delete_after_agent_and_containerd_restart(self):
        """Deleting pods after gpufracd and containerd restarted under them
        completes and releases their fractions. The figure is printed, not
        asserted: it is the kubelet's (its sync, the grace period: shimprobe,
        PID 1 without a SIGTERM handler, ignores SIGTERM until the SIGKILL),
        and the machine's load."""
        took = self.run_and_delete(["rs-%d" % i for i in range(3)], True)
        sys.stderr.write("deleted 3 pods after the restarts in %.1f s ... " % took)

    def test_malformed_annotation_fails_start_with_the_message(self):
        api = NODE.cluster
        # straight to the node (spec.nodeName): the extender would refuse it at filter
        api.create(pod_obj("bad", {P + "main.gpu-memory.request": "1gb"},
                           ["/usr/bin/shimprobe", "info"], node_name=NODE_NAME))

        def terminated():
            p = api.pod("bad")
            for cs in (p or {}).get("status", {}).get("containerStatuses", []):
                t = cs.get("state", {}).get("terminated")
                if t:
                    return p, t
            return None
        pod, term = self.wait(terminated, "container main of pod bad terminated")
        self.assertEqual(term.get("reason"), "StartError", term)
        self.assertEqual(term.get("exitCode"), 128, term)
        msg = term.get("message", "")
        self.assertIn("container main", msg)
        self.assertIn(P + "main.gpu-memory.request", msg)
        self.assertIn("1gb", msg)
        self.wait(lambda: api.pod("bad")["status"]["phase"] == "Failed", "pod bad Failed")
        self.assertEqual(NODE.fractions(), [])
        api.delete_pod("bad")
        self.wait(lambda: api.pod("bad") is None, "pod bad deleted")


def whole_pod(name, gpus=1):
    """A plain pod (runc) asking the device plugin for whole GPUs; it prints
    what the plugin's Allocate gave it."""
    lim = {"limits": {device_plugin.RESOURCE: str(gpus)}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"hostNetwork": True, "restartPolicy": "Never",
                     "terminationGracePeriodSeconds": 1,
                     "containers": [{
                         "name": "main", "image": crinode.IMAGE, "imagePullPolicy": "Never",
                         "command": ["/bin/sh", "-c",
                                     'echo "gpus=$NVIDIA_VISIBLE_DEVICES"; exec sleep 300'],
                         "resources": lim}]}}


RESERVE_NS = "gpufrac-system"


class WholeGpuTest(unittest.TestCase):
    """Whole-GPU pods and fractions never share a GPU. The device plugin is
    a stand-in (tests/kube/device_plugin.py: NVIDIA's needs a GPU) speaking
    the kubelet's real device plugin API over its socket; the kubelet, its
    device manager and kube-scheduler's nvidia.com/gpu accounting are real."""

    @classmethod
    def setUpClass(cls):
        api = NODE.cluster
        cls.uuids = [g["uuid"] for g in NODE.gpus()]
        cls.dp = device_plugin.DevicePlugin(cls.uuids, tmp=NODE.tmp).start()
        C.wait_for(lambda: api.get("/api/v1/nodes/" + NODE_NAME)["status"].get(
            "allocatable", {}).get(device_plugin.RESOURCE) == str(len(cls.uuids)),
            "the kubelet to advertise the plugin's GPUs", timeout=60, interval=0.2)
        # the extender closes them to fractions: no reservation holds any yet
        C.wait_for(lambda: NODE.gf.metric("gpufrac_scheduler_gpu_open",
                                          'node="%s"' % NODE_NAME) == 0,
                   "gpufrac-scheduler to close the device plugin's GPUs", timeout=30)

    @classmethod
    def tearDownClass(cls):
        api = NODE.cluster
        for ns in ("default", RESERVE_NS):
            for p in api.pods(ns):
                api.delete_pod(p["metadata"]["name"], ns)
        cls.dp.stop()

    def wait(self, fn, what, timeout=120):
        try:
            return C.wait_for(fn, what, timeout=timeout, interval=0.2)
        except AssertionError as e:
            raise AssertionError("%s\n%s" % (e, NODE.logs())) from None

    def bound(self, name):
        return self.wait(lambda: (lambda p: p if p and p["spec"].get("nodeName") else None)(
            NODE.cluster.pod(name)), "pod %s bound" % name)

    def whole_gpus_of(self, name):
        out = self.wait(lambda: (lambda t: t if "gpus=" in t else None)(NODE.pod_log(name)),
                        "the log of pod " + name)
        return kv(out)["gpus"].split(",")

    def devices(self, name):
        return self.bound(name)["metadata"]["annotations"][P + "main.gpus.devices"]

    def reservations(self):
        """{pod name: GPU it reported} of the live reservation pods."""
        out = {}
        for p in NODE.cluster.pods(RESERVE_NS, "gpufrac.io/reservation=true"):
            if p["metadata"].get("deletionTimestamp"):
                continue
            msg = ""
            for cs in p.get("status", {}).get("initContainerStatuses", []):
                msg = (cs.get("state", {}).get("terminated") or {}).get("message", "")
            out[p["metadata"]["name"]] = msg
        return out

    def failed_scheduling(self, name, text):
        return self.wait(lambda: [e for e in NODE.cluster.events(name)
                                  if e.get("reason") == "FailedScheduling"
                                  and text in e.get("message", "")],
                         "a FailedScheduling event of %s saying %r" % (name, text))

    def frac(self, name, request):
        NODE.cluster.create(pod_obj(name, {P + "main.gpu-memory.request": request},
                                    ["/usr/bin/shimprobe", "info", "hold", "300"]))

    def test_whole_gpus_and_fractions_never_share_a_gpu(self):
        api = NODE.cluster
        # a whole GPU first: the kubelet's device manager picks it
        api.create(whole_pod("whole-a"))
        self.assertEqual(len(self.whole_gpus_of("whole-a")), 1)
        gpu_a = self.whole_gpus_of("whole-a")[0]
        gpu_b = [u for u in self.uuids if u != gpu_a][0]
        # a fraction: placed only once a reservation pod holds a GPU, which
        # the device plugin can only give from those it has not given away
        self.frac("frac-1", "1Gi")
        self.assertEqual(self.devices("frac-1"), gpu_b)
        self.assertEqual(list(self.reservations().values()), [gpu_b])
        self.assertIn([gpu_b], self.dp.allocations)
        self.wait(lambda: "holding=" in NODE.pod_log("frac-1"), "frac-1 running")
        # a second whole-GPU pod does not over-commit: both GPUs are taken
        # (whole-a's, and the reservation's, which hosts the fraction)
        api.create(whole_pod("whole-b"))
        self.failed_scheduling("whole-b", "Insufficient " + device_plugin.RESOURCE)
        self.assertFalse(api.pod("whole-b")["spec"].get("nodeName"))
        # more fractions share the reserved GPU, with no new reservation
        self.frac("frac-2", "1Gi")
        self.assertEqual(self.devices("frac-2"), gpu_b)
        self.assertEqual(len(self.reservations()), 1)
        # one that does not fit there waits, saying why, and is never put on
        # whole-a's GPU
        self.frac("frac-big", "3584Mi")
        self.failed_scheduling("frac-big", "the device plugin has given all 2 GPUs")
        self.assertFalse(api.pod("frac-big")["spec"].get("nodeName"))
        # whole-a's GPU comes free: now it is reserved and frac-big goes there
        api.delete_pod("whole-b")
        self.wait(lambda: api.pod("whole-b") is None, "whole-b gone")
        api.delete_pod("whole-a")
        self.assertEqual(self.devices("frac-big"), gpu_a)
        self.assertEqual(sorted(self.reservations().values()), sorted([gpu_a, gpu_b]))
        # fractions gone: the reservations are given back (after
        # --reservation-idle-s) and a pod asking both whole GPUs runs
        for n in ("frac-1", "frac-2", "frac-big"):
            api.delete_pod(n)
        self.wait(lambda: not self.reservations(), "the reservations given back")
        self.wait(lambda: NODE.gf.metric("gpufrac_scheduler_gpu_open",
                                         'node="%s"' % NODE_NAME) == 0, "GPUs closed again")
        api.create(whole_pod("whole-c", gpus=2))
        self.assertEqual(sorted(self.whole_gpus_of("whole-c")), sorted(self.uuids))
        api.delete_pod("whole-c")


if __name__ == "__main__":
    REASON = skip_reason()
    if REASON:
        print("SKIP: " + REASON)
        sys.exit(77)
    enter_private_namespace()
    cases.main(verbosity=2)
