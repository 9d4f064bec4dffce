# SPDX-License-Identifier: Apache-2.0
"""Real Kubernetes control-plane components on 127.0.0.1 for tests and bench:
etcd (Debian's etcd-server), kube-apiserver and kube-scheduler (built from
Debian's `kubernetes` source package by scripts/kube-build.sh), and
gpufrac-scheduler, each on free ports with private directories; certificates
and the service-account signing key are made here with openssl.

Authentication: the test itself is "admin" (group system:masters) by a static
token; kube-scheduler of layout B is the user system:kube-scheduler (static
token, as a control-plane scheduler is); gpufrac-scheduler and layout A's
kube-scheduler run with a real service-account token of
gpufrac-system/gpufrac-scheduler from the TokenRequest API. RBAC is the only
authorizer; the RBAC objects are deploy/scheduler/rbac.yaml and
rbac-second-scheduler.yaml as shipped.

No kubelet and no controller-manager: Nodes are made by the caller (status
with capacity and Ready through the status subresource), the ServiceAccount
admission plugin is off (it waits for the token controller)."""
import atexit
import glob
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

# the suites' shared helpers, also when a bench imports this file directly
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ports import free_port  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("GPUFRAC_SOURCE") or os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("GPUFRAC_BUILD") or os.path.join(SOURCE, "build")
GPUFRAC_SCHEDULER = os.path.join(BUILD, "bin", "gpufrac-scheduler")
DEPLOY = os.path.join(SOURCE, "deploy", "scheduler")
ADMIN_TOKEN = "gpufrac-test-admin"
KSCHED_TOKEN = "gpufrac-test-kube-scheduler"
SA_NS, SA_NAME = "gpufrac-system", "gpufrac-scheduler"
KUBE_WHAT = ("kube-apiserver", "kube-scheduler")


def kube_bin():
    """The directory with the built components, or None."""
    cands = [os.environ.get("GPUFRAC_KUBE_BIN", "")]
    cands += sorted(glob.glob(os.path.join(
        os.environ.get("GPUFRAC_KUBE_CACHE", "/var/cache/gpufrac"), "kubernetes-*", "bin")))
    for d in cands:
        if d and all(os.access(os.path.join(d, w), os.X_OK) for w in KUBE_WHAT):
            return d
    return None


def missing():
    """Why the real components cannot run here (None when they can)."""
    if not kube_bin():
        return ("kube-apiserver/kube-scheduler not built: run scripts/kube-build.sh "
                "(make check does)")
    for tool in ("etcd", "openssl"):
        if not shutil.which(tool):
            return "%s is not installed (scripts/kube-build.sh installs it)" % tool
    if not os.access(GPUFRAC_SCHEDULER, os.X_OK):
        return "%s is not built" % GPUFRAC_SCHEDULER
    return None


