# SPDX-License-Identifier: Apache-2.0
"""An operator's one-node cluster, for applying the chart as an operator does:
etcd, kube-apiserver (privileged pods allowed, service-account tokens signed,
the ServiceAccount admission on), kube-controller-manager (every default
controller: DaemonSets, Deployments, ReplicaSets, tokens, service accounts,
endpoints, namespaces, garbage collection, node lifecycle), kube-proxy
(iptables), kube-scheduler, and the node: containerd and the kubelet as a
node runs them, on their default paths (/etc/containerd/config.toml,
/run/containerd/containerd.sock, /var/lib/kubelet) with the bridge CNI plugin.

Invariant: nothing of it reaches the real host. The test re-executes itself
(enter()) in new mount, network and PID namespaces:
- mount: overlays over /etc, /usr/local and /run (their upper layers on a
  tmpfs of the namespace), tmpfs over /var/lib, /var/log and /dev/shm, so what the
  chart's installer writes into the node's /usr/local, /etc/containerd and
  /etc/gpufrac, and what containerd and the kubelet keep, exists only there;
- network: lo with the node's address (NODE_IP) and the Service range, the
  CNI bridge and kube-proxy's iptables rules exist only there;
- PID: the test's shell is PID 1, so the installer's `nsenter -t 1` enters
  this node's root (not the host's), and every process of the node ends with
  the namespace.
The kubelet sets vm.overcommit_memory, kernel.panic and kernel.panic_on_oops
machine-wide; the outer process puts back the values it found, and removes
the kubelet's cgroups and the scratch directory.

Stand-ins, for what cannot run here only: the GPU is gpusim (installed in
the node's /usr/local/lib as its driver, its device the state file in the
node's /dev/shm), and the NVIDIA
container toolkit (which would mount the driver into containers that ask for
NVIDIA_VISIBLE_DEVICES) is tests/fakes/nvidia-container-runtime, which mounts
gpusim instead and execs runc; containerd's default runtime is it, as
`nvidia-ctk runtime configure --set-as-default` makes it. systemd is not PID 1
here: tests/fakes/systemctl (bound over /usr/bin/systemctl in the namespace)
restarts the node's containerd and kube-scheduler as `systemctl restart`
would (both run under a supervisor loop, as with Restart=always). The
sandbox (pause) image is crinode's, imported as a node's would be pulled."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "cri"))
import cluster as C  # noqa: E402

FAKES = os.path.abspath(os.path.join(HERE, "..", "fakes"))
NODE_NAME = "gpu-node-0"
NODE_IP = "10.250.0.1"
SERVICE_CIDR = "10.96.0.0/16"
API_SERVICE_IP = "10.96.0.1"
POD_CIDR = "10.244.0.0/24"
NS_MARK = "GPUFRAC_OPERATOR_CLUSTER_NS"
OVERLAYS = ("/etc", "/usr/local", "/run")
TMPFS = ("/var/lib", "/var/log", "/dev/shm")
SYSCTLS = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops")
COMPONENTS = ("kube-apiserver", "kube-scheduler", "kubelet", "kube-controller-manager",
              "kube-proxy")
CONTAINERD_SOCK = "/run/containerd/containerd.sock"
CONTROL_DIR = "/run/gpufrac-test"  # the systemctl stand-in's supervisor files
KS_CONFIG = "/etc/kubernetes/scheduler-config.yaml"
KS_KUBECONFIG = "/etc/kubernetes/scheduler.conf"
CNI_BIN = next((d for d in ("/usr/lib/cni", "/opt/cni/bin")
                if os.access(os.path.join(d, "bridge"), os.X_OK)), None)


def kube_bin():
    """The components' directory (every one of COMPONENTS built), or None."""
    d = C.kube_bin()
    if d and all(os.access(os.path.join(d, w), os.X_OK) for w in COMPONENTS):
        return d
    return None


