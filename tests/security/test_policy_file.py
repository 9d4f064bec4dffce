#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The policy file bounds every local user, so only a file root wrote is
believed: a --policy path that is a symbolic link (even to a good file), not a
regular file (a FIFO must not hang the agent), owned by another user, or
writable by others (or by a group other than root) stops gpufracd at start and
fails --check-config, each with the reason named; one made so while the agent
runs refuses users' runs (fail closed) until it is mended.
"""
import os
import subprocess
import sys
import tempfile
import unittest

import cases

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "agent"))
from test_agent import AGENT, NOBODY, UsersBase  # noqa: E402

GOOD = "[default]\nmax-fractions = 4\n"


def agent(*args):
    return subprocess.run([AGENT, *args], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))


class UntrustedPolicyFileTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpufrac-policy-")
        self.addCleanup(__import__("shutil").rmtree, self.tmp, True)
        self.state = os.path.join(self.tmp, "state")
        self.good = os.path.join(self.tmp, "good.conf")
        with open(self.good, "w") as f:
            f.write(GOOD)
        os.chmod(self.good, 0o644)

    def assert_refused(self, path, reason):
        check = agent("--check-config", "--policy", path, "--state-dir", self.state)
        self.assertEqual(check.returncode, 1, check.stdout)
        self.assertIn("gpufracd: policy %s %s" % (path, reason), check.stderr)
        start = agent("--policy", path, "--state-dir", self.state, "--metrics-listen", "off")
        self.assertEqual(start.returncode, 1, start.stderr)
        self.assertIn("gpufracd: policy %s %s" % (path, reason), start.stderr)
        self.assertFalse(os.path.exists(self.state), "the refused agent made its state")

    def test_the_good_file_is_taken(self):
        r = agent("--check-config", "--policy", self.good, "--state-dir", self.state)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("%s: 1 section(s)" % self.good, r.stdout)

    def test_a_symbolic_link_is_refused_even_to_a_good_file(self):
        link = os.path.join(self.tmp, "link.conf")
        os.symlink(self.good, link)
        self.assert_refused(link, "is a symbolic link")

    def test_a_dangling_link_is_not_taken_for_no_policy(self):
        link = os.path.join(self.tmp, "dangling.conf")
        os.symlink(os.path.join(self.tmp, "absent"), link)
        self.assert_refused(link, "is a symbolic link")

    def test_a_fifo_is_refused_without_blocking(self):
        fifo = os.path.join(self.tmp, "fifo.conf")
        os.mkfifo(fifo, 0o600)
        self.assert_refused(fifo, "is not a regular file")

    def test_a_directory_is_refused(self):
        d = os.path.join(self.tmp, "dir.conf")
        os.mkdir(d)
        self.assert_refused(d, "is not a regular file")

    def test_a_world_writable_file_is_refused(self):
        os.chmod(self.good, 0o666)
        self.assert_refused(self.good, "is writable by others (mode 0666)")

    def test_a_file_writable_by_a_group_other_than_root_is_refused(self):
        if os.getuid() != 0:
            self.skipTest("needs root to give the file to another group")
        os.chown(self.good, 0, NOBODY)
        os.chmod(self.good, 0o664)
        self.assert_refused(self.good, "is writable by group %d (mode 0664)" % NOBODY)
        os.chown(self.good, 0, 0)  # group root may write it: root's file still
        r = agent("--check-config", "--policy", self.good, "--state-dir", self.state)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_another_users_file_is_refused(self):
        if os.getuid() != 0:
            self.skipTest("needs root to give the file to another user")
        os.chown(self.good, NOBODY, NOBODY)
        os.chmod(self.good, 0o644)
        self.assert_refused(self.good, "is owned by uid %d" % NOBODY)


class PolicyMadeUntrustedWhileRunningTest(UsersBase):
    """The policy is read again at each run: made writable by others after
    the start, it refuses runs, with why, until it is mended."""

    def test_runs_are_refused_while_the_policy_is_writable_by_others(self):
        os.chmod(self.policy, 0o666)
        r = self.as_user("run", "--memory", "64Mi", "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("policy %s is writable by others" % self.policy, r.stderr)
        self.assertEqual(os.listdir(os.path.join(self.state, "fractions")), [])
        os.chmod(self.policy, 0o644)
        r = self.as_user("run", "--memory", "64Mi", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    cases.main()
