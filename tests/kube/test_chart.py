# SPDX-License-Identifier: Apache-2.0
"""The chart installed as an operator installs it, on a real cluster
(operator_cluster.py: etcd, kube-apiserver, kube-controller-manager,
kube-proxy, kube-scheduler, containerd and the kubelet of one node, in
private namespaces). The install is the command block of docs/kubernetes.md
"Step by step on a node", read from the doc and run command by command, so
the doc and the test cannot drift: the images `make image` built imported
with ctr, the GFD label, the rendered chart with the KAI flag
(global.nvFractions.set=true) applied with kubectl, containerd restarted,
the extender's Deployment and kube-scheduler's layout B configuration, the
doc's fractional pod (its image and command replaced by the probe's: no
PyTorch here), `gpufrac status` in the agent pod. Between the steps it
checks what an operator would: the agent's pod Ready with its probes, the
installer's files in the node's root (and nowhere else: the outer process
compares the real host's paths before and after), containerd restarted only
when told, the extender Ready and called, the fraction placed, limited,
counted in the agent's metrics and released; then a re-apply changes
nothing, an upgrade rolls the DaemonSet and the running fraction keeps its
accounting, the service accounts can do what they need and no more, the
agent's sockets refuse other users, and `kubectl delete` removes the chart.

Exits 77 with the reason where a component is not built or not installed,
without root, or without the images (`make image`)."""
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
import unittest
import urllib.request

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "cri"))
import cluster as C  # noqa: E402
import operator_cluster as O  # noqa: E402

SRC = C.SOURCE
IMAGES = os.environ.get("GPUFRAC_IMAGE_DIR") or os.path.join(SRC, "build-image")
DOC = os.path.join(SRC, "docs", "kubernetes.md")
HEADING = "### Step by step on a node"
NS = "gpufrac-system"
Gi = 1 << 30
NV = "nvidia.com/container.trainer."


def images():
    """{name: (ref, layout, digest)} from `make image`'s list."""
    try:
        with open(os.path.join(IMAGES, "images")) as f:
            rows = [ln.split() for ln in f if ln.strip()]
    except FileNotFoundError:
        return {}
    return {r[0].rsplit(":", 1)[0].rsplit("/", 1)[1]: tuple(r) for r in rows
            if os.path.isdir(r[1])}


def skip_reason():
    why = O.missing()
    if why:
        return why
    got = images()
    for name in ("gpufrac-node", "gpufrac-scheduler"):
        if name not in got:
            return "no %s image in %s/images: run `make image` first (make check does)" % (
                name, IMAGES)
    import crinode
    for p in (crinode.PROBE, crinode.PAUSE, os.path.join(crinode.GPUSIM, "libcuda.so.1")):
        if not os.path.exists(p):
            return "%s is not built" % p
    if not crinode.BUSYBOX:
        return "busybox is not installed (busybox-static, scripts/deps.sh)"
    return None


def doc_section():
    with open(DOC) as f:
        text = f.read()
    i = text.index(HEADING)
    return text[i:text.index("\n## ", i)]


def doc_steps():
    """The commands of the section's console block, continuations joined."""
    body = re.search(r"```console\n(.*?)```", doc_section(), re.S).group(1)
    return [ln.strip() for ln in body.replace("\\\n", " ").splitlines()
            if ln.strip() and not ln.strip().startswith("#")]


def doc_pod():
    import yaml
    return yaml.safe_load(re.search(r"```yaml\n(.*?)```", doc_section(), re.S).group(1))


