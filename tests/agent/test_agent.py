# SPDX-License-Identifier: Apache-2.0
"""gpufracd driven for real over gpusim: burst grant and refusal, reclaim,
the watchdog, restart with state intact, metrics through a real Prometheus
parser, sm-sharing against the MPS stand-in, malformed socket messages."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import unittest
import urllib.request

import cases

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from harness import BUILD, GPUFRAC, PROBE, Gi, Mi, SimTestCase, kv, stage_user_programs  # noqa: E402,E501

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

AGENT = os.environ.get("GPUFRAC_AGENT") or os.path.join(BUILD, "bin", "gpufracd")
FAKE_MPS = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "fakes",
                                        "nvidia-cuda-mps-control"))


class AgentTestCase(SimTestCase):
    devices = "4Gi"

    def setUp(self):
        super().setUp()
        self.state = os.path.join(self.tmp, "state")
        self.env["GPUFRAC_STATE_DIR"] = self.state
        self.agent = None
        self.start_agent()

    def tearDown(self):
        self.stop_agent()
        self.stop_mps_daemons()
        super().tearDown()

    def stop_mps_daemons(self):
        """The stand-in MPS daemons an agent of this test started and, killed
        itself, left behind: every process of FAKE_MPS whose environment
        names this test's directory."""
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cmd = f.read()
                with open("/proc/%s/environ" % pid, "rb") as f:
                    env = f.read()
            except OSError:
                continue
            if FAKE_MPS.encode() in cmd and self.tmp.encode() in env:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass

    def start_agent(self):
        self.agent_log = open(os.path.join(self.tmp, "agent.log"), "a")
        self.agent = subprocess.Popen(
            [AGENT, "--state-dir", self.state, "--metrics-listen", "127.0.0.1:0",
             "--watchdog-period-ms", "100", "--mps-control", FAKE_MPS]
            + getattr(self, "extra_args", []),
            env=self.env, stdout=self.agent_log, stderr=subprocess.STDOUT)
        self.sock = os.path.join(self.state, "agent.sock")
        self.starts = getattr(self, "starts", 0) + 1
        self.wait_for(lambda: self.ready_lines() == self.starts, "the agent to be ready")

    def ready_lines(self):
        with open(os.path.join(self.tmp, "agent.log")) as f:
            return sum(1 for ln in f if "ready:" in ln)

    def stop_agent(self, sig=signal.SIGTERM):
        if self.agent and self.agent.poll() is None:
            self.agent.send_signal(sig)
            self.agent.wait(timeout=30)
        if self.agent:
            self.agent_log.close()
        self.agent = None

    def metrics_port(self):
        with open(os.path.join(self.tmp, "agent.log")) as f:
            lines = [ln for ln in f if "ready:" in ln]
        if not lines:
            return None
        return lines[-1].rsplit("127.0.0.1:", 1)[1].split()[0]

    def metrics(self):
        url = "http://127.0.0.1:%s/metrics" % self.metrics_port()
        with urllib.request.urlopen(url, timeout=10) as r:
            self.assertIn("version=0.0.4", r.headers["Content-Type"])
            text = r.read().decode()
        out = {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    def sample(self, m, name, **labels):
        for (n, lb), v in m.items():
            d = dict(lb)
            if n == name and all(d.get(k) == str(val) for k, val in labels.items()):
                return v
        return None


    def status(self):
        r = subprocess.run([GPUFRAC, "status", "--json"], env=self.env, capture_output=True,
                           text=True, check=True)
        return {f["name"]: f for f in json.loads(r.stdout)["fractions"]}

    def run_bg(self, name, *flags_and_steps, env=None):
        i = flags_and_steps.index("--")
        flags, steps = flags_and_steps[:i], flags_and_steps[i + 1:]
        out = open(os.path.join(self.tmp, name + ".out"), "w")
        p = subprocess.Popen([GPUFRAC, "run", "--name", name, *flags, "--", *steps],
                             env=env or self.env, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def output(self, name):
        with open(os.path.join(self.tmp, name + ".out")) as f:
            return f.read()

    def run_fg(self, *args, env=None):
        return subprocess.run([GPUFRAC, "run", *args], env=env or self.env,
                              capture_output=True, text=True, timeout=120)

    def events(self):
        p = os.path.join(self.state, "events.log")
        return open(p).read() if os.path.exists(p) else ""

    def ask(self, payload):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(10)
        s.connect(self.sock)
        s.send(payload)
        reply = s.recv(8192)
        s.close()
        return reply.decode()


class LogTest(AgentTestCase):
    """What an operator reads in the agent's log: root's runs, which make
    their own fraction, when they attach, and the agent stopping."""

    def test_a_roots_run_and_the_agents_stop_are_logged(self):
        r = self.run_fg("--name", "r", "--memory", "256Mi", "--", PROBE, "alloc", "1Mi")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(self.events(), r"fraction r: its gpufrac run \(pid \d+, uid 0\) attached")
        self.stop_agent()
        with open(os.path.join(self.tmp, "agent.log")) as f:
            self.assertIn("stopping: asked to by a signal; its state is on disk", f.read())


class BurstTest(AgentTestCase):
    def test_burst_granted_from_unguaranteed_memory(self):
        r = self.run_fg("--memory", "1Gi", "--limit", "3Gi", "--", PROBE, "alloc", "2Gi",
                        "info", "freeall")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = kv(r.stdout)
        self.assertIn("alloc=ok", r.stdout)
        self.assertEqual(int(out["total"]), 3 * Gi)
        self.assertNotIn("hard cap", r.stderr, "the agent is running: no notice")

    def test_burst_refused_when_others_are_guaranteed_it(self):
        self.run_bg("owner", "--memory", "2560Mi", "--", PROBE, "alloc", "1Mi", "hold", "60")
        self.wait_for(lambda: self.status().get("owner", {}).get("used"), "the owner")
        # 4Gi - 2.5Gi guaranteed to owner - 1Gi own request: 512Mi may be lent
        r = self.run_fg("--memory", "1Gi", "--limit", "3Gi", "--", PROBE, "alloc", "1600Mi",
                        "alloc", "300Mi", "freeall")
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("alloc=")]
        self.assertEqual(lines, ["alloc=CUDA_ERROR_OUT_OF_MEMORY", "alloc=ok"], r.stdout)

    def test_reclaim_terminates_the_borrower_and_the_owner_allocates(self):
        borrower = self.run_bg("borrower", "--memory", "1Gi", "--limit", "3Gi", "--", PROBE, "alloc",
                    "2560Mi", "hold", "60")
        st = self.wait_for(lambda: self.status().get("borrower", {}).get("burst"), "a loan")
        self.assertEqual(st, 1536 * Mi)
        r = self.run_fg("--name", "owner", "--memory", "2Gi", "--", PROBE, "alloc", "1900Mi",
                        "freeall")
        self.assertIn("alloc=ok", r.stdout, r.stderr)
        self.assertIn("reclaim: terminated pid", self.events())
        self.assertIn("fraction borrower", self.events())
        self.wait_for(lambda: "borrower" not in self.status(), "the borrower's run to end")
        # the page is at most a tick old
        self.assertEqual(self.wait_for(lambda: self.sample(
            self.metrics(), "gpufrac_agent_evictions_total") or None, "the eviction counted"), 1.0)
        # its owner is told why, and the exit status says so
        borrower.wait(timeout=30)
        self.assertEqual(borrower.returncode, 75, self.output("borrower"))
        self.assertRegex(self.output("borrower"),
                         r"gpufrac run: pid \d+ evicted by gpufracd: its loan of 1\.50 GiB above "
                         r"--memory on GPU 0 was taken back for fraction \"owner\"")
        # the ended fraction stays visible with its last state and the reason
        table = subprocess.run([GPUFRAC, "status"], env=self.env, capture_output=True,
                               text=True).stdout
        row = [ln for ln in table.splitlines() if re.match(r"^  \S+ +borrower ", ln)]
        self.assertEqual(len(row), 1, table)
        self.assertIn("evicted", row[0])
        self.assertIn("taken back", table)
        r = subprocess.run([GPUFRAC, "status", "--json", "--all"], env=self.env,
                           capture_output=True, text=True, check=True)
        doc = json.loads(r.stdout)
        import jsonschema
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs",
                               "status.schema.json")) as fh:
            jsonschema.validate(doc, json.load(fh))
        ended = {f["name"]: f for f in doc["fractions"]}["borrower"]
        self.assertEqual(ended["state"], "evicted")  # as the table says
        self.assertEqual(ended["exit_code"], 75)
        self.assertEqual(ended["terminated"], 1)
        self.assertEqual(ended["devices"][0]["evictions"], 1)


