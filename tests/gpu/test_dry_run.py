# SPDX-License-Identifier: Apache-2.0
"""The GPU suite's own logic on gpusim, so that a typo cannot waste a lent
GPU: `run.sh --plan` lists every step in order within the default budget;
GPU_SUITE_FORCE=1 runs every step's code path against this build's gpusim,
each step PASS or a named SKIP; a run out of budget records budget skips that
the next run takes up; a run with the summary complete runs nothing again;
a summary cut short (a killed run) resumes at the missing steps."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import cases

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "run.sh")
BUILD = os.environ.get("GPUFRAC_BUILD") or os.path.join(HERE, "..", "..", "build")
# what must pass on gpusim: everything that needs no real framework
SIM_PASS = {"build", "env", "footprint.ctx", "footprint.race", "nvml", "status",
            "agent.reclaim", "agent.watchdog", "overhead.bench", "overhead.calls"}


def others_can_reach(path):
    """Whether every directory above path lets other users through (o+x)."""
    d = os.path.dirname(os.path.abspath(path))
    while True:
        if not os.stat(d).st_mode & 0o001:
            return False
        if d == os.path.dirname(d):
            return True
        d = os.path.dirname(d)


# as nobody, the ctypes probe on its own gpusim; where nobody cannot reach the
# checkout (a clone in a private directory) the step skips, naming that
if os.geteuid() == 0 and shutil.which("runuser") and others_can_reach(RUN) and \
        others_can_reach(os.path.join(BUILD, "bin", "gpufrac")):
    SIM_PASS.add("nonroot")


def plan(env=None):
    r = subprocess.run(["bash", RUN, "--plan"], capture_output=True, text=True, timeout=30,
                       env=env)
    return r


def steps():
    rows = [ln.split() for ln in plan().stdout.splitlines()[1:] if ln[:1].isdigit()]
    return [r[2] for r in rows], rows


def summary(out):
    lines = {}
    with open(os.path.join(out, "summary.txt")) as f:
        for ln in f:
            if ln[:4] in ("PASS", "FAIL", "SKIP"):
                status, name, *rest = ln.split(None, 2) + [""]
                lines[name] = (status, rest[0].strip())
    return lines


class PlanTest(unittest.TestCase):
    def test_plan_lists_steps_in_order_within_the_budget(self):
        r = plan()
        self.assertEqual(r.returncode, 0, r.stderr)
        names, rows = steps()
        self.assertEqual(names[:3], ["build", "env", "torch.limits"])
        self.assertEqual(len(set(names)), len(names))
        groups = [int(r[1]) for r in rows]
        self.assertEqual(groups, sorted(groups), "steps ordered by value (group)")
        self.assertEqual([int(r[0]) for r in rows], list(range(1, len(rows) + 1)))
        expected = sum(int(r[3]) for r in rows)
        for row in rows:
            self.assertLessEqual(int(row[3]), int(row[4]), "expected time within the cap: %s"
                                 % row)
        m = re.search(r"expected total: (\d+)s of GPU_SUITE_BUDGET=(\d+)s \((\d+)s kept", r.stdout)
        self.assertTrue(m, r.stdout)
        self.assertEqual(int(m.group(1)), expected)
        self.assertEqual(int(m.group(2)), 420)
        self.assertLessEqual(expected, 420 - int(m.group(3)),
                             "the default plan fits in 7 minutes")
        for want in ("agent.reclaim", "agent.watchdog", "nvml", "numba", "jax.prealloc",
                     "jax.noprealloc", "cupy", "overhead.calls", "overhead.train", "sm.train"):
            self.assertIn(want, names)

    def test_plan_marks_a_subset_and_refuses_unknown_steps(self):
        env = dict(os.environ, GPU_STEPS="torch,nvml")
        r = plan(env)
        self.assertEqual(r.returncode, 0, r.stderr)
        marked = [ln.split()[2] for ln in r.stdout.splitlines()
                  if ln[:1].isdigit() and "(not in GPU_STEPS)" not in ln]
        self.assertEqual(marked, ["build", "env", "torch.limits", "torch.share",
                                  "torch.footprint", "torch.portion", "nvml"])
        r = plan(dict(os.environ, GPU_STEPS="torch.limit"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("'torch.limit', not a step", r.stderr)
        r = plan(dict(os.environ, GPU_SUITE_BUDGET="7m"))
        self.assertEqual(r.returncode, 2)


class DryRunTest(unittest.TestCase):
    def setUp(self):
        self.out = tempfile.mkdtemp(prefix="gpu-dry-")
        os.chmod(self.out, 0o755)

    def tearDown(self):
        shutil.rmtree(self.out, ignore_errors=True)

    def run_suite(self, **env):
        e = dict(os.environ, GPU_SUITE_FORCE="1")
        e.pop("GPU_STEPS", None)
        e.update(env)
        return subprocess.run(["bash", RUN, BUILD, self.out], capture_output=True, text=True,
                              env=e, timeout=240)

    def test_dry_run_covers_every_step_and_resumes(self):
        names, _rows = steps()
        # 1: no budget left after build and env: every other step a budget skip
        # (11 s less the 10 kept for the end leaves at most 1 s, under the
        # shortest step's 2 s even when the run starts and checks within one
        # second; 12 let `status` run on a fast machine)
        r = self.run_suite(GPU_SUITE_BUDGET="11")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        s = summary(self.out)
        self.assertEqual(set(s), set(names), r.stdout)
        for name in names[2:]:
            self.assertEqual(s[name][0], "SKIP", name)
            self.assertTrue(s[name][1].startswith("budget: "), s[name])
        # 2: the next run takes up exactly those steps
        r = self.run_suite()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertNotIn("recorded by an earlier run", r.stderr)
        s = summary(self.out)
        self.assertEqual(set(s), set(names))
        for name in names:
            status, detail = s[name]
            self.assertIn(status, ("PASS", "SKIP"), "%s: %s %s" % (name, status, detail))
            if status == "SKIP":
                self.assertNotIn(name, SIM_PASS, "%s: %s" % (name, detail))
                self.assertRegex(detail, r"\S{3,}", "a skip names its reason")
                self.assertNotIn("budget:", detail)
        for name in SIM_PASS:
            self.assertEqual(s[name][0], "PASS", "%s: %s" % (name, s[name]))
        self.assertIn("dry run on gpusim", s["torch.limits"][1])
        self.assertRegex(s["agent.reclaim"][1], r'eviction_reason="evicted by gpufracd: .*taken '
                         r'back for fraction "owner"')
        self.assertIn("burst_past_limit=refused", s["agent.reclaim"][1])
        self.assertIn("watchdog_reason=terminated by gpufracd's watchdog", s["agent.watchdog"][1])
        self.assertIn("smi_total_mib=8192", s["nvml"][1])
        for key in ("pairs1_added_ns=", "pairs8_ratio=", "meminfo_added_ns="):
            self.assertIn(key, s["overhead.calls"][1])
        self.assertIn("startup_added_ms=", s["overhead.bench"][1])
        with open(os.path.join(self.out, "summary.txt")) as f:
            text = f.read()
        self.assertEqual(len(re.findall(r"^# run ", text, re.M)), 2, text)
        self.assertRegex(text, r"(?m)^# failed=0 passed=\d+ skipped=\d+ elapsed_s=\d+")
        # 3: complete: nothing runs again, the lines stay
        r = self.run_suite()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for name in names[2:]:
            self.assertIn("== %s: recorded by an earlier run" % name, r.stderr)
        again = summary(self.out)
        for name in names[2:]:  # build and env are looked at on every run
            self.assertEqual(again[name], s[name])
        # 4: a summary cut short after a step (a run killed there) resumes after it
        cut = names.index("agent.reclaim")
        with open(os.path.join(self.out, "summary.txt")) as f:
            kept = [ln for ln in f if not ln[:4] in ("PASS", "FAIL", "SKIP")
                    or ln.split()[1] not in names[cut:]]
        with open(os.path.join(self.out, "summary.txt"), "w") as f:
            f.writelines(kept)
        r = self.run_suite()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for name in names[2:cut]:
            self.assertIn("== %s: recorded by an earlier run" % name, r.stderr)
        for name in names[cut:]:
            self.assertNotIn("== %s: recorded" % name, r.stderr)
        self.assertEqual(set(summary(self.out)), set(names))
        # 5: GPU_STEPS runs a recorded step again, and only it
        r = self.run_suite(GPU_STEPS="status")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("== status (up to", r.stderr)
        self.assertNotIn("== nvml", r.stderr)


if __name__ == "__main__":
    cases.main()
