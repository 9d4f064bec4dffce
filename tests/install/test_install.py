#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`cmake --install` into a temporary prefix (and with DESTDIR, so the tree is
used from where it was staged, as a relocated install): the installed gpufrac
finds its shim, probe and simulated GPU, `gpufrac demo` succeeds, and a
`gpufrac run` from there bounds the installed probe; the systemd unit names the
installed gpufracd and its documentation exists; the man pages are installed;
the bash completion is installed and, sourced by bash, completes a command and
its flags; the example policy is installed as documentation only.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import cases

BUILD = os.environ.get("GPUFRAC_BUILD", "build")


def install(prefix, destdir=None):
    env = dict(os.environ)
    env.pop("DESTDIR", None)
    if destdir:
        env["DESTDIR"] = destdir
    p = subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix],
                       capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:
        raise AssertionError("cmake --install failed:\n" + p.stdout + p.stderr)
    return os.path.join(destdir, prefix.lstrip("/")) if destdir else prefix


def find_one(root, name):
    hits = [os.path.join(d, name) for d, _, files in os.walk(root) if name in files]
    if len(hits) != 1:
        raise AssertionError("expected one %s under %s, found %s" % (name, root, hits))
    return hits[0]


class Installed(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpufrac-install-")
        cls.prefix = install(os.path.join(cls.tmp, "prefix"))
        cls.staged = install("/opt/gpufrac-test", destdir=os.path.join(cls.tmp, "dest"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GPUFRAC_", "GPUSIM_", "CUDA_", "NVIDIA_"))
               and k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
        env["GPUFRAC_STATE_DIR"] = tempfile.mkdtemp(dir=self.tmp)
        env["TMPDIR"] = tempfile.mkdtemp(dir=self.tmp)
        return env

    def sim_env(self, root):
        env = self.env()
        env.update(GPUSIM_DEVICES="16Gi", GPUSIM_STATE=os.path.join(env["TMPDIR"], "sim"),
                   LD_LIBRARY_PATH=os.path.dirname(find_one(root, "libcuda.so.1")))
        return env

    def demo(self, root):
        p = subprocess.run([os.path.join(root, "bin", "gpufrac"), "demo", "--simulated"],
                           capture_output=True, text=True, env=self.env(), timeout=300)
        self.assertEqual(p.returncode, 0, "gpufrac demo from %s:\n%s%s" % (root, p.stdout, p.stderr))
        self.assertIn("PASS", p.stdout)

    def test_demo_from_the_prefix(self):
        self.demo(self.prefix)

    def test_demo_from_a_relocated_tree(self):
        self.demo(self.staged)

    def test_run_bounds_the_installed_probe(self):
        for root in (self.prefix, self.staged):
            probe = find_one(root, "gpufrac-probe")
            env = self.sim_env(root)
            p = subprocess.run([os.path.join(root, "bin", "gpufrac"), "run", "--memory", "1Gi",
                                "--", probe, "info"],
                               capture_output=True, text=True, env=env, timeout=120)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("cuda_total=%d\n" % (1 << 30), p.stdout)
            # and without the fraction, the probe sees the whole simulated GPU
            p = subprocess.run([probe, "info"], capture_output=True, text=True, env=env,
                               timeout=120)
            self.assertIn("cuda_total=%d\n" % (16 << 30), p.stdout)

    def test_missing_shim_is_named(self):
        root = os.path.join(self.tmp, "broken")
        shutil.copytree(self.prefix, root, symlinks=True)
        os.unlink(find_one(root, "libgpufrac.so"))
        p = subprocess.run([os.path.join(root, "bin", "gpufrac"), "run", "--memory", "1Gi",
                            "--", "true"], capture_output=True, text=True, env=self.sim_env(root),
                           timeout=120)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("cannot find libgpufrac.so", p.stderr)

    def test_unit_points_at_the_installed_agent(self):
        for root, prefix in ((self.prefix, self.prefix), (self.staged, "/opt/gpufrac-test")):
            with open(find_one(root, "gpufracd.service")) as f:
                unit = f.read()
            exe = re.search(r"^ExecStart=(\S+)", unit, re.M).group(1)
            self.assertEqual(exe, os.path.join(prefix, "sbin", "gpufracd"))
            self.assertTrue(os.access(root + exe[len(prefix):], os.X_OK), exe)
            for doc in re.findall(r"file://(\S+)", unit):
                self.assertTrue(doc.startswith(prefix + "/"), doc)
                self.assertTrue(os.path.isfile(root + doc[len(prefix):]), doc)

    def test_man_pages_installed(self):
        if not os.path.isdir(os.path.join(BUILD, "man")) or not os.path.exists(
                os.path.join(BUILD, "man", "gpufrac.1")):
            self.skipTest("man pages not built (no scdoc)")
        for page in ("man1/gpufrac.1", "man8/gpufracd.8", "man8/gpufrac-runtime.8",
                     "man8/gpufrac-scheduler.8"):
            self.assertTrue(os.path.isfile(os.path.join(self.prefix, "share", "man", page)), page)

    def test_bash_completion_completes_commands_and_flags(self):
        if not shutil.which("bash"):
            self.skipTest("no bash")
        comp = os.path.join(self.prefix, "share", "bash-completion", "completions", "gpufrac")
        self.assertTrue(os.path.isfile(comp), comp)
        script = (". \"$COMP\"\n"
                  "complete -p gpufrac\n"
                  "c() { COMP_WORDS=(\"$@\"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _gpufrac;"
                  " echo \"${COMPREPLY[*]}\"; }\n"
                  "c \"$GF\" st\nc \"$GF\" run --me\nc \"$GF\" run --mode s\n"
                  "c \"$GF\" status --j\n")
        p = subprocess.run(["bash", "--norc", "-c", script], capture_output=True, text=True,
                           timeout=60, env=dict(self.env(), COMP=comp,
                                                GF=os.path.join(self.prefix, "bin", "gpufrac")))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.splitlines(), ["complete -F _gpufrac gpufrac", "status stop",
                                                 "--memory", "sm-sharing", "--json"])

    def test_example_policy_is_documentation(self):
        ex = os.path.join(self.prefix, "share", "doc", "gpufrac", "examples", "policy.conf")
        with open(ex) as f:
            rules = [ln for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
        self.assertEqual(rules, [], "the example policy sets a rule")
        self.assertFalse(os.path.exists(os.path.join(self.prefix, "etc", "gpufrac")))


if __name__ == "__main__":
    if not shutil.which("cmake"):
        print("SKIP: cmake is not installed")
        sys.exit(77)
    cases.main()