class WatchdogTest(AgentTestCase):
    def test_process_bypassing_the_shim_is_terminated(self):
        # inside the fraction, but without the preload: only the driver sees it
        # 2Gi is past 512Mi plus the watchdog's allowance for contexts
        p = self.run_bg("leaky", "--memory", "512Mi", "--", "env", "-u", "LD_PRELOAD", PROBE,
                        "alloc", "2Gi", "hold", "60")
        self.wait_for(lambda: "watchdog: killed pid" in self.events(), "the watchdog")
        self.assertIn("fraction leaky", self.events())
        self.wait_for(lambda: "leaky" not in self.status(), "the leaky run to end")
        p.wait(timeout=30)
        self.assertEqual(p.returncode, 76, self.output("leaky"))
        self.assertRegex(self.output("leaky"),
                         r"gpufrac run: pid \d+ terminated by gpufracd's watchdog: the driver "
                         r"reports [0-9.]+ GiB for fraction \"leaky\" on GPU 0, [0-9.]+ GiB over "
                         r"its limit of 512\.00 MiB")
        m = self.metrics()
        self.assertEqual(self.sample(m, "gpufrac_agent_watchdog_kills_total"), 1.0)

    def test_run_started_before_the_agent_is_watched(self):
        self.stop_agent()
        self.run_bg("early", "--memory", "512Mi", "--", "env", "-u", "LD_PRELOAD", PROBE,
                    "alloc", "2Gi", "hold", "60")
        self.wait_for(lambda: "holding=" in self.output("early"), "the bypasser")
        self.start_agent()  # gpufrac run attaches itself once the agent is there
        self.wait_for(lambda: "of fraction early:" in self.events(), "the watchdog", 30)

    def test_process_within_its_limit_is_left_alone(self):
        p = self.run_bg("fine", "--memory", "1Gi", "--", "env", "-u", "LD_PRELOAD", PROBE,
                        "alloc", "256Mi", "hold", "3")
        p.wait(timeout=30)
        self.assertEqual(p.returncode, 0, self.output("fine"))
        self.assertNotIn("watchdog", self.events())


