# SPDX-License-Identifier: Apache-2.0
"""`gpufrac run | status | demo` driven as a user would, over gpusim."""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import cases

sys.path.insert(0, os.path.dirname(__file__))
from harness import GPUFRAC, PROBE, Gi, Mi, SimTestCase, kv  # noqa: E402


class CliTestCase(SimTestCase):
    def setUp(self):
        super().setUp()
        self.state = os.path.join(self.tmp, "state")
        self.env["GPUFRAC_STATE_DIR"] = self.state

    def run_cli(self, *args, env=None, timeout=120):
        return subprocess.run([GPUFRAC] + [str(a) for a in args], env=env or self.env,
                              capture_output=True, text=True, timeout=timeout)

    def fractions(self):
        d = os.path.join(self.state, "fractions")
        return sorted(n for n in os.listdir(d) if not n.startswith(".")) if os.path.isdir(d) else []

    def status(self):
        r = self.run_cli("status", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)["fractions"]



class RunTest(CliTestCase):
    def test_limit_seen_and_enforced(self):
        r = self.run_cli("run", "--memory", "1Gi", "--", PROBE, "info", "totalmem", "nvml",
                         "alloc", "600Mi", "alloc", "600Mi", "freeall")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = kv(r.stdout)
        self.assertEqual(int(out["total"]), 1 * Gi)
        self.assertEqual(int(out["devtotal"]), 1 * Gi)
        self.assertEqual(int(out["nvml_total"]), 1 * Gi)
        self.assertIn("alloc=ok", r.stdout)
        self.assertEqual(out["alloc"], "CUDA_ERROR_OUT_OF_MEMORY")
        self.assertEqual(self.fractions(), [], "fraction left behind after the run")

    def test_portion_is_a_share_of_the_device(self):
        for amount in ("0.25", "25%"):
            with self.subTest(amount=amount):
                r = self.run_cli("run", "--memory", amount, "--", PROBE, "info")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(int(kv(r.stdout)["total"]), 1 * Gi)

    def test_processes_of_one_run_share_the_limit(self):
        script = ('"$P" alloc 600Mi hold 30 > "$T/first" & '
                  'until grep -q holding "$T/first"; do sleep 0.05; done; '
                  '"$P" alloc 600Mi alloc 300Mi; kill $!; wait')
        env = dict(self.env, P=PROBE, T=self.tmp)
        r = self.run_cli("run", "--memory", "1Gi", "--", "sh", "-c", script, env=env)
        with open(os.path.join(self.tmp, "first")) as fh:
            self.assertIn("alloc=ok", fh.read())
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("alloc=")]
        self.assertEqual(lines, ["alloc=CUDA_ERROR_OUT_OF_MEMORY", "alloc=ok"],
                         r.stdout + r.stderr)

    def test_exit_status_is_the_commands(self):
        self.assertEqual(self.run_cli("run", "--memory", "1Gi", "--", "sh", "-c",
                                      "exit 7").returncode, 7)
        r = self.run_cli("run", "--memory", "1Gi", "--", "sh", "-c", "kill -TERM $$")
        self.assertEqual(r.returncode, 128 + signal.SIGTERM)
        r = self.run_cli("run", "--memory", "1Gi", "--", "/nonexistent/prog")
        self.assertEqual(r.returncode, 127)
        self.assertIn("cannot run '/nonexistent/prog'", r.stderr)

    def test_malformed_values_are_named_and_start_nothing(self):
        marker = os.path.join(self.tmp, "started")
        cases = [
            (["--memory", "8GB"], ["--memory", '"8GB"']),
            (["--memory", "1gb"], ["--memory", '"1gb"']),
            (["--memory", "-1Gi"], ["--memory", '"-1Gi"']),
            (["--memory", "0"], ["--memory", '"0"']),
            (["--memory", "500m"], ["--memory", '"500m"']),
            (["--memory", "150%"], ["--memory", '"150%"']),
            (["--memory", "99999999999999999999Gi"], ["--memory"]),
            (["--memory", "2Gi", "--limit", "1Gi"], ["limit", "request"]),
            (["--memory", "64Gi"], ["--memory", "64"]),
            (["--memory", "1Gi", "--mode", "fast"], ["--mode", '"fast"', "time-slicing"]),
            (["--memory", "1Gi", "--compute", "0.5"], ["--compute", "sm-sharing"]),
            (["--memory", "1Gi", "--mode", "sm-sharing", "--compute", "50%"],
             ["--compute", '"50%"']),
            (["--memory", "1Gi", "--devices", "7"], ["--devices", '"7"']),
            (["--memory", "1Gi", "--name", "a/b"], ["--name"]),
            (["--memroy", "1Gi"], ["--memroy"]),
        ]
        for flags, words in cases:
            with self.subTest(flags=flags):
                r = self.run_cli("run", *flags, "--", "touch", marker)
                self.assertEqual(r.returncode, 2, r.stderr)
                for w in words:
                    self.assertIn(w, r.stderr)
                self.assertFalse(os.path.exists(marker), "the command was started")
                self.assertEqual(self.fractions(), [])

    def test_status_lists_live_fraction(self):
        p = subprocess.Popen([GPUFRAC, "run", "--memory", "1Gi", "--name", "trainer", "--",
                              PROBE, "alloc", "300Mi", "hold", "30"], env=self.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        # status reads slots and counters one after the other: wait for a
        # snapshot that has both (a wrong count still fails, by timing out)
        st = self.wait_for(lambda: [f for f in self.status()
                                    if f["used"] > 0 and f["processes"] == 1], "usage")
        f = st[0]
        self.assertEqual(f["name"], "trainer")
        self.assertEqual(f["state"], "running")
        self.assertEqual(f["limit"], 1 * Gi)
        self.assertEqual(f["used"], 300 * Mi)
        self.assertEqual(f["processes"], 1)
        table = self.run_cli("status").stdout
        self.assertIn("trainer", table)
        self.assertIn("300", table)
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=30)
        self.assertEqual(self.status(), [])

    def test_sigkilled_process_memory_returned_by_supervisor(self):
        # the fraction lives on (sleep) after its CUDA process is killed
        script = '"$P" alloc 800Mi hold 60 & echo $! > "$T"/pid; wait; exec sleep 60'
        env = dict(self.env, P=PROBE, T=self.tmp)
        p = subprocess.Popen([GPUFRAC, "run", "--memory", "1Gi", "--name", "k", "--", "sh",
                              "-c", script], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        self.wait_for(lambda: [f for f in self.status() if f.get("used") == 800 * Mi],
                      "800Mi used")
        with open(os.path.join(self.tmp, "pid")) as fh:
            os.kill(int(fh.read()), signal.SIGKILL)
        st = self.wait_for(lambda: [f for f in self.status() if f.get("used") == 0],
                           "the killed process's memory to come back")
        self.assertEqual(st[0]["name"], "k")
        self.assertEqual(st[0]["state"], "running")
        self.assertEqual(st[0]["processes"], 0)
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=30)

    def hold_fraction(self, *flags):
        p = subprocess.Popen([GPUFRAC, "run", *flags, "--", PROBE, "alloc", "1Mi", "hold", "60"],
                             env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        self.procs.append(p)
        self.wait_for(lambda: [f for f in self.status() if f.get("used", 0) > 0], "a holder")
        return p

    def test_guarantees_never_oversubscribe_a_gpu(self):
        self.hold_fraction("--memory", "3Gi", "--name", "big")
        marker = os.path.join(self.tmp, "started")
        r = self.run_cli("run", "--memory", "2Gi", "--", "touch", marker)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("1.00 GiB not guaranteed", r.stderr)
        self.assertIn("2.00 GiB", r.stderr)
        self.assertFalse(os.path.exists(marker))
        r = self.run_cli("run", "--memory", "1Gi", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_modes_never_share_a_gpu(self):
        self.hold_fraction("--memory", "1Gi", "--name", "ts")
        r = self.run_cli("run", "--memory", "1Gi", "--mode", "sm-sharing", "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn('time-slicing fraction "ts"', r.stderr)
        self.assertIn("cannot share", r.stderr)

    def test_help_and_version(self):
        for args in (["--help"], ["run", "--help"], ["status", "--help"], ["demo", "--help"],
                     ["stop", "--help"], ["top", "--help"]):
            r = self.run_cli(*args)
            self.assertEqual(r.returncode, 0, args)
            self.assertIn("gpufrac", r.stdout)
        self.assertEqual(self.run_cli("frobnicate").returncode, 2)


class FloorTest(CliTestCase):
    def test_amounts_under_a_mebibyte_are_refused_with_a_hint(self):
        marker = os.path.join(self.tmp, "started")
        for flags, hint in ((["--memory", "2"], "did you mean 2Gi?"),
                            (["--memory", "8"], "did you mean 8Gi?"),
                            (["--memory", "1Ki"], "did you mean 1Gi?"),
                            (["--memory", "1Gi", "--limit", "512Ki"], "did you mean 512Gi?")):
            with self.subTest(flags=flags):
                r = self.run_cli("run", *flags, "--", "touch", marker)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("at least 1Mi", r.stderr)
                self.assertIn(hint, r.stderr)
                self.assertFalse(os.path.exists(marker))
        r = self.run_cli("run", "--memory", "64Mi", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_amounts_under_one_cuda_context_are_refused_naming_its_size(self):
        marker = os.path.join(self.tmp, "started")
        for flags, shown in ((["--memory", "1Mi"], '--memory "1Mi": 1.00 MiB'),
                             (["--memory", "63Mi"], '--memory "63Mi": 63.00 MiB'),
                             (["--memory", "0.0000001"], '--memory "0.0000001": 1.00 MiB'),
                             (["--memory", "1Mi", "--limit", "32Mi"], '--limit "32Mi"')):
            with self.subTest(flags=flags):
                r = self.run_cli("run", *flags, "--", "touch", marker)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(shown, r.stderr)
                self.assertIn("less than one CUDA context needs", r.stderr)
                self.assertIn("at least 64Mi", r.stderr)
                self.assertFalse(os.path.exists(marker))
        # a request under a context is fine when the limit holds one
        r = self.run_cli("run", "--memory", "1Mi", "--limit", "64Mi", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_mistyped_state_dir_is_refused_not_made(self):
        typo = os.path.join(self.tmp, "stat", "nested")
        for args in (["run", "--state-dir", typo, "--memory", "1Gi", "--", "true"],
                     ["status", "--state-dir", typo], ["stop", "--state-dir", typo, "x"]):
            with self.subTest(cmd=args[0]):
                r = self.run_cli(*args)
                self.assertNotEqual(r.returncode, 0, r.stderr)
                self.assertIn('--state-dir: "%s" does not exist' % typo, r.stderr)
                self.assertFalse(os.path.exists(os.path.join(self.tmp, "stat")))
        # an existing one is used as before; GPUFRAC_STATE_DIR may still be made
        os.mkdir(os.path.join(self.tmp, "given"))
        r = self.run_cli("run", "--state-dir", os.path.join(self.tmp, "given"), "--memory", "1Gi",
                         "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_cli("run", "--memory", "1Gi", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isdir(self.state))

    def test_a_misspelt_unit_gets_the_quantity_meant(self):
        for value, meant in (("8GB", "8Gi"), ("512mb", "512Mi"), ("1gib", "1Gi")):
            with self.subTest(value=value):
                r = self.run_cli("run", "--memory", value, "--", "true")
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn('did you mean "%s"?' % meant, r.stderr)
        r = self.run_cli("run", "--memory", "8Gx", "--", "true")
        self.assertNotIn("did you mean", r.stderr)

    def test_stop_ends_a_fraction_through_its_run(self):
        p = subprocess.Popen([GPUFRAC, "run", "--memory", "1Gi", "--name", "halt", "--", PROBE,
                              "alloc", "1Mi", "hold", "60"], env=self.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        self.wait_for(lambda: [f for f in self.status() if f["used"] > 0], "the holder")
        r = self.run_cli("stop", "halt")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("asked gpufrac run (pid %d)" % p.pid, r.stdout)
        p.communicate(timeout=30)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM)
        self.assertEqual(self.status(), [])
        r = self.run_cli("stop", "halt")
        self.assertEqual(r.returncode, 1)
        self.assertIn('no fraction "halt"', r.stderr)

    def test_without_the_agent_nothing_is_guaranteed(self):
        r = self.run_cli("run", "--memory", "1Gi", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("nothing is guaranteed", r.stderr)


class TwoGpuTest(CliTestCase):
    devices = "4Gi,4Gi"

    def test_sm_sharing_without_the_agent_stays_on_one_gpu(self):
        r = self.run_cli("run", "--memory", "1Gi", "--mode", "sm-sharing", "--", "sh", "-c",
                         "echo visible=$CUDA_VISIBLE_DEVICES; echo pinned=$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = kv(r.stdout)
        self.assertEqual(out["pinned"], "0=1024M")
        self.assertTrue(out["visible"].startswith("GPU-") and "," not in out["visible"], out)
        r = self.run_cli("run", "--memory", "1Gi", "--mode", "sm-sharing", "--devices", "0,1",
                         "--", "true")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("one GPU", r.stderr)

    def test_status_is_per_gpu_and_fits_80_columns(self):
        name = "a-fraction-with-a-rather-long-name-for-the-table"
        p = subprocess.Popen([GPUFRAC, "run", "--memory", "1Gi", "--limit", "2Gi", "--name",
                              name, "--", PROBE, "alloc", "300Mi", "hold", "30"], env=self.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        self.wait_for(lambda: [f for f in self.status() if f["used"] > 0], "usage")
        env = dict(self.env, COLUMNS="80")
        table = self.run_cli("status", env=env).stdout
        for ln in table.splitlines():
            self.assertLessEqual(len(ln), 80, "%r is wider than 80 columns" % ln)
        self.assertIn("GPU 0  gpusim 4Gi", table)
        self.assertIn("GPU 1  gpusim 4Gi", table)
        rows = [ln.split() for ln in table.splitlines() if ln.startswith("  root ")]
        self.assertEqual(len(rows), 2, table)  # one per GPU
        # per GPU: REQ LIMIT USED on the first (the probe used GPU 0), nothing used on the second
        self.assertEqual(rows[0][2:6], ["running", "1.0G", "2.0G", "300M"], table)
        self.assertEqual(rows[1][2:6], ["running", "1.0G", "2.0G", "0"], table)
        self.assertRegex(table, r"pid +\d+ +shimprobe +\d+M \(driver\)")
        wide = self.run_cli("status", env=dict(self.env, COLUMNS="160")).stdout
        self.assertIn(name, wide)
        self.assertIn("PEAK", wide)
        self.assertNotIn("PEAK", table)
        st = self.status()[0]
        self.assertEqual([d["used"] for d in st["devices"]], [300 * Mi, 0])
        self.assertEqual([d["index"] for d in st["devices"]], [0, 1])
        self.assertEqual(st["devices"][0]["processes"][0]["name"], "shimprobe")
        self.assertGreaterEqual(st["devices"][0]["processes"][0]["driver_used"], 300 * Mi)
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=30)

    def test_top_quits_on_q(self):
        import pty
        pid, fd = pty.fork()
        if pid == 0:
            os.execve(GPUFRAC, [GPUFRAC, "top", "--interval", "0.2"], self.env)
        out = b""
        while b"q to quit" not in out:
            out += os.read(fd, 4096)
        os.write(fd, b"q")
        try:
            while os.read(fd, 4096):
                pass
        except OSError:
            pass  # the pty closes when top exits
        _, status = os.waitpid(pid, 0)
        self.assertTrue(os.WIFEXITED(status), status)
        self.assertEqual(os.WEXITSTATUS(status), 0)


SCHEMA = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "status.schema.json")


class ViewsTest(CliTestCase):
    """The live views with many ended runs: 15 ended and 4 running fractions."""

    LIVE = ["live-%d" % i for i in range(4)]

    def crowd(self):
        for i in range(15):
            r = self.run_cli("run", "--memory", "256Mi", "--name", "short-%02d" % i, "--",
                             "true")
            self.assertEqual(r.returncode, 0, r.stderr)
        for name in self.LIVE:
            p = subprocess.Popen([GPUFRAC, "run", "--memory", "256Mi", "--name", name, "--",
                                  PROBE, "alloc", "10Mi", "hold", "60"], env=self.env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.procs.append(p)
        self.wait_for(lambda: len([f for f in self.status() if f["processes"] == 1]) == 4,
                      "the 4 running fractions")

    def tmux(self, *args, check=True):
        return subprocess.run(["tmux", "-L", self.sock, "-f", "/dev/null", *args],
                              capture_output=True, text=True, timeout=30, check=check)

    def top_in_tmux(self, cols, rows):
        if not shutil.which("tmux"):
            self.skipTest("tmux is not installed (scripts/deps.sh installs it)")
        self.sock = "gpufrac-test-%d" % os.getpid()
        cmd = ["env", "-i"] + ["%s=%s" % kv_ for kv_ in self.env.items()] + \
            [GPUFRAC, "top", "--interval", "0.2"]
        self.tmux("new-session", "-d", "-s", "top", "-x", str(cols), "-y", str(rows),
                  " ".join(shlex.quote(a) for a in cmd))
        self.addCleanup(self.tmux, "kill-server", check=False)
        self.wait_for(lambda: "q to quit" in self.tmux("capture-pane", "-p", "-t", "top").stdout,
                      "top's first screen")
        time.sleep(1.5)  # several redraws
        return self.tmux("capture-pane", "-p", "-t", "top").stdout

    def test_top_at_80x24_shows_every_running_fraction_and_redraws_in_place(self):
        self.crowd()
        screen = self.top_in_tmux(80, 24)
        for name in self.LIVE:
            self.assertIn(name, screen)
        self.assertIn("15 ended", screen)
        self.assertNotIn("short-", screen)  # collapsed until asked
        self.assertLessEqual(len(screen.rstrip("\n").splitlines()), 24, screen)
        history = self.tmux("display-message", "-p", "-t", "top", "#{history_size}").stdout
        self.assertEqual(history.strip(), "0", "top grew the scrollback")
        # e shows the ended rows (as many as fit), f filters, s sorts
        self.tmux("send-keys", "-t", "top", "e")
        self.wait_for(lambda: "short-" in self.tmux("capture-pane", "-p", "-t", "top").stdout,
                      "the ended rows after e")
        self.tmux("send-keys", "-t", "top", "e", "f")
        self.wait_for(lambda: "filter running" in self.tmux("capture-pane", "-p", "-t",
                                                            "top").stdout, "filter running")
        self.tmux("send-keys", "-t", "top", "s")
        self.wait_for(lambda: "sort used" in self.tmux("capture-pane", "-p", "-t",
                                                       "top").stdout, "sort used")
        self.tmux("send-keys", "-t", "top", "q")
        self.wait_for(lambda: self.tmux("has-session", "-t", "top", check=False).returncode,
                      "top to quit on q")

    def test_top_at_200_columns_puts_each_figure_under_its_label(self):
        self.crowd()
        screen = self.top_in_tmux(200, 50)
        lines = screen.splitlines()
        heads = [i for i, ln in enumerate(lines) if ln.lstrip().startswith("OWNER ")]
        self.assertTrue(heads, screen)
        head = lines[heads[0]]
        self.assertIn("PEAK", head)
        row = next(ln for ln in lines[heads[0] + 1:] if " live-0 " in ln)
        spans = lambda ln: [(m.start(), m.end()) for m in re.finditer(r"\S+", ln)]
        cells = spans(row)
        for start, end in spans(head):
            label = head[start:end]
            if label in ("OWNER", "FRACTION", "STATE", "MODE"):
                self.assertIn(start, [s for s, _ in cells], "%s\n%s\n%s" % (label, head, row))
            else:
                self.assertIn(end, [e for _, e in cells], "%s\n%s\n%s" % (label, head, row))

    def test_status_brief_fits_24_lines_with_every_running_fraction(self):
        self.crowd()
        r = self.run_cli("status", "--brief")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertLessEqual(len(lines), 24, r.stdout)
        for name in self.LIVE:
            self.assertIn(name, r.stdout)
        r = self.run_cli("status", "--brief", env=dict(self.env, LINES="12"))
        self.assertLessEqual(len(r.stdout.splitlines()), 12, r.stdout)
        # --ended lists every ended one; plain status to a pipe lists them all, as before
        full = self.run_cli("status", "--ended").stdout
        for i in range(15):
            self.assertIn("short-%02d" % i, full)

    def test_status_json_is_a_versioned_document_valid_against_the_schema(self):
        import jsonschema
        self.crowd()
        with open(SCHEMA) as fh:
            schema = json.load(fh)
        for flags in ([], ["--all"]):
            r = self.run_cli("status", "--json", *flags)
            self.assertEqual(r.returncode, 0, r.stderr)
            doc = json.loads(r.stdout)
            jsonschema.validate(doc, schema)
            self.assertEqual(doc["version"], 1)
            gpus = doc["gpus"]
            self.assertEqual([g["index"] for g in gpus], list(range(len(gpus))))
            self.assertGreaterEqual(len(gpus), 1)
            self.assertEqual([g["total"] for g in gpus], [4 * Gi] * len(gpus))
            self.assertEqual([g["name"] for g in gpus], ["gpusim 4Gi"] * len(gpus))
            self.assertEqual(sum(g["fractions"] for g in gpus), 4)
            self.assertEqual(sum(g["guaranteed"] for g in gpus), 4 * 256 * Mi)
            self.assertEqual(sum(g["lent"] for g in gpus), 0)
            self.assertGreaterEqual(sum(g["used"] for g in gpus), 4 * 10 * Mi)
            states = sorted(f["state"] for f in doc["fractions"])
            want = ["running"] * 4 + (["ended"] * 15 if flags else [])
            self.assertEqual(states, sorted(want))
        # what the schema refuses: the old bare array, a state the text never shows
        with self.assertRaises(jsonschema.ValidationError):
            jsonschema.validate(doc["fractions"], schema)
        doc["fractions"][0]["state"] = "gone"
        with self.assertRaises(jsonschema.ValidationError):
            jsonschema.validate(doc, schema)


class DemoTest(CliTestCase):
    def test_demo_passes_on_the_simulated_gpu(self):
        env = dict(self.env)
        env.pop("LD_LIBRARY_PATH")
        env.pop("GPUFRAC_STATE_DIR")
        r = self.run_cli("demo", "--simulated", env=env, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count("PASS"), 5, r.stdout)
        self.assertNotIn("FAIL", r.stdout)
        self.assertIn("greedy got 4.00 GiB, its share, then CUDA_ERROR_OUT_OF_MEMORY", r.stdout)
        self.assertIn("burst was evicted (exit 75)", r.stdout)
        self.assertIn('taken back for fraction "owner"', r.stdout)
        # the operator's view: the GPU's block, the steady one running, the evicted one
        self.assertIn("GPU 0  gpusim 16Gi", r.stdout)
        self.assertRegex(r.stdout, r"root +steady +running")
        self.assertRegex(r.stdout, r"\n +pid \d+ +gpufrac-probe +3\.0G \(driver\)")
        self.assertRegex(r.stdout, r"root +burst +evicted")
        self.assertRegex(r.stdout, r"root +greedy +ended +4\.0G +4\.0G +0 +0 +1 +0")
        self.assertIn("Every workload got what it was promised", r.stdout)
        # at once and in one screen: an 80x24 terminal, the prompt on the last row
        lines = r.stdout.splitlines()
        self.assertLessEqual(len(lines), 23, r.stdout)
        self.assertEqual([ln for ln in lines if len(ln) > 80], [], r.stdout)
        # it cleaned up after itself: its state, its agent
        state = [ln.split()[2] for ln in lines if ln.startswith("gpufrac status ")][0]
        self.assertFalse(os.path.exists(state), state)


if __name__ == "__main__":
    cases.main(verbosity=2)
