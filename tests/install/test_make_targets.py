#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What the README's two commands install and build, without installing anything:
`make demo` asks only for the build packages (scripts/deps.sh build) and builds only the
programs the demo runs (no test, no benchmark); `make check` asks for both groups; and
scripts/kube-build.sh removes the deb-src file it adds, whatever happens after.
apt-get, apt-cache, dpkg-query and sudo are stand-ins on PATH here.
"""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import cases

SRC = os.environ.get("GPUFRAC_SOURCE") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
TEST_ONLY = {"containerd", "prometheus", "lintian", "libcmocka-dev", "clang-14", "umoci",
             "python3-grpcio", "mmdebstrap", "clang-format-14", "runc"}


class MakeTargets(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpufrac-make-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.bin = os.path.join(self.tmp, "bin")
        os.mkdir(self.bin)
        self.log = os.path.join(self.tmp, "calls")
        # nothing is installed; apt-get records what it is asked for
        self.stub("dpkg-query", "exit 1")
        self.stub("apt-get", 'echo "apt-get $*" >> "%s"' % self.log)
        self.stub("apt-cache", "exit 0")
        self.stub("sudo", '"$@"')
        self.env = dict(os.environ, PATH=self.bin + ":" + os.environ["PATH"])

    def stub(self, name, body):
        path = os.path.join(self.bin, name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\n%s\n" % body)
        os.chmod(path, 0o755)

    def asked(self, *args):
        p = subprocess.run([os.path.join(SRC, "scripts", "deps.sh"), *args], env=self.env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(self.log) as f:
            lines = [ln.split() for ln in f if " install " in ln]
        os.remove(self.log)
        return set(lines[0][lines[0].index("-qq", 3) + 1:]) if lines else set()

    def test_build_group_has_no_test_package(self):
        build, every = self.asked("build"), self.asked("all")
        self.assertIn("cmake", build)
        self.assertIn("libmicrohttpd-dev", build)
        self.assertEqual(build & TEST_ONLY, set())
        self.assertTrue(TEST_ONLY <= every, TEST_ONLY - every)
        self.assertTrue(build <= every, build - every)
        self.assertEqual(self.asked(), every)
        bad = subprocess.run([os.path.join(SRC, "scripts", "deps.sh"), "tests"], env=self.env,
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(bad.returncode, 2)
        self.assertIn('not "tests"', bad.stderr)

    def make_n(self, target):
        p = subprocess.run(["make", "-n", "-C", SRC, target, "BUILD=build-x"], env=self.env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_demo_builds_only_what_the_demo_runs(self):
        out = self.make_n("demo")
        self.assertIn("scripts/deps.sh build", out)
        self.assertNotRegex(out, r"deps\.sh all")
        self.assertIn("-DGPUFRAC_TESTS=OFF", out)
        build = [ln for ln in out.splitlines() if "cmake --build" in ln]
        self.assertEqual(len(build), 1, out)
        targets = build[0].split("--target", 1)[1].split()
        self.assertEqual(sorted(targets), sorted(["gpufrac_cli", "gpufracd", "gpufrac",
                                                  "gpufrac-probe", "gpusim_cuda",
                                                  "gpusim_nvml"]))
        self.assertIn("gpufrac demo", out)

    def test_check_installs_every_group(self):
        self.assertRegex(self.make_n("check"), r"deps\.sh all")

    def test_kube_build_removes_the_deb_src_it_adds(self):
        apt = os.path.join(self.tmp, "apt")
        os.makedirs(os.path.join(apt, "sources.list.d"))
        with open(os.path.join(apt, "sources.list.d", "debian.sources"), "w") as f:
            f.write("Types: deb\nURIs: http://deb.debian.org/debian\n")
        self.stub("dpkg-query", "echo 'install ok installed'")
        # apt knows no source package: the script adds deb-src, then finds none and fails
        p = subprocess.run([os.path.join(SRC, "scripts", "kube-build.sh")], capture_output=True,
                           text=True, timeout=60,
                           env=dict(self.env, GPUFRAC_APT_DIR=apt,
                                    GPUFRAC_KUBE_CACHE=os.path.join(self.tmp, "cache")))
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("adding deb-src", p.stderr)
        self.assertIn("removing %s/sources.list.d/gpufrac-deb-src.sources" % apt, p.stderr)
        self.assertEqual(os.listdir(os.path.join(apt, "sources.list.d")), ["debian.sources"])
        with open(self.log) as f:
            self.assertEqual(len(re.findall(r"(?m)^apt-get .*update", f.read())), 2)


if __name__ == "__main__":
    cases.main()