class RestartTest(AgentTestCase):
    def test_sigkill_and_restart_mid_burst_keeps_state(self):
        self.run_bg("b", "--memory", "1Gi", "--limit", "3Gi", "--", PROBE, "alloc", "2Gi",
                    "hold", "60")
        self.wait_for(lambda: self.status().get("b", {}).get("burst"), "a loan")
        before = self.status()["b"]
        self.stop_agent(signal.SIGKILL)
        self.start_agent()
        after = self.status()["b"]
        self.assertEqual(after["burst"], before["burst"])
        self.assertEqual(after["used"], before["used"])
        m = self.metrics()
        self.assertEqual(self.sample(m, "gpufrac_fraction_memory_burst_bytes", fraction="b"),
                         float(before["burst"]))
        self.assertEqual(self.sample(m, "gpufrac_gpu_memory_lent_bytes", gpu=0),
                         float(before["burst"]))
        # the workload kept running, and a new borrower still gets a loan
        r = self.run_fg("--memory", "256Mi", "--limit", "512Mi", "--", PROBE, "alloc", "400Mi",
                        "freeall")
        self.assertIn("alloc=ok", r.stdout, r.stderr)


class MetricsTest(AgentTestCase):
    def test_values_cross_checked(self):
        self.run_bg("m", "--memory", "1Gi", "--limit", "2Gi", "--", PROBE, "alloc", "1536Mi",
                    "alloc", "1Gi", "hold", "60")
        self.wait_for(lambda: self.status().get("m", {}).get("denied"), "a refusal")
        st = self.status()["m"]
        f = dict(fraction="m", gpu=0)
        # the page is at most a tick old: the first one that has caught up
        m = self.wait_for(
            lambda: (lambda mm: mm if self.sample(mm, "gpufrac_fraction_memory_used_bytes",
                                                  fraction="m", source="driver") and
                     self.sample(mm, "gpufrac_fraction_memory_burst_bytes", **f) ==
                     float(st["burst"]) else None)(self.metrics()), "a driver sample")
        self.assertEqual(self.sample(m, "gpufrac_fraction_memory_request_bytes", **f), Gi)
        self.assertEqual(self.sample(m, "gpufrac_fraction_memory_limit_bytes", **f), 2 * Gi)
        self.assertEqual(self.sample(m, "gpufrac_fraction_memory_used_bytes", source="accounted",
                                     **f), float(st["used"]))
        self.assertGreaterEqual(self.sample(m, "gpufrac_fraction_memory_used_bytes",
                                            source="driver", **f), 1536 * Mi)
        self.assertEqual(self.sample(m, "gpufrac_fraction_memory_burst_bytes", **f),
                         float(st["burst"]))
        self.assertEqual(self.sample(m, "gpufrac_fraction_alloc_denied_total", **f), 1.0)
        self.assertEqual(self.sample(m, "gpufrac_gpu_memory_total_bytes", gpu=0), 4 * Gi)
        self.assertEqual(self.sample(m, "gpufrac_gpu_memory_guaranteed_bytes", gpu=0), Gi)