def missing():
    """Why this cluster cannot run here, or None."""
    if os.geteuid() != 0:
        return "the operator's cluster needs root (namespaces, mounts, cgroups, containerd)"
    if not kube_bin():
        return ("%s not all built: run scripts/kube-build.sh (make check does; it builds "
                "each missing one once)" % ", ".join(COMPONENTS))
    for tool in ("etcd", "openssl", "containerd", "ctr", "runc", "unshare", "nsenter", "ip",
                 "iptables", "iptables-restore", "kubectl", "umoci"):
        if not (shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")):
            return "%s is not installed (scripts/deps.sh installs it)" % tool
    if not CNI_BIN:
        return "the CNI bridge plugin is not installed (containernetworking-plugins)"
    return None


def enter():
    """Re-executes the running test in its private namespaces (see the top of
    the file); returns the scratch directory in the child, exits with the
    child's status in the parent."""
    if os.environ.get(NS_MARK) == "1":
        tmp = os.environ["GPUFRAC_OPERATOR_TMP"]
        _inside(tmp)
        return tmp
    tmp = tempfile.mkdtemp(prefix="gpufrac-chart-")
    host = host_files()
    env = dict(os.environ, **{NS_MARK: "1", "GPUFRAC_OPERATOR_OUTER": str(os.getpid()),
                              "GPUFRAC_OPERATOR_TMP": tmp})
    # a shell as PID 1 reaps what the node's processes orphan
    argv = ["unshare", "--mount", "--net", "--pid", "--fork", "--mount-proc",
            "--propagation", "private", "sh", "-c", '"$@"; exit $?', "sh",
            sys.executable, os.path.abspath(sys.argv[0])] + sys.argv[1:]
    saved = {}
    for s in SYSCTLS:
        with open("/proc/sys/" + s) as f:
            saved[s] = f.read()
    child = subprocess.Popen(argv, env=env)
    try:
        rc = child.wait()
    except BaseException:
        child.terminate()
        child.wait(60)
        raise
    finally:
        for s, v in saved.items():
            with open("/proc/sys/" + s, "w") as f:
                f.write(v)
        remove_cgroups(cgroup_name())
        subprocess.run(["rm", "-rf", tmp], capture_output=True)
    if rc in (0, 1) and host_files() != host:
        print("FAIL: the real host's files changed under the test: %s, now %s"
              % (host, host_files()))
        rc = 1
    sys.exit(rc)


def host_files():
    """What the installer would change on the real host, were it not for the
    namespace: the paths it writes, with their contents' digest."""
    import hashlib
    out = {}
    for p in ("/usr/local/bin/gpufrac-runtime", "/usr/local/lib/gpufrac",
              "/etc/containerd/config.toml", "/etc/containerd/conf.d", "/etc/gpufrac",
              "/usr/local/bin/nvidia-container-runtime"):
        if os.path.isfile(p):
            with open(p, "rb") as f:
                out[p] = hashlib.sha256(f.read()).hexdigest()
        elif os.path.exists(p):
            out[p] = sorted(os.listdir(p)) if os.path.isdir(p) else "exists"
    return out


def cgroup_name():
    return "gpufrac-chart-%s" % os.environ.get("GPUFRAC_OPERATOR_OUTER", os.getpid())


def _inside(tmp):
    def sh(*argv):
        subprocess.run(argv, check=True, capture_output=True)
    sh("ip", "link", "set", "lo", "up")
    sh("ip", "addr", "add", NODE_IP + "/32", "dev", "lo")
    # a route for the Services (a node has its default route), from the
    # node's address: kube-proxy's DNAT comes after routing
    sh("ip", "route", "add", SERVICE_CIDR, "dev", "lo", "src", NODE_IP)
    layers = os.path.join(tmp, "layers")
    os.makedirs(layers)
    sh("mount", "-t", "tmpfs", "-o", "mode=0700", "gpufrac-layers", layers)
    for d in OVERLAYS:
        up, work = (os.path.join(layers, d.strip("/").replace("/", "-"), n)
                    for n in ("upper", "work"))
        os.makedirs(up)
        os.makedirs(work)
        sh("mount", "-t", "overlay", "-o", "lowerdir=%s,upperdir=%s,workdir=%s" % (d, up, work),
           "gpufrac-" + d.strip("/").replace("/", "-"), d)
    for d in TMPFS:
        sh("mount", "-t", "tmpfs", "-o", "mode=1777" if d == "/dev/shm" else "mode=0755",
           "gpufrac-node", d)
    sh("mount", "--bind", os.path.join(FAKES, "systemctl"), "/usr/bin/systemctl")


def remove_cgroups(name):
    for top in cgroup_tops():
        root = os.path.join(top, name)
        if not os.path.isdir(root):
            continue
        for dirpath, _, _ in sorted(os.walk(root), key=lambda w: -len(w[0])):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass


def cgroup_tops():
    base = "/sys/fs/cgroup"
    if os.path.exists(os.path.join(base, "cgroup.controllers")):
        return [base]
    return [os.path.join(base, h) for h in sorted(os.listdir(base))
            if os.path.isdir(os.path.join(base, h)) and not os.path.islink(os.path.join(base, h))]


def make_cgroups(name):
    """The kubelet wants its --cgroup-root in every hierarchy."""
    for top in cgroup_tops():
        os.makedirs(os.path.join(top, name), exist_ok=True)
        for f in ("cpuset.cpus", "cpuset.mems"):  # v1 cpuset starts empty
            if os.path.exists(os.path.join(top, f)):
                with open(os.path.join(top, f)) as src:
                    v = src.read().strip()
                with open(os.path.join(top, name, f), "w") as dst:
                    dst.write(v)


GLIBC = ("libc.so", "libm.so", "ld-linux", "libpthread.so", "libdl.so", "librt.so")


def make_certs(d):
    """cluster.make_certs, with the API server's certificate also valid for
    the node's address and the `kubernetes` Service (what pods connect to)."""
    certs = C.make_certs(d)
    ext = os.path.join(d, "ext-operator.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,IP:%s,IP:%s,DNS:localhost,DNS:kubernetes,"
                "DNS:kubernetes.default,DNS:kubernetes.default.svc\n"
                "extendedKeyUsage=serverAuth\n" % (NODE_IP, API_SERVICE_IP))
    C.run(["openssl", "x509", "-req", "-in", os.path.join(d, "apiserver.csr"), "-CA",
           certs["ca"], "-CAkey", os.path.join(d, "ca.key"), "-CAcreateserial", "-out",
           certs["crt"], "-days", "2", "-extfile", ext])
    return certs


TOKENS = {  # the control plane's users (static tokens; each its own group)
    "system:kube-controller-manager": "gpufrac-test-kcm",
    "system:kube-scheduler": C.KSCHED_TOKEN,
    "system:kube-proxy": "gpufrac-test-kube-proxy",
}


class OperatorCluster(C.Cluster):
    """etcd, kube-apiserver, kube-controller-manager, kube-proxy,
    kube-scheduler, containerd and the kubelet of one node (NODE_NAME)."""

    def __init__(self, tmp):  # pylint: disable=super-init-not-called
        self.tmp = tmp
        self.bin = kube_bin()
        self.certs = make_certs(tmp)
        self.tokens = os.path.join(tmp, "tokens.csv")
        with open(self.tokens, "w") as f:
            f.write('%s,admin,admin,"system:masters"\n' % C.ADMIN_TOKEN)
            for user, tok in TOKENS.items():
                f.write("%s,%s,%s\n" % (tok, user, user))
        self.port = C.free_port()
        self.url = "https://%s:%d" % (NODE_IP, self.port)
        import ssl
        self.ctx = ssl.create_default_context(cafile=self.certs["ca"])
        self.etcd_port, peer = C.free_port(), C.free_port()
        etcd_url = "http://127.0.0.1:%d" % self.etcd_port
        self.etcd = C.Proc("etcd", [
            "etcd", "--name", "gpufrac-test", "--data-dir", os.path.join(tmp, "etcd"),
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
            "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
            "--initial-cluster", "gpufrac-test=http://127.0.0.1:%d" % peer,
            "--listen-metrics-urls", "http://127.0.0.1:%d" % C.free_port(),
            "--log-level", "warn"], os.path.join(tmp, "etcd.log"))
        c = self.certs
        self.apiserver = C.Proc("kube-apiserver", [
            os.path.join(self.bin, "kube-apiserver"), "--etcd-servers", etcd_url,
            "--bind-address", NODE_IP, "--advertise-address", NODE_IP,
            "--secure-port", str(self.port), "--insecure-port", "0",
            "--tls-cert-file", c["crt"], "--tls-private-key-file", c["key"],
            "--client-ca-file", c["ca"], "--cert-dir", os.path.join(tmp, "apiserver-certs"),
            "--token-auth-file", self.tokens, "--authorization-mode", "Node,RBAC",
            "--allow-privileged=true",
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", c["sa_pub"],
            "--service-account-signing-key-file", c["sa_key"],
            "--api-audiences", "https://kubernetes.default.svc",
            "--service-cluster-ip-range", SERVICE_CIDR,
            "--kubelet-preferred-address-types", "InternalIP",
            "--profiling=false", "--v=1"], os.path.join(tmp, "kube-apiserver.log"))
        kc = lambda who: self.kubeconfig(os.path.join(tmp, who + ".kubeconfig"),  # noqa: E731
                                         TOKENS.get("system:" + who, C.ADMIN_TOKEN))
        self.admin_kubeconfig = self.kubeconfig(os.path.join(tmp, "admin.kubeconfig"),
                                                C.ADMIN_TOKEN)
        kcm = kc("kube-controller-manager")
        self.controller_manager = C.Proc("kube-controller-manager", [
            os.path.join(self.bin, "kube-controller-manager"), "--kubeconfig", kcm,
            "--authentication-kubeconfig", kcm, "--authorization-kubeconfig", kcm,
            "--bind-address", "127.0.0.1", "--secure-port", str(C.free_port()), "--port", "0",
            "--cert-dir", os.path.join(tmp, "kcm-certs"),
            "--service-account-private-key-file", c["sa_key"], "--root-ca-file", c["ca"],
            "--use-service-account-credentials=true", "--controllers", "*",
            "--leader-elect=false", "--node-monitor-period", "2s",
            "--concurrent-deployment-syncs", "2", "--profiling=false", "--v=1"],
            os.path.join(tmp, "kube-controller-manager.log"))
        self.proxy_healthz = C.free_port()
        self.proxy = C.Proc("kube-proxy", [
            os.path.join(self.bin, "kube-proxy"), "--kubeconfig", kc("kube-proxy"),
            "--proxy-mode", "iptables", "--cluster-cidr", POD_CIDR,
            "--hostname-override", NODE_NAME, "--bind-address", NODE_IP,
            "--healthz-bind-address", "127.0.0.1:%d" % self.proxy_healthz,
            "--metrics-bind-address", "127.0.0.1:%d" % C.free_port(),
            # leave the machine-wide conntrack sysctls alone
            "--conntrack-max-per-core", "0", "--conntrack-tcp-timeout-established", "0",
            "--conntrack-tcp-timeout-close-wait", "0", "--v=1"],
            os.path.join(tmp, "kube-proxy.log"))
        self.ks = self.containerd = self.kubelet = None
        self.timeline = []

    # --- start-up ---

    def mark(self, what):
        self.timeline.append((what, time.monotonic()))

    def start(self):
        self.t0 = time.monotonic()
        self.etcd.start()
        self.start_apiserver()
        self.mark("kube-apiserver ready")
        self.controller_manager.start()
        self.proxy.start()
        self.start_scheduler()
        self.mark("kube-scheduler healthy")
        self.write_node_config()
        self.start_containerd()
        self.mark("containerd serving")
        self.start_kubelet()
        self.mark("node %s Ready" % NODE_NAME)
        C.wait_for(self.proxy_synced, "kube-proxy /healthz", proc=self.proxy, timeout=60,
                   interval=0.2)
        self.mark("kube-proxy synced")
        # the token controller made the default service account's token
        C.wait_for(lambda: self.get_or_none("/api/v1/namespaces/default/serviceaccounts/default"),
                   "the default service account", proc=self.controller_manager, timeout=120)
        self.mark("service accounts made")
        return self

    def proxy_synced(self):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % self.proxy_healthz,
                                        timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    def figure(self):
        """The start-up as a line: each milestone's second since the start."""
        return "; ".join("%s %.1f s" % (w, t - self.t0) for w, t in self.timeline)

    def supervised(self, unit, argv, env=None):
        """argv as systemd runs a unit with Restart=always: started again
        whenever it exits; its pid in CONTROL_DIR/<unit>.pid, where the
        systemctl stand-in finds it."""
        os.makedirs(CONTROL_DIR, exist_ok=True)
        loop = ('trap \'kill "$c" 2>/dev/null; wait "$c"; exit 0\' TERM; '
                'while :; do "$@" & c=$!; echo "$c" >%s/%s.pid; wait "$c"; '
                'echo "%s exited: $?" >&2; sleep 0.2; done' % (CONTROL_DIR, unit, unit))
        return C.Proc(unit, ["sh", "-c", loop, "sh"] + argv,
                      os.path.join(self.tmp, unit + ".log"), env=env).start()

    def unit_pid(self, unit):
        try:
            with open(os.path.join(CONTROL_DIR, unit + ".pid")) as f:
                return int(f.read())
        except (OSError, ValueError):
            return None

    def start_scheduler(self):
        """kube-scheduler as a control-plane node runs it: its configuration
        in /etc/kubernetes/scheduler-config.yaml (here first the default
        scheduler's, with no extender), its credentials in
        /etc/kubernetes/scheduler.conf, health on the default :10251."""
        os.makedirs("/etc/kubernetes", exist_ok=True)
        kc = self.kubeconfig(KS_KUBECONFIG, C.KSCHED_TOKEN)
        self.write_plain_scheduler_config()
        self.ks = self.supervised("kube-scheduler", [
            os.path.join(self.bin, "kube-scheduler"), "--config", KS_CONFIG,
            "--bind-address", "127.0.0.1", "--secure-port", str(C.free_port()),
            "--cert-dir", os.path.join(self.tmp, "kube-scheduler-certs"),
            "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc, "--v=2"])
        self.wait_scheduler()

    def write_plain_scheduler_config(self):
        """kube-scheduler's configuration without the extender."""
        with open(KS_CONFIG, "w") as f:
            f.write("apiVersion: kubescheduler.config.k8s.io/v1beta1\n"
                    "kind: KubeSchedulerConfiguration\n"
                    "clientConnection:\n  kubeconfig: %s\n" % KS_KUBECONFIG)

    def scheduler_healthy(self):
        try:
            with urllib.request.urlopen("http://127.0.0.1:10251/healthz", timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    def wait_scheduler(self):
        C.wait_for(self.scheduler_healthy, "kube-scheduler /healthz on :10251", proc=self.ks,
                   timeout=90, interval=0.2)

    def write_node_config(self):
        """The node's /etc/containerd/config.toml (Debian's stock file, the
        NVIDIA toolkit set as the default runtime, the sandbox image, and
        restrict_oom_score_adj: this machine refuses the kubelet's -998 for
        the sandbox, as in the CRI suite) and its CNI network (/etc/cni/net.d)."""
        os.makedirs("/etc/containerd", exist_ok=True)
        with open("/etc/containerd/config.toml", "w") as f:
            f.write("""version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "localhost/gpufrac-test/pause:1"
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "%s"
      conf_dir = "/etc/cni/net.d"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "nvidia"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
          BinaryName = "/usr/local/bin/nvidia-container-runtime"
  [plugins."io.containerd.internal.v1.opt"]
    path = "/var/lib/containerd/opt"
""" % CNI_BIN)
        os.makedirs("/etc/cni/net.d", exist_ok=True)
        with open("/etc/cni/net.d/10-gpufrac-test.conflist", "w") as f:
            json.dump({"cniVersion": "0.4.0", "name": "gpufrac-test", "plugins": [{
                "type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False,
                "hairpinMode": True, "ipam": {"type": "host-local", "ranges": [[{
                    "subnet": POD_CIDR}]], "routes": [{"dst": "0.0.0.0/0"}]}}]}, f)
        shutil.copy(os.path.join(FAKES, "nvidia-container-runtime"),
                    "/usr/local/bin/nvidia-container-runtime")
        # the GPU: gpusim installed as the node's driver (/usr/local/lib,
        # the loader's cache), its default device (one of 16 GiB) and state
        # file in the node's /dev/shm, which the toolkit stand-in mounts into
        # containers with the libraries
        import crinode
        libs = []
        for lib in ("libcuda.so.1", "libnvidia-ml.so.1"):
            shutil.copy(os.path.join(crinode.GPUSIM, lib), "/usr/local/lib/" + lib)
            libs.append("/usr/local/lib/" + lib)
            for so in crinode.libs_of(os.path.join(crinode.GPUSIM, lib)):
                if not os.path.basename(so).startswith(GLIBC) and so not in libs:
                    libs.append(so)
        subprocess.run(["ldconfig"], check=True)
        subprocess.run([crinode.PROBE, "info"], check=True, capture_output=True)
        state = [os.path.join("/dev/shm", n) for n in os.listdir("/dev/shm")
                 if n.startswith("gpusim-0-")]
        assert len(state) == 1, state
        os.makedirs("/etc/nvidia-container-runtime", exist_ok=True)
        with open("/etc/nvidia-container-runtime/gpusim.json", "w") as f:
            json.dump({"libs": libs, "state": state[0]}, f)

    def start_containerd(self):
        """containerd as its unit runs it: no flags, /etc/containerd/config.toml."""
        self.containerd = self.supervised("containerd", ["containerd"])
        self.wait_containerd()

    def wait_containerd(self):
        C.wait_for(lambda: subprocess.run(["ctr", "version"], capture_output=True).returncode
                   == 0, "containerd on " + CONTAINERD_SOCK, proc=self.containerd, timeout=60,
                   interval=0.1)

    def start_kubelet(self):
        t = self.tmp
        self.kubelet_port = C.free_port()
        self.cgroup = cgroup_name()
        make_cgroups(self.cgroup)
        cfg = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "address": NODE_IP, "port": self.kubelet_port, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": C.free_port(),
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "cgroupDriver": "cgroupfs", "cgroupRoot": "/" + self.cgroup,
            "failSwapOn": False, "protectKernelDefaults": False,
            "syncFrequency": "2s", "nodeStatusUpdateFrequency": "2s",
            "fileCheckFrequency": "2s", "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "0%",
                             "imagefs.available": "0%", "nodefs.inodesFree": "0%"},
            "serializeImagePulls": False,
        }
        path = os.path.join(t, "kubelet.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        self.kubelet = C.Proc("kubelet", [
            os.path.join(self.bin, "kubelet"), "--config", path,
            "--kubeconfig", self.admin_kubeconfig,
            "--container-runtime", "remote",
            "--container-runtime-endpoint", "unix://" + CONTAINERD_SOCK,
            "--hostname-override", NODE_NAME, "--node-ip", NODE_IP, "--v=2"],
            os.path.join(t, "kubelet.log")).start()
        C.wait_for(self.node_ready, "the kubelet's Node %s Ready" % NODE_NAME, timeout=180,
                   proc=self.kubelet, interval=0.2)

    def node_ready(self):
        n = self.get_or_none("/api/v1/nodes/" + NODE_NAME)
        return n and any(c["type"] == "Ready" and c["status"] == "True"
                         for c in n.get("status", {}).get("conditions", [])) and not any(
            t["key"] == "node.kubernetes.io/not-ready" for t in n["spec"].get("taints") or [])

    def procs(self):
        return [p for p in (self.kubelet, self.containerd, self.ks, self.proxy,
                            self.controller_manager, self.apiserver, self.etcd) if p]

    def logs(self, n=25):
        return "\n".join("--- %s\n%s" % (p.name, p.tail(n)) for p in self.procs())

    def stop(self):
        for p in self.procs():
            p.stop()
