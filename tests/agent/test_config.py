#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""gpufracd's configuration as an operator meets it: --check-config prints what
is in force (the flags and the policy) and exits 0, or exits with the message
the agent itself stops with; a broken policy stops the agent at start instead
of refusing every user later; the start log names the version and the policy
in force; --version prints the project's version.
"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

import cases

sys.path.insert(0, os.path.dirname(__file__))
from test_agent import AGENT, GPUFRAC, AgentTestCase  # noqa: E402

SRC = os.environ.get("GPUFRAC_SOURCE") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))


def project_version():
    with open(os.path.join(SRC, "CMakeLists.txt")) as f:
        return re.search(r"project\(gpufrac VERSION ([0-9.]+)", f.read()).group(1)


def agent(*args, timeout=60):
    return subprocess.run([AGENT, *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))


class CheckConfigTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpufrac-config-")
        self.addCleanup(__import__("shutil").rmtree, self.tmp, True)
        self.state = os.path.join(self.tmp, "state")

    def policy(self, text):
        path = os.path.join(self.tmp, "policy.conf")
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
        return path

    def test_version(self):
        r = agent("--version")
        self.assertEqual((r.returncode, r.stdout), (0, "gpufracd %s\n" % project_version()))

    def test_defaults_are_shown_and_nothing_is_started(self):
        r = agent("--check-config", "--state-dir", self.state,
                  "--policy", os.path.join(self.tmp, "none.conf"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("gpufracd %s: the configuration is valid" % project_version(), r.stdout)
        self.assertRegex(r.stdout, r"(?m)^state-dir +%s$" % re.escape(self.state))
        self.assertRegex(r.stdout, r"(?m)^socket +%s/agent\.sock$" % re.escape(self.state))
        self.assertRegex(r.stdout, r"(?m)^metrics-listen +127\.0\.0\.1:9464$")
        self.assertRegex(r.stdout, r"(?m)^watchdog-period-ms +500$")
        self.assertRegex(r.stdout, r"(?m)^attach-timeout-s +60$")
        self.assertRegex(r.stdout, r"(?m)^policy +none: defaults \(no %s; at most 32 fractions"
                         % re.escape(os.path.join(self.tmp, "none.conf")))
        self.assertFalse(os.path.exists(self.state), "--check-config made the state directory")

    def test_flags_and_policy_in_force_are_shown(self):
        p = self.policy("[default]\nmax-fractions = 2\n[user nobody]\nmax-limit = 3Gi\n")
        r = agent("--check-config", "--state-dir", self.state, "--policy", p,
                  "--metrics-listen", "off", "--watchdog-period-ms", "250",
                  "--attach-timeout-s", "9", "--watchdog-tolerance", "1048576")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"(?m)^metrics-listen +off$")
        self.assertRegex(r.stdout, r"(?m)^watchdog-period-ms +250$")
        self.assertRegex(r.stdout, r"(?m)^attach-timeout-s +9$")
        self.assertRegex(r.stdout, r"(?m)^watchdog-tolerance +1048576$")
        self.assertRegex(r.stdout, r"(?m)^policy +%s: 2 section\(s\): \[default\] sets "
                         r"max-fractions; \[user nobody\] sets max-limit$" % re.escape(p))

    def test_a_broken_policy_fails_with_the_agents_message(self):
        p = self.policy("[default]\nmax-guaranteed = lots\n")
        check = agent("--check-config", "--state-dir", self.state, "--policy", p)
        self.assertEqual(check.returncode, 1)
        self.assertEqual(check.stdout, "")
        self.assertIn("gpufracd: policy %s:2" % p, check.stderr)
        self.assertIn("max-guaranteed", check.stderr)
        # the agent itself stops at start, with the same words, before it
        # makes or locks anything
        start = agent("--state-dir", self.state, "--policy", p, "--metrics-listen", "off")
        self.assertEqual(start.returncode, 1)
        self.assertEqual(start.stderr.splitlines()[-1], check.stderr.splitlines()[-1])
        self.assertFalse(os.path.exists(self.state))

    def test_a_bad_flag_fails_as_without_it(self):
        r = agent("--check-config", "--watchdog-period-ms", "3")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--watchdog-period-ms: \"3\" is not a number of milliseconds", r.stderr)
        self.assertEqual(r.stdout, "")