class MpsTest(AgentTestCase):
    def test_sm_sharing_gets_the_agents_mps_daemon(self):
        r = self.run_fg("--memory", "1Gi", "--mode", "sm-sharing", "--compute", "0.25", "--",
                        "sh", "-c", "echo pipe=$CUDA_MPS_PIPE_DIRECTORY; "
                        "echo pct=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; "
                        "echo pinned=$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = kv(r.stdout)
        self.assertTrue(out["pipe"].startswith(os.path.join(self.state, "mps")), out)
        self.assertEqual(out["pct"], "25")
        self.assertEqual(out["pinned"], "0=1024M")
        self.assertTrue(os.path.exists(os.path.join(out["pipe"], "control")))
        # nothing uses MPS any more: the agent stops the daemon
        self.wait_for(lambda: not os.path.exists(os.path.join(out["pipe"], "control")),
                      "the idle daemon to stop")
        log = open(os.path.join(out["pipe"], "commands.log")).read()
        self.assertIn("quit", log)

    def start_sm_fraction(self, name):
        p = self.run_bg(name, "--memory", "1Gi", "--mode", "sm-sharing", "--compute", "0.5",
                        "--", PROBE, "alloc", "1Mi", "hold", "60")
        self.wait_for(lambda: self.status().get(name, {}).get("processes"), "the client")
        pid = self.status()[name]["pids"][0]
        pipe = self.wait_for(lambda: [os.path.join(self.state, "mps", d) for d in
                                      os.listdir(os.path.join(self.state, "mps"))], "a pipe")[0]
        return p, pid, pipe

    def test_release_lets_mps_terminate_the_clients_first(self):
        p, pid, pipe = self.start_sm_fraction("sm")
        subprocess.run([FAKE_MPS], input="start_server -uid %d\n" % os.getuid(), text=True,
                       env=dict(self.env, CUDA_MPS_PIPE_DIRECTORY=pipe), capture_output=True)
        with open(os.path.join(pipe, "clients"), "w") as f:
            f.write("%d\n" % pid)
        p.send_signal(signal.SIGINT)
        p.wait(timeout=30)
        log = open(os.path.join(pipe, "commands.log")).read()
        self.assertRegex(log, r"terminate_client \d+ %d" % pid)
        self.assertIn("release: MPS terminated 1 client(s) of fraction sm", self.events())

    def test_mps_server_fault_is_reported_and_recovered(self):
        _, _, pipe = self.start_sm_fraction("sm")
        starts = open(os.path.join(pipe, "commands.log")).read().count("start pid=")
        subprocess.run([FAKE_MPS], input="start_server -uid %d\n" % os.getuid(), text=True,
                       env=dict(self.env, CUDA_MPS_PIPE_DIRECTORY=pipe), capture_output=True)
        open(os.path.join(pipe, "fault"), "w").close()
        self.wait_for(lambda: "fault" in self.events().lower(), "the fault to be reported")
        self.wait_for(lambda: open(os.path.join(pipe, "commands.log")).read().count(
            "start pid=") > starts, "the daemon to be restarted")
        m = self.wait_for(lambda: (lambda mm: mm if self.sample(
            mm, "gpufrac_gpu_mps_faults_total", gpu=0) else None)(self.metrics()), "the metric")
        self.assertEqual(self.sample(m, "gpufrac_gpu_mps_faults_total", gpu=0), 1.0)
        table = subprocess.run([GPUFRAC, "status"], env=self.env, capture_output=True,
                               text=True).stdout
        self.assertIn("Recent agent events", table)
        self.assertIn("FAULT", table.upper())

    def test_modes_never_share_a_gpu(self):
        self.run_bg("ts", "--memory", "1Gi", "--", PROBE, "alloc", "1Mi", "hold", "60")
        self.wait_for(lambda: self.status().get("ts", {}).get("used"), "a time-slicing holder")
        r = self.run_fg("--memory", "1Gi", "--mode", "sm-sharing", "--", "true")
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot share", r.stderr)


class ContainerTest(AgentTestCase):
    """The verbs gpufrac-runtime uses (admit, attach, release) and the
    reconciliation of containers whose poststop hook never ran."""

    def admit(self, name, devices):
        return self.ask(("gpufrac/1 admit name=%s ns=team pod=p1 container=main "
                         "mode=time-slicing compute=100 devices=%s" % (name, devices)).encode())

    def fractions(self):
        d = os.path.join(self.state, "fractions")
        return sorted(n for n in os.listdir(d) if not n.startswith("."))

    def test_admit_attach_and_reconcile(self):
        uuid = SocketTest.gpu_uuid(self)
        reply = self.admit("k8s.abc.main", "%s/%d/%d" % (uuid, Gi, 2 * Gi))
        self.assertTrue(reply.startswith("gpufrac/1 ok"), reply)
        out = dict(kv.split("=", 1) for kv in reply.split()[2:])
        self.assertEqual(out["config"], os.path.join(self.state, "fractions", "k8s.abc.main",
                                                     "config"))
        self.assertIn("agent=" + os.path.join(self.state, "fractions", "k8s.abc.main",
                                              "agent.sock"), open(out["config"]).read())
        self.assertEqual(self.fractions(), ["k8s.abc.main"])
        # admitting the same container again (a retried create) is fine
        self.assertTrue(self.admit("k8s.abc.main", "%s/%d/%d" % (uuid, Gi, 2 * Gi))
                        .startswith("gpufrac/1 ok"))
        m = self.wait_for(lambda: (lambda mm: mm if self.sample(
            mm, "gpufrac_fraction_memory_request_bytes", fraction="k8s.abc.main") else None)(
            self.metrics()), "the fraction in metrics")
        self.assertEqual(self.sample(m, "gpufrac_fraction_memory_request_bytes",
                                     fraction="k8s.abc.main", namespace="team", pod="p1",
                                     container="main"), Gi)
        init = subprocess.Popen(["sleep", "30"])
        self.procs.append(init)
        self.assertTrue(self.ask(b"gpufrac/1 attach name=k8s.abc.main pid=%d" % init.pid)
                        .startswith("gpufrac/1 ok"))
        # status names the pod and sees the container running while its init lives
        st = self.status()["k8s.abc.main"]
        self.assertEqual((st["namespace"], st["pod"], st["container"], st["state"]),
                         ("team", "p1", "main", "running"))
        table = subprocess.run([GPUFRAC, "status"], env=self.env, capture_output=True,
                               text=True).stdout
        self.assertRegex(table, r"team/p1/main +running")
        init.kill()
        init.wait()
        self.wait_for(lambda: self.fractions() == [], "the agent to reconcile")
        self.assertIn("its supervisor and all its processes are gone", self.events())

    def test_admission_refusals_leave_nothing(self):
        uuid = SocketTest.gpu_uuid(self)
        for devices, words in (("%s/%d/%d" % (uuid, 5 * Gi, 5 * Gi), "not guaranteed"),
                               ("GPU-nope/1/1", "not a GPU of this node"),
                               ("%s/0/1" % uuid, "bad request"),
                               ("%s/%d/%d" % (uuid, 2 * Gi, Gi), "bad limit")):
            with self.subTest(devices=devices):
                reply = self.admit("k8s.x.main", devices)
                self.assertIn("error", reply)
                self.assertIn(words, reply)
                self.assertEqual(self.fractions(), [])

    def test_release_removes_and_is_idempotent(self):
        uuid = SocketTest.gpu_uuid(self)
        self.admit("k8s.r.main", "%s/%d/%d" % (uuid, Gi, Gi))
        for _ in range(2):
            self.assertTrue(self.ask(b"gpufrac/1 release name=k8s.r.main remove=1")
                            .startswith("gpufrac/1 ok"))
        self.assertEqual(self.fractions(), [])


class PublishTest(AgentTestCase):
    """The agent publishes the node's GPUs for gpufrac-scheduler."""

    def start_agent(self):
        if not hasattr(self, "api"):
            sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scheduler"))
            from kube_api_server import ApiServerProcess
            self.api = ApiServerProcess(self.tmp, token="t0ken", tls=True).start()
            self.addCleanup(self.api.stop)
            with open(os.path.join(self.tmp, "token"), "w") as f:
                f.write("t0ken")
            code, _ = self.api.request("POST", "/api/v1/nodes",
                                       {"apiVersion": "v1", "kind": "Node",
                                        "metadata": {"name": "node-a"}})
            self.assertIn(code, (200, 201))
            self.env.update(NODE_NAME="node-a")
        self.extra_args = ["--api-server", self.api.url, "--token-file",
                           os.path.join(self.tmp, "token"), *self.tls_args()]
        super().start_agent()

    def tls_args(self):
        return ["--insecure-skip-tls-verify"]

    def test_inventory_annotation(self):
        def annotation():
            code, node = self.api.request("GET", "/api/v1/nodes/node-a")
            return node.get("metadata", {}).get("annotations", {}).get("gpufrac.io/gpus")
        inv = json.loads(self.wait_for(annotation, "the annotation"))
        self.assertEqual(len(inv), 1)
        self.assertEqual(inv[0]["memory"], 4 * Gi)
        self.assertEqual(inv[0]["index"], 0)
        self.assertTrue(inv[0]["uuid"].startswith("GPU-"))
        self.wait_for(lambda: "published 1 GPU(s)" in self.events(), "the event")


NOBODY = 65534


class UsersBase(AgentTestCase):
    """Runs of uid 65534 through users.sock: the build staged where that
    user can reach it, a policy of the test's own."""
    users_extra_args = ()

    @classmethod
    def setUpClass(cls):
        if os.getuid() != 0:
            raise unittest.SkipTest("needs root to act as other users")
        super().setUpClass()
        stage_user_programs(cls)  # where uid 65534 can reach them wherever the checkout is

    @classmethod
    def tearDownClass(cls):
        cls.stage.remove()
        super().tearDownClass()

    def setUp(self):
        if os.getuid() != 0:
            self.skipTest("needs root to act as other users")
        import tempfile
        self.policy_dir = tempfile.mkdtemp(prefix="gpufrac-policy-")
        self.addCleanup(lambda: __import__("shutil").rmtree(self.policy_dir, True))
        self.policy = os.path.join(self.policy_dir, "policy.conf")
        with open(self.policy, "w") as f:
            f.write("[default]\nmax-guaranteed = 2Gi\nmax-fractions = 1\n"
                    "[user nobody]\nmax-limit = 3Gi\n")
        self.extra_args = list(self.users_extra_args) + ["--policy", self.policy]
        super().setUp()
        os.chmod(self.tmp, 0o755)
        # the simulated GPU is one device for every user
        for n in os.listdir(self.tmp):
            if n.startswith("gpusim.state"):
                os.chmod(os.path.join(self.tmp, n), 0o666)

    def as_user(self, *args, bg=None):
        kw = dict(env=self.env, user=NOBODY, group=NOBODY, extra_groups=[], text=True)
        if bg:
            out = open(os.path.join(self.tmp, bg + ".out"), "w")
            os.chmod(out.name, 0o666)
            p = subprocess.Popen([self.GPUFRAC, *args], stdout=out, stderr=subprocess.STDOUT,
                                 **kw)
            self.procs.append(p)
            return p
        return subprocess.run([self.GPUFRAC, *args], capture_output=True, timeout=120, **kw)

    def user_status(self, *flags):
        r = self.as_user("status", "--json", *flags)
        self.assertEqual(r.returncode, 0, r.stderr)
        return {f["name"]: f for f in json.loads(r.stdout)["fractions"]}


class PolicyChangeTest(UsersBase):
    """The policy is read again at each user's run: an edit counts at once
    and is said in the events once, a broken one refuses the runs, saying so."""

    def policy_lines(self):
        return [ln for ln in self.events().splitlines() if "policy " + self.policy in ln]

    def test_an_edited_policy_is_said_once_and_counts_at_once(self):
        self.assertEqual(self.as_user("run", "--memory", "512Mi", "--", "true").returncode, 0)
        self.assertEqual(self.policy_lines(), [])  # the start log named it
        with open(self.policy, "w") as f:
            f.write("[default]\nmax-guaranteed = 256Mi\n")
        r = self.as_user("run", "--memory", "512Mi", "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("max-guaranteed = 256Mi", r.stderr)
        self.as_user("run", "--memory", "128Mi", "--", "true")
        lines = self.policy_lines()
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("changed: 1 section(s) in force", lines[0])
        with open(self.policy, "w") as f:
            f.write("[default]\nmax-guaranteed = lots\n")
        r = self.as_user("run", "--memory", "128Mi", "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("changed and is refused", self.policy_lines()[-1])
        os.unlink(self.policy)
        self.assertEqual(self.as_user("run", "--memory", "128Mi", "--", "true").returncode, 0)
        self.assertIn("is gone: defaults in force", self.policy_lines()[-1])


class UsersTest(UsersBase):
    """Every local user's gpufrac run through the agent: admitted against all
    fractions on the GPU, within the administrator's policy, state root's."""

    def test_a_users_run_is_admitted_against_everyone_within_the_policy(self):
        # the policy: refused with the rule named, nothing made
        r = self.as_user("run", "--memory", "2560Mi", "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("refused by policy %s:2 [default] max-guaranteed = 2Gi" % self.policy,
                      r.stderr)
        self.assertIn("--memory 2.50 GiB per GPU asked", r.stderr)
        r = self.as_user("run", "--memory", "1Gi", "--limit", "4Gi", "--", "true")
        self.assertIn("[user nobody] max-limit = 3Gi", r.stderr)
        self.assertEqual(os.listdir(os.path.join(self.state, "fractions")), [])
        # root holds 2.5Gi of 4Gi: a user's 2Gi does not fit, 1Gi does
        self.run_bg("roots", "--memory", "2560Mi", "--", PROBE, "alloc", "1Mi", "hold", "60")
        self.wait_for(lambda: self.status().get("roots", {}).get("used"), "root's fraction")
        r = self.as_user("run", "--memory", "2Gi", "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("not guaranteed to other fractions", r.stderr)
        p = self.as_user("run", "--name", "mine", "--memory", "1Gi", "--limit", "1536Mi", "--",
                         self.PROBE, "alloc", "1280Mi", "hold", "60", bg="mine")
        st = self.wait_for(lambda: self.user_status().get("mine", {}).get("burst"),
                           "the user's loan")
        self.assertEqual(st, 256 * Mi)  # burst works for a user too
        self.assertIn("alloc=ok", self.output("mine"))
        self.assertNotIn("nothing is guaranteed", self.output("mine"))
        # the state stays root's; only the ledger is the user's
        d = os.path.join(self.state, "fractions", "mine")
        self.assertEqual(os.stat(d).st_uid, 0)
        self.assertEqual(os.stat(os.path.join(d, "config")).st_uid, 0)
        self.assertEqual(os.stat(os.path.join(d, "supervisor")).st_uid, 0)
        self.assertEqual(os.stat(os.path.join(d, "ledger")).st_uid, NOBODY)
        # a second fraction passes the policy's max-fractions
        r = self.as_user("run", "--memory", "64Mi", "--", "true")
        self.assertIn("max-fractions = 1: you hold 1 fraction(s) already", r.stderr)
        # a user sees their own; root sees all
        self.assertEqual(sorted(self.user_status()), ["mine"])
        self.assertEqual(sorted(self.status()), ["mine", "roots"])
        self.assertEqual(self.status()["mine"]["owner"], "nobody")
        # the user stops their own, not root's
        r = self.as_user("stop", "roots")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("is not yours", r.stderr)
        self.assertIn("roots", self.status())
        r = self.as_user("stop", "mine")
        self.assertEqual(r.returncode, 0, r.stderr)
        p.wait(timeout=30)
        # the ended fraction stays visible, root's state still
        self.wait_for(lambda: "mine" not in self.user_status(), "the end")
        ended = self.user_status("--all")["mine"]
        self.assertEqual(ended["state"], "ended")
        self.assertEqual(os.stat(os.path.join(self.state, "ended")).st_uid, 0)
        # it keeps its figures, not its ledger or a dead socket
        self.assertGreaterEqual(ended["devices"][0]["peak"], 1280 * Mi)
        edir = os.path.join(self.state, "ended", next(
            n for n in os.listdir(os.path.join(self.state, "ended")) if n.startswith("mine.")))
        self.assertEqual(sorted(os.listdir(edir)), ["config", "ended", "figures", "supervisor"])
        self.assertIn("fraction mine ended", self.events())

    def test_a_run_that_dies_is_ended_by_the_agent(self):
        p = self.as_user("run", "--name", "dies", "--memory", "1Gi", "--", "sh", "-c",
                         'echo pid=$$; exec sleep 60', bg="dies")
        self.wait_for(lambda: "dies" in self.user_status(), "the fraction")
        pid = int(self.wait_for(lambda: kv(self.output("dies")).get("pid"), "the workload's pid"))
        p.kill()  # gpufrac run gets no chance to end it
        p.wait()
        os.kill(pid, signal.SIGKILL)
        self.wait_for(lambda: "dies" not in self.user_status(), "the agent to end it", 30)
        self.assertIn("its gpufrac run (pid %d) is gone" % p.pid, self.events())


class PodEventTest(PublishTest):
    """A container's process the agent terminates leaves a Warning Event on
    its pod (what `kubectl describe pod` shows)."""

    def test_watchdog_kill_is_an_event_on_the_pod(self):
        uuid = SocketTest.gpu_uuid(self)
        reply = self.ask(("gpufrac/1 admit name=k8s.ev.main ns=team pod=p1 container=main "
                          "devices=%s/%d/%d" % (uuid, 512 * Mi, 512 * Mi)).encode())
        self.assertTrue(reply.startswith("gpufrac/1 ok"), reply)
        # the container's init, and under it a process that bypasses the shim
        init = subprocess.Popen(["sh", "-c", 'env -u LD_PRELOAD "$P" alloc 2Gi hold 60; '
                                 'exec sleep 60'], env=dict(self.env, P=PROBE),
                                stdout=subprocess.DEVNULL)
        self.procs.append(init)
        self.assertTrue(self.ask(b"gpufrac/1 attach name=k8s.ev.main pid=%d" % init.pid)
                        .startswith("gpufrac/1 ok"))
        self.wait_for(lambda: "watchdog: killed pid" in self.events(), "the watchdog")

        def events():
            code, body = self.api.request("GET", "/api/v1/namespaces/team/events")
            return [e for e in body.get("items", []) if code == 200]
        ev = self.wait_for(events, "the pod's event")[0]
        self.assertEqual(ev["type"], "Warning")
        self.assertEqual(ev["reason"], "GpufracWatchdogKilled")
        self.assertEqual((ev["involvedObject"]["kind"], ev["involvedObject"]["name"],
                          ev["involvedObject"]["namespace"]), ("Pod", "p1", "team"))
        self.assertEqual(ev["involvedObject"]["fieldPath"], "spec.containers{main}")
        self.assertIn("terminated by gpufracd's watchdog", ev["message"])
        self.assertIn("limit of 512.00 MiB", ev["message"])
        self.assertEqual(ev["source"]["host"], "node-a")
        init.kill()


class PodEventCaFileTest(PodEventTest):
    """The node's publication and the pod's Event with the API server's
    certificate verified against --ca-file, as in a cluster (the Event was
    not posted there: its request lacked the CA file)."""

    def tls_args(self):
        # the test API server's certificate is self-signed: its own CA
        return ["--ca-file", os.path.join(self.tmp, "apiserver-tls", "cert.pem")]


class SocketTest(AgentTestCase):
    def test_malformed_requests_get_an_error_and_the_agent_lives(self):
        cases = [b"", b"hello", b"gpufrac/2 ping", b"gpufrac/1", b"gpufrac/1 borrow dev",
                 b"gpufrac/1 borrow dev=x bytes=-1", b"gpufrac/1 ping \x00\x01",
                 b"gpufrac/1 " + b"a" * 5000, b"gpufrac/1 frobnicate",
                 b"gpufrac/1 borrow dev=GPU-none bytes=1"]
        for payload in cases:
            with self.subTest(payload=payload[:40]):
                if payload == b"":
                    continue  # an empty datagram is a hang-up on SEQPACKET
                reply = self.ask(payload)
                self.assertTrue(reply.startswith("gpufrac/1 error msg="), reply)
        self.assertTrue(self.ask(b"gpufrac/1 ping").startswith("gpufrac/1 ok"))
        # borrowing for a fraction one does not belong to is refused
        reply = self.ask(b"gpufrac/1 borrow dev=%s bytes=1048576" % self.gpu_uuid().encode())
        self.assertIn("is not a process of any fraction", reply)
        # the page is the loop's snapshot: at most one watchdog period old
        self.wait_for(lambda: (self.sample(self.metrics(), "gpufrac_agent_bad_requests_total")
                               or 0) >= 5, "the bad requests on the page")
        self.assertIsNone(self.agent.poll())

    def as_nobody(self, sock, payload):
        code = ("import socket,sys\n"
                "s=socket.socket(socket.AF_UNIX,socket.SOCK_SEQPACKET)\n"
                "try:\n s.connect(sys.argv[1])\nexcept PermissionError:\n print('denied'); sys.exit()\n"
                "s.send(sys.argv[2].encode()); print(s.recv(4096).decode())")
        for d in (self.tmp, self.state, os.path.dirname(sock)):
            os.chmod(d, 0o755)
        return subprocess.run([sys.executable, "-c", code, sock, payload], capture_output=True,
                              text=True, user=65534).stdout.strip()

    def test_sockets_belong_to_root_or_their_fraction(self):
        if os.getuid() != 0:
            self.skipTest("needs root to act as another user")
        st = os.stat(self.sock)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (0, 0o600))
        self.assertEqual(self.as_nobody(self.sock, "gpufrac/1 ping"), "denied")
        # a container fraction given to uid 65534 gets its own socket, for it alone
        reply = self.ask(("gpufrac/1 admit name=k8s.u.main ns=n pod=p container=main uid=65534 "
                          "devices=%s/%d/%d" % (self.gpu_uuid(), Gi, Gi)).encode())
        self.assertTrue(reply.startswith("gpufrac/1 ok"), reply)
        fsock = dict(kv.split("=", 1) for kv in reply.split()[2:])["socket"]
        self.assertEqual(fsock, os.path.join(self.state, "fractions", "k8s.u.main", "agent.sock"))
        st = self.wait_for(lambda: os.path.exists(fsock) and os.stat(fsock), "its socket")
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (65534, 0o600))
        self.assertTrue(self.as_nobody(fsock, "gpufrac/1 ping").startswith("gpufrac/1 ok"))
        # ...and through it, nobody may do what only root or a member may
        self.assertIn("only root", self.as_nobody(
            fsock, "gpufrac/1 mps dev=%s" % self.gpu_uuid()))
        self.assertIn("is not a process of fraction k8s.u.main", self.as_nobody(
            fsock, "gpufrac/1 borrow dev=%s bytes=1" % self.gpu_uuid()))

    def test_a_client_that_never_reads_does_not_block_the_agent(self):
        hogs = []
        for _ in range(20):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.connect(self.sock)
            for _ in range(50):
                try:
                    s.send(b"gpufrac/1 ping", socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break
            hogs.append(s)
        self.assertTrue(self.ask(b"gpufrac/1 ping").startswith("gpufrac/1 ok"))
        for s in hogs:
            s.close()

    def gpu_uuid(self):
        r = subprocess.run([PROBE, "uuid"], env=self.env, capture_output=True, text=True)
        return kv(r.stdout)["uuid"]


class IdleTest(AgentTestCase):
    extra_args = ["--client-idle-s", "1"]

    def test_idle_connections_are_closed_and_a_new_one_works(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect(self.sock)
        s.send(b"gpufrac/1 ping")
        self.assertTrue(s.recv(4096).startswith(b"gpufrac/1 ok"))
        s.settimeout(20)
        self.assertEqual(s.recv(4096), b"", "the idle connection is closed by the agent")
        s.close()
        self.assertTrue(self.ask(b"gpufrac/1 ping").startswith("gpufrac/1 ok"))


if __name__ == "__main__":
    cases.main(verbosity=2)