def wait_for(fn, what, timeout=60, proc=None, interval=0.05):
    """Polls fn until it returns a true value (returned). Not a timed
    assertion: the limit only stops a hung test."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            raise AssertionError("%s: %s exited (%s) while waiting for %s:\n%s"
                                 % (proc.name, proc.name, proc.returncode, what, proc.tail()))
        if time.monotonic() > deadline:
            raise AssertionError("gave up waiting for %s" % what)
        time.sleep(interval)


RUNNING = set()


def _stop_all():
    for p in list(RUNNING):
        p.stop(signal.SIGKILL)


atexit.register(_stop_all)  # nothing outlives the test, whatever failed
# SIGTERM (ctest's timeout, timeout(1)) ends through sys.exit, so atexit runs
signal.signal(signal.SIGTERM, lambda sig, frame: sys.exit(128 + sig))


class Proc:
    """One component process with its log."""

    def __init__(self, name, argv, log_path, env=None):
        self.name, self.argv, self.log_path, self.env = name, argv, log_path, env
        self.p = None
        self.starts = 0

    def start(self):
        self.starts += 1
        self.log = open(self.log_path, "a")
        self.log.write("=== start %d: %s\n" % (self.starts, " ".join(self.argv)))
        self.log.flush()
        self.p = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT,
                                  env=self.env, start_new_session=True)
        RUNNING.add(self)
        return self

    def poll(self):
        return self.p.poll() if self.p else 0

    @property
    def returncode(self):
        return self.p.returncode if self.p else None

    @property
    def pid(self):
        return self.p.pid

    def stop(self, sig=signal.SIGTERM):
        if self.p is None:
            return
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.p = None
        RUNNING.discard(self)
        self.log.close()

    def tail(self, n=60):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def text(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()


def run(argv, **kw):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)


def make_certs(d):
    """CA, the API server's certificate (127.0.0.1, localhost) and the
    service-account signing key pair."""
    ca_key, ca = os.path.join(d, "ca.key"), os.path.join(d, "ca.crt")
    key, csr, crt = (os.path.join(d, n) for n in ("apiserver.key", "apiserver.csr",
                                                   "apiserver.crt"))
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n"
                "extendedKeyUsage=serverAuth\n")
    run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key,
         "-out", ca, "-days", "2", "-subj", "/CN=gpufrac-test-ca"])
    run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
         "-subj", "/CN=kube-apiserver"])
    run(["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
         "-out", crt, "-days", "2", "-extfile", ext])
    sa_key, sa_pub = os.path.join(d, "sa.key"), os.path.join(d, "sa.pub")
    run(["openssl", "genrsa", "-out", sa_key, "2048"])
    run(["openssl", "rsa", "-in", sa_key, "-pubout", "-out", sa_pub])
    return {"ca": ca, "key": key, "crt": crt, "sa_key": sa_key, "sa_pub": sa_pub}


class ApiError(Exception):
    def __init__(self, status, body):
        super().__init__("HTTP %d: %s" % (status, body))
        self.status, self.body = status, body


# kind -> (API prefix, plural, namespaced)
KINDS = {
    "Namespace": ("/api/v1", "namespaces", False),
    "Node": ("/api/v1", "nodes", False),
    "Pod": ("/api/v1", "pods", True),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "PriorityClass": ("/apis/scheduling.k8s.io/v1", "priorityclasses", False),
    "RuntimeClass": ("/apis/node.k8s.io/v1", "runtimeclasses", False),
    "Lease": ("/apis/coordination.k8s.io/v1", "leases", True),
}


class Cluster:
    """etcd + kube-apiserver. Use as a context manager."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.bin = kube_bin()
        self.certs = make_certs(tmp)
        self.tokens = os.path.join(tmp, "tokens.csv")
        with open(self.tokens, "w") as f:
            f.write('%s,admin,admin,"system:masters"\n' % ADMIN_TOKEN)
            f.write("%s,system:kube-scheduler,system:kube-scheduler\n" % KSCHED_TOKEN)
        self.etcd_port, peer = free_port(), free_port()
        self.port = free_port()
        self.url = "https://127.0.0.1:%d" % self.port
        self.ctx = ssl.create_default_context(cafile=self.certs["ca"])
        etcd_url = "http://127.0.0.1:%d" % self.etcd_port
        self.etcd = Proc("etcd", [
            "etcd", "--name", "gpufrac-test", "--data-dir", os.path.join(tmp, "etcd"),
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
            "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
            "--initial-cluster", "gpufrac-test=http://127.0.0.1:%d" % peer,
            "--listen-metrics-urls", "http://127.0.0.1:%d" % free_port(),
            "--log-level", "warn"], os.path.join(tmp, "etcd.log"))
        c = self.certs
        self.apiserver = Proc("kube-apiserver", [
            os.path.join(self.bin, "kube-apiserver"),
            "--etcd-servers", etcd_url,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(self.port), "--insecure-port", "0",
            "--tls-cert-file", c["crt"], "--tls-private-key-file", c["key"],
            # also makes kube-system/extension-apiserver-authentication, which
            # kube-scheduler's own HTTPS port reads
            "--client-ca-file", c["ca"],
            "--cert-dir", os.path.join(tmp, "apiserver-certs"),
            "--token-auth-file", self.tokens,
            "--authorization-mode", "RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", c["sa_pub"],
            "--service-account-signing-key-file", c["sa_key"],
            "--api-audiences", "https://kubernetes.default.svc",
            "--service-cluster-ip-range", "10.96.0.0/16",
            "--disable-admission-plugins", "ServiceAccount",
            "--profiling=false", "--v=1"], os.path.join(tmp, "kube-apiserver.log"))

    # --- lifecycle ---

    def start(self):
        self.etcd.start()
        self.start_apiserver()
        return self

    def start_apiserver(self):
        self.apiserver.start()
        wait_for(self.healthy, "kube-apiserver /readyz", timeout=120, proc=self.apiserver,
                 interval=0.2)
        # RBAC's bootstrap roles are in place once this one is
        wait_for(lambda: self.get_or_none("/apis/rbac.authorization.k8s.io/v1/clusterroles/"
                                          "system:kube-scheduler"),
                 "bootstrap RBAC roles", proc=self.apiserver)

    def healthy(self):
        try:
            return self.raw("GET", "/readyz")[0] == 200
        except (OSError, ApiError):
            return False

    def stop(self):
        self.apiserver.stop()
        self.etcd.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # --- REST ---

    def raw(self, method, path, body=None, token=ADMIN_TOKEN, ctype="application/json"):
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + token)
        if data is not None:
            req.add_header("Content-Type", ctype)
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=60) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def req(self, method, path, body=None, token=ADMIN_TOKEN, ctype="application/json",
            ok=(200, 201, 202)):
        status, data = self.raw(method, path, body, token, ctype)
        if status not in ok:
            raise ApiError(status, data.decode(errors="replace"))
        return json.loads(data) if data else None

    def get(self, path):
        return self.req("GET", path)

    def get_or_none(self, path):
        status, data = self.raw("GET", path)
        return json.loads(data) if status == 200 else None

    @staticmethod
    def path_of(obj, name=None):
        prefix, plural, namespaced = KINDS[obj["kind"]]
        p = prefix
        if namespaced:
            p += "/namespaces/" + obj["metadata"].get("namespace", "default")
        p += "/" + plural
        if name:
            p += "/" + name
        return p

    def create(self, obj):
        return self.req("POST", self.path_of(obj), obj)

    def apply_all(self, docs):
        """Creates every document (already there: left as it is)."""
        for d in docs:
            if d is None:
                continue
            status, data = self.raw("POST", self.path_of(d), d)
            if status not in (200, 201, 409):
                raise ApiError(status, data.decode(errors="replace"))

    def pods(self, ns="default", selector=None):
        q = "?labelSelector=" + urllib.parse.quote(selector) if selector else ""
        return self.get("/api/v1/namespaces/%s/pods%s" % (ns, q))["items"]

    def pod(self, name, ns="default"):
        return self.get_or_none("/api/v1/namespaces/%s/pods/%s" % (ns, name))

    def delete_pod(self, name, ns="default"):
        self.req("DELETE", "/api/v1/namespaces/%s/pods/%s" % (ns, name),
                 {"gracePeriodSeconds": 0}, ok=(200, 202, 404))

    def delete_pods(self, ns="default", selector=None):
        q = "?labelSelector=" + urllib.parse.quote(selector) if selector else ""
        self.req("DELETE", "/api/v1/namespaces/%s/pods%s" % (ns, q), {"gracePeriodSeconds": 0})

    def add_node(self, name, gpus=None, labels=None, gfd=None, cpu="256", pods="1000"):
        """A Node with the agent's gpufrac.io/gpus (gpus: [(uuid, index, bytes)])
        and/or GFD labels (gfd: (count, MiB)), Ready, with capacity."""
        ann, lab = {}, dict(labels or {})
        if gpus is not None:
            ann["gpufrac.io/gpus"] = json.dumps(
                [{"uuid": u, "index": i, "memory": m} for u, i, m in gpus])
        if gfd is not None:
            lab["nvidia.com/gpu.count"], lab["nvidia.com/gpu.memory"] = str(gfd[0]), str(gfd[1])
        self.create({"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": name, "labels": lab, "annotations": ann}})
        cap = {"cpu": cpu, "memory": "2Ti", "pods": pods}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.req("PATCH", "/api/v1/nodes/%s/status" % name,
                 {"status": {"capacity": cap, "allocatable": cap, "conditions": [
                     {"type": "Ready", "status": "True", "reason": "KubeletReady",
                      "message": "made Ready by the test", "lastHeartbeatTime": now,
                      "lastTransitionTime": now}]}},
                 ctype="application/merge-patch+json")
        # the TaintNodesByCondition admission's not-ready taint: a
        # controller-manager would lift it once the node is Ready
        self.req("PATCH", "/api/v1/nodes/%s" % name, {"spec": {"taints": None}},
                 ctype="application/merge-patch+json")

    def delete_nodes(self, selector):
        self.req("DELETE", "/api/v1/nodes?labelSelector=" + urllib.parse.quote(selector), {})

    def events(self, name, ns="default"):
        sel = urllib.parse.quote("involvedObject.name=%s" % name)
        return self.get("/api/v1/namespaces/%s/events?fieldSelector=%s" % (ns, sel))["items"]

    def sa_token(self, ns=SA_NS, name=SA_NAME, seconds=7200):
        tr = self.req("POST", "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (ns, name),
                      {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                       "spec": {"audiences": ["https://kubernetes.default.svc"],
                                "expirationSeconds": seconds}})
        return tr["status"]["token"]

    def kubeconfig(self, path, token):
        with open(path, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "Config",
                       "clusters": [{"name": "c", "cluster": {
                           "server": self.url, "certificate-authority": self.certs["ca"]}}],
                       "users": [{"name": "u", "user": {"token": token}}],
                       "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                       "current-context": "x"}, f)
        return path


def yaml_docs(path):
    import yaml
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def scheduler_config(api_version, layout, extender_url, kubeconfig, healthz, metrics):
    """The shipped configuration (deploy/scheduler/kube-scheduler-config/) for
    layout A, or scheduler-config.py's layout B, with what running outside a
    cluster needs: clientConnection.kubeconfig, loopback health/metrics, and
    the extender's test port."""
    import yaml
    if layout == "plain":  # the default scheduler without any extender
        cfg = scheduler_config(api_version, "B", extender_url, kubeconfig, healthz, metrics)
        del cfg["extenders"]
        return cfg
    if layout == "A":
        with open(os.path.join(DEPLOY, "kube-scheduler-config", api_version + ".yaml")) as f:
            cfg = yaml.safe_load(f)
    else:
        out = subprocess.run([os.path.join(DEPLOY, "scheduler-config.py"), "--api-version",
                              api_version, "--layout", "B"], check=True, capture_output=True,
                             text=True).stdout
        cfg = yaml.safe_load(out)
    cfg["clientConnection"] = {"kubeconfig": kubeconfig}
    cfg["healthzBindAddress"] = healthz
    cfg["metricsBindAddress"] = metrics
    for e in cfg["extenders"]:
        e["urlPrefix"] = extender_url
    return cfg


class KubeScheduler(Proc):
    def __init__(self, cluster, layout, extender_url, tmp, token, api_version="v1beta1",
                 qps=None, leader_elect=True):
        self.cluster, self.layout = cluster, layout
        self.healthz_port, self.secure_port = free_port(), free_port()
        kc = cluster.kubeconfig(os.path.join(tmp, "kube-scheduler-%s.kubeconfig" % layout), token)
        cfg = scheduler_config(api_version, layout, extender_url, kc,
                               "127.0.0.1:%d" % self.healthz_port,
                               "127.0.0.1:%d" % self.healthz_port)
        if not leader_elect:  # bench: a lease lost on a loaded machine ends kube-scheduler
            cfg["leaderElection"]["leaderElect"] = False
        if qps:  # kube-scheduler's own API client (1.20 default: 50/s, burst 100)
            cfg["clientConnection"].update({"qps": qps, "burst": qps})
        self.config_path = os.path.join(tmp, "kube-scheduler-%s.yaml" % layout)
        with open(self.config_path, "w") as f:
            json.dump(cfg, f)
        super().__init__("kube-scheduler", [
            os.path.join(cluster.bin, "kube-scheduler"), "--config", self.config_path,
            "--bind-address", "127.0.0.1", "--secure-port", str(self.secure_port),
            "--cert-dir", os.path.join(tmp, "kube-scheduler-certs-" + layout),
            "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
            "--v=" + os.environ.get("GPUFRAC_KUBE_V", "2")], os.path.join(tmp, "kube-scheduler-%s.log" % layout))

    def healthy(self):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % self.healthz_port,
                                        timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    def start(self):
        super().start()
        wait_for(self.healthy, "kube-scheduler /healthz", proc=self, timeout=60)
        return self

    def metrics(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.healthz_port,
                                    timeout=10) as r:
            return r.read().decode()


class GpufracScheduler(Proc):
    def __init__(self, cluster, tmp, token, policy="binpack", name="gpufrac-scheduler",
                 extra=()):
        self.port = free_port()
        self.extra = list(extra)  # further flags (e.g. the reservation pods' image)
        self.url = "http://127.0.0.1:%d" % self.port
        self.token_file = os.path.join(tmp, name + ".token")
        with open(self.token_file, "w") as f:
            f.write(token + "\n")
        self.policy, self.filter_answer = policy, "best"
        self.cluster = cluster
        super().__init__(name, self.argv_for(), os.path.join(tmp, name + ".log"))

    def argv_for(self):
        return [GPUFRAC_SCHEDULER, "--listen", "127.0.0.1:%d" % self.port,
                "--api-server", self.cluster.url, "--token-file", self.token_file,
                "--ca-file", self.cluster.certs["ca"], "--policy", self.policy,
                "--filter-answer", self.filter_answer] + self.extra

    def set_policy(self, policy):
        self.policy = policy
        self.argv = self.argv_for()

    def set_filter_answer(self, answer):
        self.filter_answer = answer
        self.argv = self.argv_for()

    def get(self, path):
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            return 0, ""

    def start(self):
        super().start()
        wait_for(lambda: self.get("/healthz")[0] == 200, "gpufrac-scheduler synced",
                 proc=self, timeout=60)
        return self

    def metric(self, name, labels=""):
        """Sum of the samples of metric name (whose labels contain labels)."""
        total = 0.0
        for line in self.get("/metrics")[1].splitlines():
            if line.startswith(name) and (line[len(name)] in " {") and labels in line:
                total += float(line.rsplit(" ", 1)[1])
        return total


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    """User + system CPU of pid (and its reaped children) in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return sum(int(x) for x in fields[11:13]) / tck


def parallel(fn, items, threads=16):
    """fn(item) for every item from a few threads; exceptions re-raised."""
    items = list(items)
    errors, lock = [], threading.Lock()
    it = iter(items)

    def work():
        while True:
            with lock:
                try:
                    x = next(it)
                except StopIteration:
                    return
            try:
                fn(x)
            except Exception as e:  # noqa: BLE001
                with lock:
                    errors.append(e)
    ts = [threading.Thread(target=work) for _ in range(min(threads, len(items)) or 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