class Operator:
    """The cluster, the node's GPU stand-in and the doc's steps in order."""

    def __init__(self, tmp):
        import crinode
        self.tmp = tmp
        self.cluster = O.OperatorCluster(tmp)
        self.cluster.start()
        print("cluster start-up: %s" % self.cluster.figure(), flush=True)
        self.steps = doc_steps()
        self.done = []
        self.work = os.path.join(tmp, "work")
        os.makedirs(self.work)
        os.symlink(IMAGES, os.path.join(self.work, "build-image"))
        os.symlink(os.path.join(SRC, "deploy"), os.path.join(self.work, "deploy"))
        self.env = dict(os.environ, KUBECONFIG=self.cluster.admin_kubeconfig)
        # the sandbox image and the workload's (the probe: no PyTorch here)
        tar = crinode.build_images(tmp)
        subprocess.run(["ctr", "-n", "k8s.io", "images", "import", "--base-name",
                        "localhost/gpufrac-test/img", tar], check=True, capture_output=True)
        for tag, name in (("probe", crinode.IMAGE), ("pause", crinode.PAUSE_IMAGE)):
            subprocess.run(["ctr", "-n", "k8s.io", "images", "tag", "--force",
                            "localhost/gpufrac-test/img:" + tag, name], check=True,
                           capture_output=True)
        pod = doc_pod()
        c = pod["spec"]["containers"][0]
        c["image"], c["imagePullPolicy"] = crinode.IMAGE, "Never"
        c["command"] = ["/usr/bin/shimprobe", "info", "alloc", "6Gi", "hold", "3600"]
        self.pod = pod
        with open(os.path.join(self.work, "train-8g.yaml"), "w") as f:
            json.dump(pod, f)

    def sh(self, cmd, check=True, timeout=400):
        r = subprocess.run(["sh", "-ec", cmd], cwd=self.work, env=self.env, text=True,
                           capture_output=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError("`%s` exited %d:\n%s%s\n%s" % (cmd, r.returncode, r.stdout,
                                                                r.stderr, self.cluster.logs()))
        return r.stdout + r.stderr

    def run_through(self, prefix):
        """Runs the doc's next steps up to the first that starts with prefix;
        returns that one's output."""
        while self.steps:
            cmd = self.steps.pop(0)
            self.done.append(cmd)
            if cmd == "make image":
                out = "images: %s" % images()  # make check built them (else skipped)
            else:
                out = self.sh(cmd)
            if cmd.startswith(prefix):
                return out
        raise AssertionError("no step `%s...` left in %s %s" % (prefix, DOC, HEADING))

    def kubectl(self, *args, check=True):
        return self.sh(" ".join(["kubectl"] + [shlex.quote(a) for a in args]), check=check)

    def close(self):
        self.cluster.stop()


OP = None


def setUpModule():
    global OP
    OP = Operator(os.environ["GPUFRAC_OPERATOR_TMP"])


def tearDownModule():
    if OP:
        OP.close()


def wait(fn, what, timeout=180):
    try:
        return C.wait_for(fn, what, timeout=timeout, interval=0.3)
    except AssertionError as e:
        raise AssertionError("%s\n%s" % (e, OP.cluster.logs())) from None


def agent_pods():
    return OP.cluster.pods(NS, "app.kubernetes.io/component=agent")


def ready(pod):
    return pod and any(c["type"] == "Ready" and c["status"] == "True"
                       for c in pod.get("status", {}).get("conditions", []))


def one_ready_agent():
    pods = [p for p in agent_pods() if not p["metadata"].get("deletionTimestamp")]
    return pods[0] if len(pods) == 1 and ready(pods[0]) else None


def http(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def try_http(url):
    try:
        return http(url, timeout=2)
    except OSError:
        return ""


def samples(text, name, **labels):
    """Values of metric name whose labels include labels."""
    out = []
    for ln in text.splitlines():
        if not ln.startswith((name + "{", name + " ")):
            continue
        if all('%s="%s"' % (k, v) in ln for k, v in labels.items()):
            out.append(float(ln.rsplit(" ", 1)[1]))
    return out


def agent_metrics(pod):
    return http("http://%s:9464/metrics" % pod["status"]["podIP"])


def image_file(name, member):
    """A file of an image's root filesystem (make image's rootfs tar)."""
    with tarfile.open(os.path.join(IMAGES, name + ".rootfs.tar")) as t:
        for m in t.getmembers():
            if m.name.lstrip("./") == member.lstrip("/"):
                return t.extractfile(m).read()
    raise AssertionError("%s not in %s" % (member, name))


class ChartTest(unittest.TestCase):
    def test_0_committed_manifest_is_what_the_api_server_knows(self):
        # deploy/manifests/gpufrac.yaml, checked by kubectl against this real
        # API server's discovery (kinds, API groups), nothing created
        manifest = os.path.join(SRC, "deploy", "manifests", "gpufrac.yaml")
        out = OP.kubectl("create", "--dry-run=client", "-o", "name", "-f", manifest)
        self.assertIn("daemonset.apps/gpufrac-agent", out)
        self.assertEqual(OP.kubectl("get", "namespaces", "-o", "name").count("gpufrac-system"), 0)

    def test_1_install_agent(self):
        api = OP.cluster
        OP.run_through("ctr -n k8s.io images import --base-name localhost/gpufrac-scheduler")
        listed = subprocess.run(["ctr", "-n", "k8s.io", "images", "ls"], check=True,
                                capture_output=True, text=True).stdout
        for ref, _, digest in images().values():
            row = [ln.split() for ln in listed.splitlines() if ln.split()[:1] == [ref]]
            self.assertEqual(len(row), 1, listed)
            self.assertEqual(row[0][2], digest, "imported as make image listed it")
        OP.run_through("kubectl label node")
        ctd = api.unit_pid("containerd")
        OP.run_through("deploy/render.py")
        with open(os.path.join(OP.work, "gpufrac.yaml")) as f:
            rendered = f.read()
        self.assertIn('- name: GPUFRAC_NVFRACTIONS\n              value: "1"', rendered,
                      "the KAI flag turns NvFractions mode on")
        OP.run_through("kubectl apply -f gpufrac.yaml")
        OP.run_through("kubectl -n gpufrac-system rollout status daemonset/gpufrac-agent")
        pod = wait(one_ready_agent, "the agent's pod Ready")
        st = pod["status"]
        self.assertEqual(st["initContainerStatuses"][0]["state"]["terminated"]["exitCode"], 0)
        agent = st["containerStatuses"][0]
        self.assertTrue(agent["ready"], agent)
        self.assertEqual(agent["restartCount"], 0, "liveness never failed")
        # the probes' /healthz answers on the pod's address
        self.assertTrue(http("http://%s:9464/healthz" % st["podIP"]).startswith("ok"))
        log = OP.run_through("kubectl -n gpufrac-system logs daemonset/gpufrac-agent")
        for want in ("installed /host/usr/local/bin/gpufrac-runtime",
                     "installed /host/usr/local/lib/gpufrac/libgpufrac.so",
                     "installer.containerdConfig=auto: append",
                     "restart containerd on this node to load the gpufrac handler"):
            self.assertIn(want, log)
        # into the node's root: the image's files, the handler appended
        with open("/usr/local/bin/gpufrac-runtime", "rb") as f:
            self.assertEqual(f.read(), image_file("gpufrac-node", "/usr/sbin/gpufrac-runtime"))
        self.assertTrue(os.path.isfile("/usr/local/lib/gpufrac/libgpufrac.so"))
        with open("/etc/gpufrac/runtime.conf") as f:
            conf = f.read()
        self.assertIn("real_runtime=nvidia-container-runtime\n", conf)
        self.assertIn("nvfractions=1\n", conf)
        with open("/etc/containerd/config.toml") as f:
            toml = f.read()
        self.assertIn("# BEGIN gpufrac", toml)
        self.assertIn('BinaryName = "/usr/local/bin/gpufrac-runtime"', toml)
        self.assertIn('default_runtime_name = "nvidia"', toml, "the node's own settings kept")
        self.assertEqual(toml.count("containerd.runtimes.runc]"), 1, toml)
        self.assertIn("SystemdCgroup = false", toml)
        # not told to restart containerd: it was not
        self.assertEqual(api.unit_pid("containerd"), ctd)
        self.assertFalse(os.path.exists(os.path.join(O.CONTROL_DIR, "systemctl.log")))
        OP.run_through("systemctl restart containerd")
        self.assertNotEqual(api.unit_pid("containerd"), ctd)
        api.wait_containerd()
        wait(api.node_ready, "the node Ready after containerd's restart")
        self.assertEqual(one_ready_agent()["metadata"]["uid"], pod["metadata"]["uid"],
                         "the agent's pod survives containerd's restart")

    def test_2_scheduler(self):
        OP.run_through("kubectl -n gpufrac-system rollout status deployment/gpufrac-scheduler")
        pods = OP.cluster.pods(NS, "app.kubernetes.io/name=gpufrac-scheduler")
        self.assertEqual(len(pods), 1)
        self.assertTrue(ready(pods[0]), pods[0]["status"])
        # its Service, through kube-proxy (once the endpoints reached it)
        wait(lambda: "gpufrac_scheduler_requests_total" in try_http(
            "http://10.96.0.88:8888/metrics"), "the extender's Service answering")
        OP.run_through("systemctl restart kube-scheduler")
        OP.cluster.wait_scheduler()
        with open(O.KS_CONFIG) as f:
            self.assertIn("http://10.96.0.88:8888", f.read())

    def test_3_fractional_pod(self):
        api = OP.cluster
        before = samples(http("http://10.96.0.88:8888/metrics"), "gpufrac_scheduler_binds_total")
        OP.run_through("kubectl apply -f train-8g.yaml")
        pod = wait(lambda: (lambda p: p if p and p["status"].get("phase") == "Running" else
                            None)(api.pod("train-8g")), "train-8g Running")
        self.assertEqual(pod["spec"]["nodeName"], O.NODE_NAME)
        devs = pod["metadata"]["annotations"].get(NV + "gpus.devices", "")
        self.assertRegex(devs, r"^GPU-[0-9a-f-]+$", "written by the extender's bind")
        after = samples(http("http://10.96.0.88:8888/metrics"), "gpufrac_scheduler_binds_total")
        self.assertGreater(sum(after), sum(before), "kube-scheduler called the extender")
        log = wait(lambda: (lambda t: t if "holding" in t else None)(
            OP.kubectl("logs", "train-8g", check=False)), "train-8g's allocation")
        from harness import kv
        self.assertEqual(int(kv(log)["total"]), 12 * Gi, "started with its limit: " + log)
        self.assertIn("alloc=ok", log)
        agent = one_ready_agent()
        lab = dict(namespace="default", pod="train-8g", container="trainer", UUID=devs)

        def accounted(text):
            return samples(text, "gpufrac_fraction_memory_used_bytes", source="accounted", **lab)
        # the page is the loop's last snapshot: up to a watchdog period (and a
        # tick) behind the ledger the probe just charged
        m = wait(lambda: (lambda t: t if any(v >= 6.0 * Gi for v in accounted(t)) else None)(
            agent_metrics(agent)), "the agent's page showing train-8g's 6 GiB", timeout=30)
        self.assertEqual(samples(m, "gpufrac_fraction_memory_limit_bytes", **lab), [12.0 * Gi], m)
        self.assertEqual(samples(m, "gpufrac_fraction_memory_request_bytes", **lab), [8.0 * Gi])
        used = accounted(m)
        self.assertEqual(len(used), 1, m)
        self.assertGreaterEqual(used[0], 6.0 * Gi, "its 6 GiB (and its context)")
        ChartTest.used = used[0]
        # the tenant's container reaches its own fraction only: not the agent's
        # root socket, not users.sock, no other fraction's directory
        inside = OP.kubectl("exec", "train-8g", "-c", "trainer", "--", "/bin/sh", "-c",
                            "for p in agent.sock users.sock; do test ! -e /run/gpufrac/$p || "
                            "echo reachable $p; done; ls /run/gpufrac/fractions")
        self.assertNotIn("reachable", inside)
        self.assertEqual(inside.split(), os.listdir("/run/gpufrac/fractions"), inside)
        out = OP.run_through("kubectl -n gpufrac-system exec daemonset/gpufrac-agent")
        self.assertRegex(out, r"default/train-8.*running +8\.0G +12\.0G +6\.\dG", out)
        self.assertNotIn("Not on a GPU NVML lists here", out)

    def test_4_reapply_is_idempotent(self):
        ds = OP.cluster.get("/apis/apps/v1/namespaces/%s/daemonsets/gpufrac-agent" % NS)
        agent = one_ready_agent()
        out = OP.sh("kubectl apply -f gpufrac.yaml")
        lines = [ln for ln in out.splitlines() if ln.strip()]
        self.assertTrue(lines and all(ln.endswith(" unchanged") for ln in lines), out)
        ds2 = OP.cluster.get("/apis/apps/v1/namespaces/%s/daemonsets/gpufrac-agent" % NS)
        self.assertEqual(ds2["metadata"]["generation"], ds["metadata"]["generation"])
        self.assertEqual(one_ready_agent()["metadata"]["uid"], agent["metadata"]["uid"])

    def test_5_upgrade_keeps_the_running_fraction(self):
        old = one_ready_agent()
        render = [s for s in OP.done if s.startswith("deploy/render.py")][0]
        # told to restart containerd, but the handler is the same: not restarted
        ctd = OP.cluster.unit_pid("containerd")
        OP.sh(render.replace(" -o gpufrac.yaml", " --set agent.watchdogPeriodMs=250 --set "
                             "installer.restartContainerd=true -o gpufrac.yaml"))
        OP.sh("kubectl apply -f gpufrac.yaml")
        OP.sh("kubectl -n %s rollout status daemonset/gpufrac-agent --timeout=300s" % NS)
        new = wait(lambda: (lambda p: p if p and p["metadata"]["uid"] != old["metadata"]["uid"]
                            else None)(one_ready_agent()), "the DaemonSet rolled")
        cmd = new["spec"]["containers"][0]["command"]
        self.assertEqual(cmd[cmd.index("--watchdog-period-ms") + 1], "250")
        log = OP.kubectl("-n", NS, "logs", new["metadata"]["name"], "-c", "installer")
        self.assertNotIn("restarting containerd", log)
        self.assertEqual(OP.cluster.unit_pid("containerd"), ctd, "the handler did not change")
        self.assertEqual(OP.cluster.pod("train-8g")["status"]["phase"], "Running")
        devs = OP.cluster.pod("train-8g")["metadata"]["annotations"][NV + "gpus.devices"]
        lab = dict(namespace="default", pod="train-8g", container="trainer", UUID=devs)
        m = wait(lambda: (lambda t: t if samples(t, "gpufrac_fraction_memory_used_bytes",
                                                  **lab) else None)(agent_metrics(new)),
                 "the new agent's metrics of train-8g")
        self.assertEqual(samples(m, "gpufrac_fraction_memory_limit_bytes", **lab), [12.0 * Gi])
        self.assertEqual(samples(m, "gpufrac_fraction_memory_used_bytes", source="accounted",
                                 **lab), [ChartTest.used], "the same accounting")
        out = OP.kubectl("-n", NS, "exec", new["metadata"]["name"], "-c", "agent", "--",
                         "gpufrac", "status")
        self.assertRegex(out, r"default/train-8.*running +8\.0G +12\.0G +6\.\dG", out)
        # released on delete, by the new agent
        OP.kubectl("delete", "pod", "train-8g", "--wait=true")
        wait(lambda: not os.listdir("/run/gpufrac/fractions"), "the fraction released")
        wait(lambda: not samples(agent_metrics(new), "gpufrac_fraction_memory_limit_bytes",
                                 pod="train-8g"), "train-8g gone from the metrics")

    def test_6_service_accounts_can_do_only_what_they_need(self):
        def can(sa, verb, resource, sub="", group="", ns=""):
            r = OP.cluster.req("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
                "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": "system:serviceaccount:%s:%s" % (NS, sa),
                         "groups": ["system:serviceaccounts",
                                    "system:serviceaccounts:" + NS, "system:authenticated"],
                         "resourceAttributes": {"verb": verb, "resource": resource,
                                                "subresource": sub, "group": group,
                                                "namespace": ns}}})
            return r["status"].get("allowed", False)
        sched = "gpufrac-scheduler"
        for verb, res, sub in (("get", "pods", ""), ("list", "pods", ""), ("watch", "nodes", ""),
                               ("list", "namespaces", ""), ("create", "pods", "binding"),
                               ("patch", "nodes", "")):
            self.assertTrue(can(sched, verb, res, sub, ns="default"), (verb, res, sub))
        # its reservation pods: in its own namespace only
        for verb in ("create", "delete"):
            self.assertTrue(can(sched, verb, "pods", ns=NS), (verb, "pods", NS))
        for verb, res, sub, group in (
                ("patch", "pods", "", ""), ("update", "pods", "", ""), ("delete", "pods", "", ""),
                ("update", "pods", "status", ""), ("update", "leases", "", "coordination.k8s.io"),
                ("create", "pods", "", ""), ("delete", "nodes", "", ""),
                ("update", "nodes", "status", ""),
                ("patch", "namespaces", "", ""),
                ("get", "secrets", "", ""), ("list", "secrets", "", ""),
                ("create", "pods", "exec", ""), ("create", "serviceaccounts", "token", ""),
                ("create", "clusterrolebindings", "", "rbac.authorization.k8s.io"),
                ("update", "daemonsets", "", "apps")):
            self.assertFalse(can(sched, verb, res, sub, group, ns="default"),
                             "gpufrac-scheduler may %s %s/%s" % (verb, res, sub))
        agent = "gpufrac-agent"
        self.assertTrue(can(agent, "patch", "nodes"))
        self.assertTrue(can(agent, "list", "pods"))
        for verb, res, sub in (("get", "secrets", ""), ("create", "pods", ""),
                               ("delete", "pods", ""), ("create", "pods", "exec"),
                               ("delete", "nodes", ""), ("create", "pods", "binding")):
            self.assertFalse(can(agent, verb, res, sub, ns="default"),
                             "gpufrac-agent may %s %s/%s" % (verb, res, sub))

    def test_7_agent_sockets_refuse_other_users(self):
        st = os.stat("/run/gpufrac")
        self.assertEqual((st.st_uid, st.st_mode & 0o022), (0, 0), "the hostPath dir is root's")
        for dirpath, dirs, files in os.walk("/run/gpufrac"):
            for n in dirs + files:
                p = os.path.join(dirpath, n)
                s = os.lstat(p)
                if p == "/run/gpufrac/users.sock":
                    # every local user's `gpufrac run` asks here, identified by
                    # SO_PEERCRED (README, "A shared server for many users")
                    continue
                self.assertFalse(s.st_mode & 0o002, "%s is writable by every user" % p)
        # a process of another user (a tenant's container shares the node's
        # kernel) cannot reach the agent's own socket
        code = ("import socket,os;os.setgid(65534);os.setuid(65534);"
                "s=socket.socket(socket.AF_UNIX,socket.SOCK_SEQPACKET)\n"
                "try:\n s.connect('/run/gpufrac/agent.sock');print('connected')\n"
                "except PermissionError as e:\n print('refused',e)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=30).stdout
        self.assertTrue(out.startswith("refused"), out)
        self.assertEqual(one_ready_agent()["status"]["containerStatuses"][0]["restartCount"], 0)

    def test_8_delete_removes_the_chart(self):
        # layout B schedules nothing while the extender is down (its own
        # pod included), and the extender lives in the chart's namespace:
        # kube-scheduler goes back to no extender first, as the doc says
        OP.cluster.write_plain_scheduler_config()
        OP.sh("systemctl restart kube-scheduler")
        OP.cluster.wait_scheduler()
        OP.sh("kubectl delete -f gpufrac.yaml --wait=true --timeout=300s")
        api = OP.cluster
        wait(lambda: api.get_or_none("/api/v1/namespaces/" + NS) is None,
             "the namespace deleted")
        for path in ("/apis/node.k8s.io/v1/runtimeclasses/gpufrac",
                     "/apis/rbac.authorization.k8s.io/v1/clusterroles/gpufrac-agent",
                     "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/gpufrac-agent"):
            self.assertIsNone(api.get_or_none(path), path)
        wait(lambda: not [t for t in subprocess.run(
            ["ctr", "-n", "k8s.io", "tasks", "ls", "-q"], capture_output=True,
            text=True).stdout.split()], "no container left on the node", timeout=120)
        # what the installer wrote on the node stays (the doc says so)
        self.assertTrue(os.path.exists("/usr/local/bin/gpufrac-runtime"))

    def test_9_reinstall_restarts_containerd_when_told(self):
        # the node's files removed by hand, as the doc says after a delete
        os.rename("/etc/containerd/config.toml.gpufrac-orig", "/etc/containerd/config.toml")
        for p in ("/usr/local/bin/gpufrac-runtime", "/usr/local/lib/gpufrac/libgpufrac.so",
                  "/etc/gpufrac/runtime.conf"):
            os.unlink(p)
        OP.sh("systemctl restart containerd")
        OP.cluster.wait_containerd()
        ctd = OP.cluster.unit_pid("containerd")
        render = [s for s in OP.done if s.startswith("deploy/render.py")][0]
        OP.sh(render.replace(" -o gpufrac.yaml", " --set installer.restartContainerd=true "
                             "-o gpufrac.yaml"))
        OP.sh("kubectl apply -f gpufrac.yaml")
        OP.sh("kubectl -n %s rollout status daemonset/gpufrac-agent --timeout=300s" % NS)
        pod = wait(one_ready_agent, "the agent's pod Ready")
        log = OP.kubectl("-n", NS, "logs", pod["metadata"]["name"], "-c", "installer")
        self.assertIn("restarting containerd", log)
        # through nsenter into PID 1's namespaces: this node's containerd
        self.assertNotEqual(OP.cluster.unit_pid("containerd"), ctd)
        with open(os.path.join(O.CONTROL_DIR, "systemctl.log")) as f:
            self.assertIn("restart containerd %d " % ctd, f.read())
        with open("/etc/containerd/config.toml") as f:
            self.assertIn("# BEGIN gpufrac", f.read())
        OP.sh("kubectl delete -f gpufrac.yaml --wait=true --timeout=300s")


if __name__ == "__main__":
    REASON = skip_reason()
    if REASON:
        print("SKIP: " + REASON)
        sys.exit(77)
    O.enter()
    cases.main(verbosity=2, failfast=True)
