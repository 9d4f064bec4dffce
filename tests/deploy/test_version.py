#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One version everywhere: gpufracd, gpufrac, gpufrac-scheduler and
gpufrac-runtime print CMakeLists.txt's project version (gpufrac-runtime then
the wrapped runtime's own --version), and debian/changelog's first entry is
that version, so the package and the programs agree.
"""
import os
import re
import shutil
import subprocess
import unittest

import cases

SRC = os.environ.get("GPUFRAC_SOURCE") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(os.environ.get("GPUFRAC_BUILD", "build"))
ENV = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")


def project_version():
    with open(os.path.join(SRC, "CMakeLists.txt")) as f:
        return re.search(r"project\(gpufrac VERSION ([0-9.]+)", f.read()).group(1)


def version_of(name, **env):
    exe = os.path.join(BUILD, "bin", name)
    if not os.access(exe, os.X_OK):
        raise unittest.SkipTest("%s is not built" % exe)
    return subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60,
                          env=dict(ENV, **env))


class Version(unittest.TestCase):
    def test_debian_changelog_is_the_project_version(self):
        with open(os.path.join(SRC, "debian", "changelog")) as f:
            top = f.readline()
        m = re.match(r"^gpufrac \(([^)]+)\)", top)
        self.assertIsNotNone(m, top)
        upstream = m.group(1).split(":")[-1].rsplit("-", 1)[0]
        self.assertEqual(upstream, project_version(),
                         "debian/changelog and CMakeLists.txt's project() disagree")

    def test_each_program_prints_the_project_version(self):
        for name in ("gpufracd", "gpufrac", "gpufrac-scheduler"):
            r = version_of(name)
            self.assertEqual((r.returncode, r.stdout, r.stderr),
                             (0, "%s %s\n" % (name, project_version()), ""), name)

    def test_the_runtime_prints_its_own_then_the_wrapped_runtimes(self):
        runc = shutil.which("runc")
        if not runc:
            self.skipTest("runc is not installed")
        r = version_of("gpufrac-runtime", GPUFRAC_REAL_RUNTIME=runc,
                       GPUFRAC_RUNTIME_CONF="/nonexistent")
        self.assertEqual(r.returncode, 0, r.stderr)
        first, rest = r.stdout.split("\n", 1)
        self.assertEqual(first, "gpufrac-runtime %s" % project_version())
        self.assertIn("runc version", rest)

    def test_the_runtime_names_a_missing_wrapped_runtime(self):
        r = version_of("gpufrac-runtime", GPUFRAC_REAL_RUNTIME="/nonexistent/runc",
                       GPUFRAC_RUNTIME_CONF="/nonexistent")
        self.assertEqual(r.stdout, "gpufrac-runtime %s\n" % project_version())
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("/nonexistent/runc", r.stderr)


if __name__ == "__main__":
    cases.main()
