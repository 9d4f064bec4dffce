# SPDX-License-Identifier: Apache-2.0
"""gpufracd's metrics, dashboard and alert rules against Debian's real
Prometheus: a private server on loopback scrapes a real gpufracd with live
fractions over gpusim; promtool checks the page and the rules and runs the
rules' unit tests; every panel expression of the dashboard is queried
through the server's HTTP API and must parse and return series."""
import json
import os
import shutil
import subprocess
import sys
import time
import unittest
import urllib.parse
import urllib.request

import cases
from ports import free_port

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from harness import BUILD, GPUFRAC, PROBE, SimTestCase  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("GPUFRAC_SOURCE") or os.path.join(HERE, "..", "..")
FILES = os.path.join(SOURCE, "deploy", "helm", "gpufrac", "files")
DASHBOARD = os.path.join(FILES, "gpufrac-dashboard.json")
ALERTS = os.path.join(FILES, "gpufrac-alerts.yaml")
AGENT = os.path.join(BUILD, "bin", "gpufracd")
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")


def panel_exprs():
    """Every (panel title, expression) of the dashboard, with the dashboard's
    variables as Grafana would expand "All"."""
    with open(DASHBOARD) as f:
        dash = json.load(f)
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"].replace("$Hostname", ".+")))
    return dash, out


@unittest.skipUnless(PROMETHEUS and PROMTOOL,
                     "needs Debian's prometheus package (prometheus, promtool)")
