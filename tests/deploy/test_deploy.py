#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the Helm chart, the rendered manifests and the containerd snippets.

Needs Debian's python3-yaml (PyYAML) and Python 3.11 (tomllib). kubectl's
check of the committed manifest against a real API server is kube.chart's.
"""
import json
import os
import subprocess
import sys
import tomllib
import unittest

import cases

try:
    import yaml
except ImportError:
    sys.stderr.write("test_deploy: PyYAML is missing: apt-get install python3-yaml "
                     "(scripts/deps.sh installs it)\n")
    sys.exit(1)

SRC = os.environ.get("GPUFRAC_SOURCE") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
DEPLOY = os.path.join(SRC, "deploy")
sys.path.insert(0, DEPLOY)
import render  # noqa: E402

CHART = os.path.join(DEPLOY, "helm", "gpufrac")
MANIFEST = os.path.join(DEPLOY, "manifests", "gpufrac.yaml")
GLOBS_KAI = ["nvidia.com/*", "gpu-fraction*", "gpu-memory*", "kai.scheduler/*"]
GLOBS_OWN = ["nvidia.com/*", "gpu-fraction*", "gpu-memory*"]


def values(*sets):
    with open(os.path.join(CHART, "values.yaml")) as f:
        v = render.load_values(f.read())
    for s in sets:
        keys, val = render.parse_set(s)
        cur = v
        for k in keys[:-1]:
            cur = cur.setdefault(k, {})
        cur[keys[-1]] = val
    return v


def rendered(*sets, create_namespace=True):
    return render.render_chart(CHART, values(*sets), "gpufrac", "gpufrac-system",
                               create_namespace)


def docs(text):
    return [d for d in yaml.safe_load_all(text) if d is not None]


def find(ds, kind, name=None):
    out = [d for d in ds if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(out) == 1, "%d %s documents" % (len(out), kind)
    return out[0]


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


class Renderer(unittest.TestCase):
    def test_values_subset_matches_pyyaml(self):
        with open(os.path.join(CHART, "values.yaml")) as f:
            text = f.read()
        self.assertEqual(render.load_values(text), yaml.safe_load(text))

    def test_to_yaml_round_trips(self):
        for v in ({"b": [1, "x"], "a": {"k": "true", "e": "", "n": None}},
                  [{"key": "nvidia.com/gpu", "operator": "Exists"}], {}, [],
                  {"z": "a: b", "y": "#c", "x": "0.5", "w": "8Gi"}):
            self.assertEqual(yaml.safe_load(render.to_yaml(v)), v)

    def test_template_subset(self):
        ctx = {"Values": {"a": {"b": 3}, "on": True, "off": False, "l": ["x"]},
               "Release": {"Namespace": "ns"}}
        t = ("x: {{ .Values.a.b }}\n{{- if .Values.on }}\ny: {{ quote .Release.Namespace }}"
             "\n{{- end }}\n{{- if .Values.off }}\nz: 1\n{{- else }}\nz: 2\n{{- end }}\n"
             "l:\n  {{- toYaml .Values.l | nindent 2 }}\nq: {{ .Values.a.b | quote }}\n")
        self.assertEqual(render.render_template(t, ctx),
                         'x: 3\ny: "ns"\nz: 2\nl:\n  - x\nq: "3"\n')

    def test_unknown_construct_is_an_error(self):
        for t in ("{{ include \"x\" . }}", "{{ .Values.missing }}", "{{ if .Values.a }}",
                  "{{ range .Values.l }}{{ end }}"):
            with self.assertRaises(render.RenderError, msg=t):
                render.render_template(t, {"Values": {"a": 1, "l": []}})


class Manifests(unittest.TestCase):
    def test_committed_manifests_are_the_default_render(self):
        with open(MANIFEST) as f:
            committed = f.read()
        self.assertEqual(rendered(), committed,
                         "deploy/manifests/gpufrac.yaml is stale: run deploy/render.py "
                         "--namespace gpufrac-system --name gpufrac --create-namespace "
                         "-o deploy/manifests/gpufrac.yaml")

    def test_cli_renders_the_same(self):
        out = subprocess.run([sys.executable, os.path.join(DEPLOY, "render.py"),
                              "--namespace", "gpufrac-system", "--name", "gpufrac",
                              "--create-namespace"],
                             capture_output=True, text=True, check=True).stdout
        with open(MANIFEST) as f:
            self.assertEqual(out, f.read())

    def test_every_document_is_a_resource(self):
        for sets in ((), ("serviceMonitor.enabled=true",), ("nvFractions.enabled=false",)):
            ds = docs(rendered(*sets))
            self.assertGreaterEqual(len(ds), 8)
            for d in ds:
                self.assertIsInstance(d.get("apiVersion"), str, d)
                self.assertIsInstance(d.get("kind"), str, d)
                self.assertTrue(d.get("metadata", {}).get("name"), d)
                if d["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding",
                                     "RuntimeClass"):
                    self.assertEqual(d["metadata"]["namespace"], "gpufrac-system", d["kind"])
            kinds = [d["kind"] for d in ds]
            for k in ("Namespace", "ServiceAccount", "ConfigMap", "ClusterRole",
                      "ClusterRoleBinding", "Service", "DaemonSet", "RuntimeClass"):
                self.assertIn(k, kinds)
            self.assertEqual(kinds[0], "Namespace")
            self.assertLess(kinds.index("ServiceAccount"), kinds.index("DaemonSet"))

    def test_daemonset(self):
        ds = docs(rendered())
        spec = find(ds, "DaemonSet")["spec"]["template"]["spec"]
        self.assertIs(spec["hostPID"], True)
        self.assertEqual(spec["serviceAccountName"], find(ds, "ServiceAccount")["metadata"]["name"])
        agent = spec["containers"][0]
        cmd = agent["command"]
        self.assertEqual(cmd[0], "/usr/sbin/gpufracd")
        flag = lambda f: cmd[cmd.index(f) + 1]  # noqa: E731
        self.assertEqual(flag("--state-dir"), "/run/gpufrac")
        self.assertEqual(flag("--metrics-listen"), "0.0.0.0:9464")
        self.assertEqual(flag("--watchdog-period-ms"), "500")
        self.assertIn("--mps-control", cmd)
        self.assertEqual(agent["ports"], [{"name": "metrics", "containerPort": 9464,
                                           "protocol": "TCP"}])
        self.assertIs(agent["securityContext"]["privileged"], True)
        vols = {v["name"]: v for v in spec["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in agent["volumeMounts"]}
        self.assertEqual(vols[mounts["/run/gpufrac"]]["hostPath"]["path"], "/run/gpufrac")
        self.assertEqual(vols[mounts["/dev"]]["hostPath"]["path"], "/dev")
        inst = spec["initContainers"][0]
        self.assertIs(inst["securityContext"]["privileged"], True)
        imounts = {m["mountPath"]: m["name"] for m in inst["volumeMounts"]}
        self.assertEqual(vols[imounts["/host/usr/local"]]["hostPath"]["path"], "/usr/local")
        self.assertEqual(vols[imounts["/host/etc/gpufrac"]]["hostPath"]["path"], "/etc/gpufrac")
        self.assertEqual(vols[imounts["/host/etc/containerd"]]["hostPath"]["path"],
                         "/etc/containerd")
        self.assertEqual(vols[imounts["/etc/gpufrac-install"]]["configMap"]["name"],
                         find(ds, "ConfigMap", "gpufrac-installer")["metadata"]["name"])
        self.assertEqual(env_of(inst)["GPUFRAC_REAL_RUNTIME"], "nvidia-container-runtime")
        self.assertEqual(env_of(inst)["GPUFRAC_RESTART_CONTAINERD"], "false")
        self.assertEqual(spec["nodeSelector"], {"nvidia.com/gpu.present": "true"})
        svc = find(ds, "Service")
        self.assertEqual(svc["spec"]["ports"][0]["port"], 9464)
        self.assertEqual(svc["spec"]["selector"],
                         find(ds, "DaemonSet")["spec"]["selector"]["matchLabels"])

    def test_values_reach_the_daemonset(self):
        ds = docs(rendered("agent.metricsPort=9500", "agent.stateDir=/var/run/gf",
                           "agent.watchdogPeriodMs=250", "installer.enabled=false",
                           "image.tag=v9"))
        spec = find(ds, "DaemonSet")["spec"]["template"]["spec"]
        cmd = spec["containers"][0]["command"]
        self.assertIn("0.0.0.0:9500", cmd)
        self.assertIn("/var/run/gf", cmd)
        self.assertIn("250", cmd)
        self.assertNotIn("initContainers", spec)
        self.assertTrue(spec["containers"][0]["image"].endswith(":v9"))
        self.assertEqual(spec["containers"][0]["ports"][0]["containerPort"], 9500)
        self.assertEqual([v for v in spec["volumes"] if v["name"] == "state"][0]
                         ["hostPath"]["path"], "/var/run/gf")

    def test_agent_probes_ask_healthz_on_the_metrics_port(self):
        for sets in ((), ("agent.metricsPort=9500",)):
            spec = find(docs(rendered(*sets)), "DaemonSet")["spec"]["template"]["spec"]
            c = spec["containers"][0]
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            self.assertIn("metrics", ports)
            self.assertIn("0.0.0.0:%d" % ports["metrics"], c["command"])
            for probe in ("livenessProbe", "readinessProbe"):
                self.assertIn(probe, c, sets)
                self.assertEqual(c[probe]["httpGet"], {"path": "/healthz", "port": "metrics"},
                                 probe)
                self.assertGreaterEqual(c[probe]["failureThreshold"], 2, probe)
                self.assertGreaterEqual(c[probe]["timeoutSeconds"], 1, probe)

    def test_rbac(self):
        ds = docs(rendered())
        rules = find(ds, "ClusterRole")["rules"]
        self.assertIn({"apiGroups": [""], "resources": ["pods"],
                       "verbs": ["get", "list", "watch"]}, rules)
        self.assertIn({"apiGroups": [""], "resources": ["nodes"],
                       "verbs": ["get", "list", "watch", "patch"]}, rules)
        self.assertIn({"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}, rules)
        crb = find(ds, "ClusterRoleBinding")
        self.assertEqual(crb["subjects"], [{"kind": "ServiceAccount", "name": "gpufrac-agent",
                                            "namespace": "gpufrac-system"}])
        kinds = [d["kind"] for d in docs(rendered("rbac.create=false",
                                                  "runtimeClass.create=false"))]
        for k in ("ClusterRole", "ClusterRoleBinding", "RuntimeClass"):
            self.assertNotIn(k, kinds)

    def test_runtimeclass(self):
        rc = find(docs(rendered()), "RuntimeClass")
        self.assertEqual(rc["metadata"]["name"], "gpufrac")
        self.assertEqual(rc["handler"], "gpufrac")
        # no GFD label required: agent-only nodes host gpufrac pods
        self.assertNotIn("nodeSelector", rc["scheduling"])
        rc = find(docs(rendered('runtimeClass.nodeSelector.gpufrac-node=yes')), "RuntimeClass")
        self.assertEqual(rc["scheduling"]["nodeSelector"], {"gpufrac-node": "yes"})

    def test_service_monitor_is_optional(self):
        self.assertNotIn("ServiceMonitor", [d["kind"] for d in docs(rendered())])
        sm = find(docs(rendered("serviceMonitor.enabled=true")), "ServiceMonitor")
        self.assertEqual(sm["spec"]["endpoints"][0]["port"], "metrics")

    def test_service_monitor_honours_the_agents_labels(self):
        sm = find(docs(rendered("serviceMonitor.enabled=true")), "ServiceMonitor")
        self.assertIs(sm["spec"]["endpoints"][0]["honorLabels"], True)

    def test_dashboard_and_alert_rules_ship_with_the_chart(self):
        files = os.path.join(CHART, "files")
        cm = find(docs(rendered()), "ConfigMap", "gpufrac-dashboard")
        self.assertEqual(cm["metadata"]["labels"]["grafana_dashboard"], "1")
        with open(os.path.join(files, "gpufrac-dashboard.json")) as f:
            self.assertEqual(json.loads(cm["data"]["gpufrac-dashboard.json"]), json.load(f))
        self.assertNotIn("PrometheusRule", [d["kind"] for d in docs(rendered())])
        rule = find(docs(rendered("prometheusRule.enabled=true")), "PrometheusRule")
        with open(os.path.join(files, "gpufrac-alerts.yaml")) as f:
            self.assertEqual(rule["spec"], yaml.safe_load(f))
        names = [r["alert"] for r in rule["spec"]["groups"][0]["rules"]]
        for want in ("GpufracFractionNearLimit", "GpufracAllocationsDenied", "GpufracEvictions",
                     "GpufracWatchdogKills", "GpufracAgentNotTicking"):
            self.assertIn(want, names)

    def test_nvfractions_toggle_changes_exactly_the_expected_things(self):
        on, off = docs(rendered()), docs(rendered("nvFractions.enabled=false"))
        self.assertEqual(len(on), len(off))
        for a, b in zip(on, off):
            if a["kind"] == "DaemonSet":
                for key in ("initContainers", "containers"):
                    ca, cb = a["spec"]["template"]["spec"][key][0], \
                        b["spec"]["template"]["spec"][key][0]
                    self.assertEqual(env_of(ca).get("GPUFRAC_NVFRACTIONS"), "1")
                    self.assertNotIn("GPUFRAC_NVFRACTIONS", env_of(cb))
                    ca["env"] = [e for e in ca["env"] if e["name"] != "GPUFRAC_NVFRACTIONS"]
                self.assertEqual(a, b)
            elif a["kind"] == "ConfigMap" and a["metadata"]["name"] == "gpufrac-installer":
                for f, table in (("gpufrac-containerd-1.x.toml", "io.containerd.grpc.v1.cri"),
                                 ("gpufrac-containerd-2.x.toml", "io.containerd.cri.v1.runtime")):
                    ta, tb = tomllib.loads(a["data"][f]), tomllib.loads(b["data"][f])
                    ha = ta["plugins"][table]["containerd"]["runtimes"]["gpufrac"]
                    hb = tb["plugins"][table]["containerd"]["runtimes"]["gpufrac"]
                    self.assertEqual(ha.pop("pod_annotations"), GLOBS_KAI)
                    self.assertEqual(hb.pop("pod_annotations"), GLOBS_OWN)
                    self.assertEqual(ta, tb)
                self.assertEqual(a["data"]["install.sh"], b["data"]["install.sh"])
            else:
                self.assertEqual(a, b)

    def test_kai_global_nvfractions_set_means_enabled(self):
        # KAI users type global.nvFractions.set=true: the same as nvFractions.enabled=true
        off = "nvFractions.enabled=false"
        self.assertEqual(rendered(off, "global.nvFractions.set=true"), rendered())
        self.assertNotEqual(rendered(off), rendered())
        self.assertEqual(rendered(off, "global.nvFractions.set=false"), rendered(off))

    def test_readme_render_command_line(self):
        # the README's form: the chart as an argument, as helm template takes it
        out = subprocess.run([sys.executable, os.path.join(DEPLOY, "render.py"), CHART,
                              "--namespace", "gpufrac-system", "--create-namespace"],
                             capture_output=True, text=True, check=True).stdout
        self.assertEqual(out, rendered())
        bad = subprocess.run([sys.executable, os.path.join(DEPLOY, "render.py"), CHART,
                              "--chart", DEPLOY], capture_output=True, text=True)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("two charts given", bad.stderr)

    def test_image_is_the_one_make_image_builds(self):
        ds = docs(rendered())
        spec = find(ds, "DaemonSet")["spec"]["template"]["spec"]
        self.assertEqual(spec["containers"][0]["image"], "localhost/gpufrac-node:0.1.0")
        with open(os.path.join(SRC, "scripts", "build-image.sh")) as f:
            script = f.read()
        self.assertIn("registry=localhost\n", script)
        self.assertIn("build gpufrac-node /usr/sbin/gpufracd gpufrac\n", script)


class Containerd(unittest.TestCase):
    def check(self, text, table, version, globs=GLOBS_KAI, handler="gpufrac", systemd=True):
        t = tomllib.loads(text)
        self.assertEqual(t["version"], version)
        h = t["plugins"][table]["containerd"]["runtimes"][handler]
        self.assertEqual(h["runtime_type"], "io.containerd.runc.v2")
        self.assertEqual(h["pod_annotations"], globs)
        self.assertEqual(h["options"]["BinaryName"], "/usr/local/bin/gpufrac-runtime")
        self.assertIs(h["options"]["SystemdCgroup"], systemd)

    def test_snippets(self):
        for f, table, ver in (("gpufrac-containerd-1.x.toml", "io.containerd.grpc.v1.cri", 2),
                              ("gpufrac-containerd-2.x.toml", "io.containerd.cri.v1.runtime", 3)):
            with open(os.path.join(DEPLOY, "containerd", f)) as fh:
                text = fh.read()
            self.check(text, table, ver)
            # what the installer writes is the committed snippet, byte for byte
            cm = find(docs(rendered()), "ConfigMap", "gpufrac-installer")
            self.assertEqual(cm["data"][f], text, f)
            other = find(docs(rendered("runtime.handler=gf2", "runtime.systemdCgroup=false",
                                       "nvFractions.enabled=false")), "ConfigMap",
                         "gpufrac-installer")
            self.check(other["data"][f], table, ver, GLOBS_OWN, "gf2", False)
        self.assertEqual(find(docs(rendered("runtime.handler=gf2")), "RuntimeClass")["handler"],
                         "gf2")

    def test_1x_snippet_mentions_the_2x_table(self):
        with open(os.path.join(DEPLOY, "containerd", "gpufrac-containerd-1.x.toml")) as fh:
            self.assertIn("[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.gpufrac]",
                          fh.read())

    def test_install_script_parses(self):
        sh = find(docs(rendered()), "ConfigMap", "gpufrac-installer")["data"]["install.sh"]
        r = subprocess.run(["sh", "-n"], input=sh, text=True, capture_output=True)
        self.assertEqual(r.returncode, 0, r.stderr)


class Installer(unittest.TestCase):
    """Runs install.sh against a fake host tree (no nsenter: version from config.toml)."""

    def run_installer(self, tmp, mode, conf=None, env=None):
        cm = find(docs(rendered()), "ConfigMap", "gpufrac-installer")["data"]
        cfg = os.path.join(tmp, "cfg")
        os.makedirs(cfg, exist_ok=True)
        for k, v in cm.items():
            with open(os.path.join(cfg, k), "w") as f:
                f.write(v.replace("/etc/gpufrac-install", cfg).replace("H=/host", "H=" + tmp +
                                                                        "/host"))
        img = os.path.join(tmp, "img")
        with open(os.path.join(cfg, "install.sh")) as f:
            script = f.read()
        # the image's files, and no nsenter into this machine's PID 1
        script = script.replace("put /usr/", "put %s/usr/" % img)
        script = script.replace("nsenter ", "false ")
        with open(os.path.join(cfg, "install.sh"), "w") as f:
            f.write(script)
        for p in ("usr/sbin/gpufrac-runtime", "usr/lib/x86_64-linux-gnu/gpufrac/libgpufrac.so"):
            os.makedirs(os.path.dirname(os.path.join(img, p)), exist_ok=True)
            with open(os.path.join(img, p), "w") as f:
                f.write("x")
        etc = os.path.join(tmp, "host", "etc", "containerd")
        os.makedirs(etc, exist_ok=True)
        if conf is not None:
            with open(os.path.join(etc, "config.toml"), "w") as f:
                f.write(conf)
        e = dict(os.environ, GPUFRAC_CONTAINERD_CONFIG=mode, PATH="/usr/bin:/bin",
                 **(env or {}))
        if mode is None:  # the script's own default
            del e["GPUFRAC_CONTAINERD_CONFIG"]
        r = subprocess.run(["sh", os.path.join(cfg, "install.sh")], env=e, text=True,
                           capture_output=True)
        return r, etc

    def test_dropin_and_append(self):
        import tempfile
        main_conf = ('version = 2\n\n[plugins."io.containerd.grpc.v1.cri".containerd]\n'
                     '  default_runtime_name = "runc"\n')
        with tempfile.TemporaryDirectory() as tmp:
            # containerd 1.x: a drop-in would replace config.toml's CRI settings
            r, etc = self.run_installer(tmp, "dropin", main_conf)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("has CRI settings of its own", r.stdout)
            self.assertFalse(os.path.exists(os.path.join(etc, "conf.d")))
            with open(os.path.join(etc, "config.toml")) as f:
                self.assertEqual(f.read(), main_conf)
        with tempfile.TemporaryDirectory() as tmp:
            r, etc = self.run_installer(tmp, "dropin", "version = 2\n",
                                        {"GPUFRAC_NVFRACTIONS": "1"})
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("does not import", r.stdout)
            with open(os.path.join(etc, "conf.d", "gpufrac.toml")) as f:
                self.assertIn("io.containerd.grpc.v1.cri", f.read())
            with open(os.path.join(tmp, "host/etc/gpufrac/runtime.conf")) as f:
                conf = f.read()
            self.assertIn("\nreal_runtime=runc\n", conf)  # no GPUFRAC_REAL_RUNTIME given
            self.assertIn("\nstate_dir=/run/gpufrac\n", conf)
            self.assertIn("\nshim=/usr/local/lib/gpufrac/libgpufrac.so\n", conf)
            self.assertIn("\nnvfractions=1\n", conf)
            self.assertTrue(os.access(os.path.join(tmp, "host/usr/local/bin/gpufrac-runtime"),
                                      os.X_OK))
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(2):  # idempotent
                r, etc = self.run_installer(tmp, "append", main_conf)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(os.path.join(etc, "config.toml")) as f:
                t = tomllib.loads(f.read())
            cri = t["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]
            self.assertEqual(cri["default_runtime_name"], "runc")
            self.assertEqual(cri["runtimes"]["gpufrac"]["options"]["BinaryName"],
                             "/usr/local/bin/gpufrac-runtime")
            # containerd 1.6 loses its built-in runc once a file defines runtimes
            self.assertEqual(cri["runtimes"]["runc"], {"runtime_type": "io.containerd.runc.v2"})
        with tempfile.TemporaryDirectory() as tmp:
            own = main_conf + ('\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
                               '  runtime_type = "io.containerd.runc.v2"\n'
                               '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc'
                               '.options]\n    SystemdCgroup = true\n')
            r, etc = self.run_installer(tmp, "append", own)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(os.path.join(etc, "config.toml")) as f:
                t = tomllib.loads(f.read())  # one runc table: config.toml's own
            runc = t["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["runc"]
            self.assertIs(runc["options"]["SystemdCgroup"], True)
            self.assertTrue(os.path.exists(os.path.join(etc, "config.toml.gpufrac-orig")))
        with tempfile.TemporaryDirectory() as tmp:
            r, etc = self.run_installer(tmp, "append", "version = 3\n")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(os.path.join(etc, "config.toml")) as f:
                t = tomllib.loads(f.read())
            self.assertIn("gpufrac", t["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]
                          ["runtimes"])
        with tempfile.TemporaryDirectory() as tmp:
            r, _ = self.run_installer(tmp, "bogus", "")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("auto, dropin, append or none", r.stdout)

    def test_auto(self):
        import tempfile
        cri = '\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "pause:1"\n'
        imports = 'imports = ["/etc/containerd/conf.d/*.toml"]\n'
        v3_cri = "\n[plugins.'io.containerd.cri.v1.images']\n  snapshotter = \"native\"\n"
        cases = (  # config.toml (the version line: 1.x or 2.x), mode chosen, why
            ("version = 2\n" + cri, "append", "does not import"),  # Debian 12's stock file
            ("version = 2\n" + imports + cri, "append", "has CRI settings a drop-in would replace"),
            ("version = 2\n" + imports, "dropin", "has no CRI settings of its own"),
            ("version = 3\n" + imports + v3_cri, "dropin", "imports conf.d"),
            ("version = 3\n" + v3_cri, "append", "does not import"),
        )
        for conf, want, why in cases:
            for mode in ("auto", None):  # auto is also the script's default
                with tempfile.TemporaryDirectory() as tmp:
                    r, etc = self.run_installer(tmp, mode, conf)
                    self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                    self.assertIn("installer.containerdConfig=auto: %s (" % want, r.stdout)
                    self.assertIn(why, r.stdout)
                    with open(os.path.join(etc, "config.toml")) as f:
                        text = f.read()
                    dropin = os.path.join(etc, "conf.d", "gpufrac.toml")
                    if want == "dropin":
                        self.assertEqual(text, conf)
                        with open(dropin) as f:
                            t = tomllib.loads(f.read())
                    else:
                        self.assertFalse(os.path.exists(dropin))
                        self.assertTrue(text.startswith(conf))
                        t = tomllib.loads(text)
                    table = "io.containerd.grpc.v1.cri" if conf.startswith("version = 2") \
                        else "io.containerd.cri.v1.runtime"
                    self.assertIn("gpufrac", t["plugins"][table]["containerd"]["runtimes"])
        with tempfile.TemporaryDirectory() as tmp:
            # an appended block stays the way: config.toml imports conf.d later
            r, etc = self.run_installer(tmp, "auto", "version = 3\n")
            self.assertIn("auto: append", r.stdout)
            with open(os.path.join(etc, "config.toml")) as f:
                text = f.read()
            with open(os.path.join(etc, "config.toml"), "w") as f:
                f.write(imports + text)
            r, etc = self.run_installer(tmp, "auto")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("auto: append (config.toml has the block an earlier run appended)",
                          r.stdout)
            self.assertFalse(os.path.exists(os.path.join(etc, "conf.d", "gpufrac.toml")))
            with open(os.path.join(etc, "config.toml")) as f:
                self.assertEqual(f.read(), imports + text)  # unchanged: the block is current

    def test_chart_default_is_auto(self):
        spec = find(docs(rendered()), "DaemonSet")["spec"]["template"]["spec"]
        self.assertEqual(env_of(spec["initContainers"][0])["GPUFRAC_CONTAINERD_CONFIG"], "auto")
        spec = find(docs(rendered("installer.containerdConfig=append")), "DaemonSet")
        self.assertEqual(env_of(spec["spec"]["template"]["spec"]["initContainers"][0])
                         ["GPUFRAC_CONTAINERD_CONFIG"], "append")


if __name__ == "__main__":
    cases.main(verbosity=2)