class StartLogTest(AgentTestCase):
    """A real start over gpusim: the log names the version and the policy."""

    def setUp(self):
        d = tempfile.mkdtemp(prefix="gpufrac-policy-")
        self.addCleanup(__import__("shutil").rmtree, d, True)
        self.policy = os.path.join(d, "policy.conf")  # never made
        self.extra_args = ["--policy", self.policy]
        super().setUp()

    def test_start_log_names_version_and_policy(self):
        with open(os.path.join(self.tmp, "agent.log")) as f:
            log = f.read()
        self.assertIn("gpufracd info: gpufracd %s starting; policy none: defaults (no %s;"
                      % (project_version(), self.policy), log)
        self.assertLess(log.index(" starting; "), log.index("ready:"))


class StartLogPolicyTest(AgentTestCase):
    def setUp(self):
        d = tempfile.mkdtemp(prefix="gpufrac-policy-")
        self.addCleanup(__import__("shutil").rmtree, d, True)
        self.policy = os.path.join(d, "policy.conf")
        with open(self.policy, "w") as f:
            f.write("[group students]\nmax-fractions = 1\n")
        os.chmod(self.policy, 0o644)
        self.extra_args = ["--policy", self.policy]
        super().setUp()

    def test_start_log_names_the_policy_file(self):
        with open(os.path.join(self.tmp, "agent.log")) as f:
            log = f.read()
        self.assertIn("starting; policy %s: 1 section(s): [group students] sets max-fractions"
                      % self.policy, log)


class ExamplePolicyTest(unittest.TestCase):
    """deploy/policy.conf.example (installed under the docs): as shipped it sets
    nothing; its rules, uncommented, are a policy the agent accepts."""
    setUp = CheckConfigTest.setUp
    policy = CheckConfigTest.policy

    def test_shipped_sets_nothing_and_its_rules_parse(self):
        with open(os.path.join(SRC, "deploy", "policy.conf.example")) as f:
            text = f.read()
        r = agent("--check-config", "--state-dir", self.state, "--policy", self.policy(text))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"(?m)^policy +\S+: 0 section\(s\)")
        rules = re.sub(r"(?m)^# (\[|[a-z-]+ = )", r"\1", text)
        r = agent("--check-config", "--state-dir", self.state, "--policy", self.policy(rules))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("3 section(s): [default] sets max-guaranteed max-limit modes "
                      "max-compute max-fractions; [group students] sets max-fractions; "
                      "[user alice] sets max-guaranteed", r.stdout)


class LogLevelFlagTest(unittest.TestCase):
    def test_a_bad_level_is_refused_naming_what_is_accepted(self):
        for bad in ("verbose", "off", ""):
            r = agent("--check-config", "--log-level", bad)
            self.assertEqual(r.returncode, 2, bad)
            self.assertIn("--log-level: \"%s\" is not one of error, warn, info, debug" % bad,
                          r.stderr)

    def test_check_config_shows_the_level(self):
        r = agent("--check-config", "--policy", "/nonexistent/policy.conf")
        self.assertRegex(r.stdout, r"(?m)^log-level +info$")
        r = agent("--check-config", "--policy", "/nonexistent/policy.conf", "--log-level", "warn")
        self.assertRegex(r.stdout, r"(?m)^log-level +warn$")


class LogLevelWarnTest(AgentTestCase):
    """--log-level warn: no info line (not even "starting" or "ready:") is written."""
    extra_args = ["--log-level", "warn"]

    def ready_lines(self):
        # no "ready:" line at this level: the socket answering stands for it
        return self.starts if os.path.exists(os.path.join(self.state, "agent.sock")) else 0

    def test_info_lines_are_dropped(self):
        r = subprocess.run([GPUFRAC, "status"], env=self.env, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.stop_agent()
        with open(os.path.join(self.tmp, "agent.log")) as f:
            log = f.read()
        self.assertNotIn(" info: ", log)
        self.assertNotIn("starting; policy", log)


class LogLevelDebugTest(AgentTestCase):
    extra_args = ["--log-level", "debug"]

    def test_info_lines_are_kept(self):
        with open(os.path.join(self.tmp, "agent.log")) as f:
            self.assertIn("gpufracd info: gpufracd %s starting" % project_version(), f.read())


if __name__ == "__main__":
    cases.main()