class PrometheusTest(SimTestCase):
    devices = "4Gi"

    def setUp(self):
        super().setUp()
        self.state = os.path.join(self.tmp, "state")
        self.env["GPUFRAC_STATE_DIR"] = self.state
        self.log = open(os.path.join(self.tmp, "agent.log"), "w")
        self.agent = subprocess.Popen(
            [AGENT, "--state-dir", self.state, "--metrics-listen", "127.0.0.1:0",
             "--watchdog-period-ms", "200"], env=self.env, stdout=self.log,
            stderr=subprocess.STDOUT)
        self.procs.append(self.agent)
        self.port = self.wait_for(self.agent_port, "the agent to be ready")
        self.prom = None

    def tearDown(self):
        if self.prom and self.prom.poll() is None:
            self.prom.terminate()
            self.prom.wait(timeout=30)
        super().tearDown()
        self.log.close()

    def agent_port(self):
        with open(os.path.join(self.tmp, "agent.log")) as f:
            for ln in f:
                if "ready:" in ln:
                    return ln.rsplit("127.0.0.1:", 1)[1].split()[0]
        return None

    def run_bg(self, name, *args):
        out = open(os.path.join(self.tmp, name + ".out"), "w")
        p = subprocess.Popen([GPUFRAC, "run", "--name", name, *args], env=self.env,
                             stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self.procs.append(p)
        return p

    def page(self):
        with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % self.port, timeout=10) as r:
            return r.read().decode()

    def start_prometheus(self):
        web = free_port()
        cfg = os.path.join(self.tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "rule_files:\n  - %s\n"
                    "scrape_configs:\n  - job_name: gpufrac-agent\n    honor_labels: true\n"
                    "    static_configs:\n      - targets: ['127.0.0.1:%s']\n" % (ALERTS, self.port))
        self.prom_log = os.path.join(self.tmp, "prometheus.log")
        with open(self.prom_log, "w") as log:
            self.prom = subprocess.Popen(
                [PROMETHEUS, "--config.file=" + cfg,
                 "--storage.tsdb.path=" + os.path.join(self.tmp, "tsdb"),
                 "--web.listen-address=127.0.0.1:%d" % web, "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.tmp)
        self.api = "http://127.0.0.1:%d/api/v1/" % web
        self.wait_for(lambda: self.get("-/ready", raw=True), "Prometheus to be ready", 60)

    def get(self, path, raw=False, **params):
        url = (self.api.replace("api/v1/", "") if raw else self.api) + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = r.read().decode()
        except (OSError, urllib.error.HTTPError) as e:
            if raw:
                return None
            body = e.read().decode() if isinstance(e, urllib.error.HTTPError) else ""
            if not body:
                raise
        return body if raw else json.loads(body)

    def query(self, expr):
        return self.get("query", query=expr)

    def series(self, expr):
        r = self.query(expr)
        self.assertEqual(r["status"], "success", (expr, r))
        return r["data"]["result"]

    def test_metrics_dashboard_and_alerts_against_real_prometheus(self):
        # live fractions: a steady one, one refused past its limit, one bursting
        self.run_bg("steady", "--memory", "1Gi", "--", PROBE, "alloc", "512Mi", "hold", "120")
        # greedy's second process asks past its limit once Prometheus watches
        self.env.update(P=PROBE, T=self.tmp)
        self.run_bg("greedy", "--memory", "1Gi", "--", "sh", "-c",
                    '"$P" alloc 768Mi hold 120 & until [ -e "$T/go" ]; do sleep 0.1; done; '
                    '"$P" alloc 768Mi; wait')
        self.run_bg("burst", "--memory", "512Mi", "--limit", "2Gi", "--", PROBE, "alloc",
                    "1Gi", "hold", "120")
        self.wait_for(lambda: 'fraction="burst"' in self.page() and
                      'gpufrac_fraction_memory_burst_bytes{' in self.page() and
                      'alloc_denied_total{' in self.page() and
                      [ln for ln in self.page().splitlines()
                       if ln.startswith("gpufrac_fraction_memory_burst_bytes{")
                       and 'fraction="burst"' in ln and not ln.endswith(" 0")],
                      "three live fractions with a loan")

        # promtool's linter finds exactly one thing on the page, accepted: the
        # dcgm-exporter label modelName is not snake_case (Hostname and UUID pass
        # its check), once per sample that carries the GPU's labels. They are
        # kept so that joins with DCGM_FI_* work (docs/operations.md).
        page = self.page()
        lint = subprocess.run([PROMTOOL, "check", "metrics"], input=page,
                              capture_output=True, text=True)
        findings = sorted(ln for ln in (lint.stdout + lint.stderr).splitlines() if ln.strip())
        with_gpu = [ln.split("{", 1)[0] for ln in page.splitlines()
                    if not ln.startswith("#") and 'modelName="' in ln]
        self.assertGreaterEqual(len(set(with_gpu)), 10)
        accepted = sorted("%s label names should be written in 'snake_case' not 'camelCase'"
                          % name for name in with_gpu)
        self.assertEqual(findings, accepted, lint.stdout + lint.stderr)
        self.assertEqual(lint.returncode, 3, lint.stdout + lint.stderr)
        # without those labels the page is clean
        plain = "\n".join(ln.replace('Hostname="', 'hostname="').replace('UUID="', 'uuid="')
                           .replace('modelName="', 'model_name="') for ln in page.splitlines())
        lint = subprocess.run([PROMTOOL, "check", "metrics"], input=plain + "\n",
                              capture_output=True, text=True)
        self.assertEqual(lint.returncode, 0, lint.stdout + lint.stderr)
        chk = subprocess.run([PROMTOOL, "check", "rules", ALERTS], capture_output=True,
                             text=True)
        self.assertEqual(chk.returncode, 0, chk.stdout + chk.stderr)
        self.assertIn("7 rules found", chk.stdout)
        unit = subprocess.run([PROMTOOL, "test", "rules", "gpufrac_alerts_test.yaml"],
                              capture_output=True, text=True, cwd=HERE)
        self.assertEqual(unit.returncode, 0, unit.stdout + unit.stderr)

        self.start_prometheus()
        # a few scrapes, so that rate() over them has two samples at least
        self.wait_for(lambda: [s for s in self.series("count_over_time(gpufrac_agent_ticks_total[1m])")
                               if float(s["value"][1]) >= 4], "four scrapes", 60)

        open(os.path.join(self.tmp, "go"), "w").close()

        # the labels as Prometheus stored them: dcgm-exporter's, and user, not pod
        s = self.series('gpufrac_fraction_memory_request_bytes{fraction="steady"}')
        self.assertEqual(len(s), 1, s)
        m = s[0]["metric"]
        for k in ("Hostname", "modelName", "gpu", "UUID", "device", "user", "fraction"):
            self.assertIn(k, m)
        self.assertEqual(m["device"], "nvidia0")
        self.assertEqual(m["modelName"], "gpusim 4Gi")
        for k in ("namespace", "pod", "container", "exported_pod"):
            self.assertNotIn(k, m)
        kills = self.series("gpufrac_fraction_watchdog_kills_total")
        self.assertEqual(sorted(k["metric"]["fraction"] for k in kills),
                         ["burst", "greedy", "steady"])
        self.assertTrue(all("UUID" in k["metric"] for k in kills), kills)

        # every panel of the dashboard parses and returns series
        dash, exprs = panel_exprs()
        self.assertGreaterEqual(len(exprs), 10)
        for title, expr in exprs:
            with self.subTest(panel=title, expr=expr):
                r = self.query(expr)
                self.assertEqual(r.get("status"), "success", "%s: %s" % (expr, r))
                self.assertTrue(r["data"]["result"], "panel %r: %s returned no series"
                                % (title, expr))
        # ...and its node variable lists this host
        var = [v for v in dash["templating"]["list"] if v["name"] == "Hostname"][0]
        metric = var["definition"].split("(", 1)[1].split(",")[0].strip()
        hosts = self.get("label/Hostname/values", **{"match[]": metric})
        self.assertEqual(hosts["status"], "success")
        self.assertEqual(hosts["data"], [m["Hostname"]])

        # the rules loaded and evaluate; the greedy fraction's refusal fires its alert
        def rules_ok():
            groups = self.get("rules")["data"]["groups"]
            rules = [r for g in groups for r in g["rules"]]
            return len(rules) == 7 and all(r["health"] == "ok" for r in rules) and rules
        self.wait_for(rules_ok, "the rules to be evaluated", 60)
        firing = self.wait_for(lambda: [a for a in self.get("alerts")["data"]["alerts"]
                                        if a["labels"]["alertname"] == "GpufracAllocationsDenied"
                                        and a["state"] == "firing"], "the refusal alert", 60)
        self.assertEqual([a["labels"]["fraction"] for a in firing], ["greedy"])
        quiet = [a["labels"]["alertname"] for a in self.get("alerts")["data"]["alerts"]
                 if a["labels"]["alertname"] in ("GpufracAgentNotTicking", "GpufracAgentDown",
                                                 "GpufracWatchdogKills", "GpufracAgentMetricsAbsent")]
        self.assertEqual(quiet, [])

    def test_an_eviction_is_visible_after_the_fraction_is_gone(self):
        # a borrower whose loan an owner takes back; Prometheus scrapes every second
        self.start_prometheus()
        borrower = self.run_bg("borrower", "--memory", "1Gi", "--limit", "3Gi", "--", PROBE,
                               "alloc", "2560Mi", "hold", "120")
        # its label set is scraped at 0 first, so the eviction is an increase
        self.wait_for(lambda: [s for s in self.series(
            'count_over_time(gpufrac_evictions_total{user="root"}[1m])')
            if float(s["value"][1]) >= 2], "two scrapes of the borrower's user at 0", 60)
        self.assertTrue(self.series('gpufrac_fraction_memory_burst_bytes{fraction="borrower"} > 0'))
        owner = subprocess.run([GPUFRAC, "run", "--name", "owner", "--memory", "2Gi", "--", PROBE,
                                "alloc", "1900Mi", "freeall"], env=self.env, capture_output=True,
                               text=True, timeout=120)
        self.assertIn("alloc=ok", owner.stdout, owner.stderr)
        borrower.wait(timeout=60)
        self.assertEqual(borrower.returncode, 75)
        # the borrower's own series are gone from the page; who was evicted is not
        self.wait_for(lambda: 'fraction="borrower"' not in self.page(), "the borrower gone")
        hit = self.wait_for(lambda: self.series('increase(gpufrac_evictions_total[10m]) > 0.5'),
                            "the eviction in increase(...[10m])", 60)
        self.assertEqual([s["metric"].get("user") for s in hit], ["root"], hit)
        self.assertEqual(self.series('increase(gpufrac_watchdog_kills_total[10m]) > 0'), [])


if __name__ == "__main__":
    if not (PROMETHEUS and PROMTOOL):
        print("SKIP: needs Debian's prometheus package (prometheus, promtool): "
              "apt-get install prometheus")
        sys.exit(77)
    cases.main(verbosity=2)
