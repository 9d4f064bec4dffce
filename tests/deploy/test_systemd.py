#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The agent's systemd unit (deploy/systemd/gpufracd.service.in), configured as
`cmake --install` configures it: `systemd-analyze security --offline=yes` rates
it at most 4.0 ("OK"), `systemd-analyze verify` finds nothing wrong, and the
sandbox keeps what the agent needs (its capabilities, its system calls, the
site's flags from /etc/default/gpufracd).

Skips (77) where systemd-analyze is missing or too old for --offline.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import cases

SRC = os.environ.get("GPUFRAC_SOURCE") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("GPUFRAC_BUILD", "build")
UNIT_IN = os.path.join(SRC, "deploy", "systemd", "gpufracd.service.in")
MAX_EXPOSURE = 4.0
# what the agent does with each (docs/operations.md)
NEEDED_CAPS = {"CAP_KILL", "CAP_CHOWN", "CAP_FOWNER", "CAP_DAC_OVERRIDE", "CAP_SETUID",
               "CAP_SETGID"}


def configured(sbindir, docdir):
    with open(UNIT_IN) as f:
        text = f.read()
    return text.replace("@CMAKE_INSTALL_FULL_SBINDIR@", sbindir).replace(
        "@CMAKE_INSTALL_FULL_DOCDIR@", docdir)


def directives(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z]+)=(.*)$", line)
        if m:
            out.setdefault(m.group(1), []).append(m.group(2))
    return out


class Unit(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gf-unit-")
        self.addCleanup(shutil.rmtree, self.tmp)

    def write(self, text):
        path = os.path.join(self.tmp, "gpufracd.service")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_exposure_is_ok(self):
        path = self.write(configured("/usr/sbin", "/usr/share/doc/gpufrac"))
        p = subprocess.run(["systemd-analyze", "security", "--offline=yes", path],
                           capture_output=True, text=True, timeout=120)
        m = re.search(r"Overall exposure level for gpufracd\.service: ([0-9.]+)", p.stdout)
        self.assertIsNotNone(m, "no exposure level: %s %s" % (p.stdout[-2000:], p.stderr))
        self.assertLessEqual(float(m.group(1)), MAX_EXPOSURE, p.stdout)

    def test_verify_finds_nothing(self):
        exe = os.path.join(os.path.abspath(BUILD), "bin", "gpufracd")
        if not os.access(exe, os.X_OK):
            self.skipTest("%s is not built" % exe)
        text = configured(os.path.dirname(exe), SRC)  # README.md is there
        env = dict(os.environ)
        page = os.path.join(os.path.abspath(BUILD), "man", "gpufracd.8")
        if os.path.exists(page):  # verify runs man for Documentation=man:gpufracd(8)
            os.makedirs(os.path.join(self.tmp, "man", "man8"))
            shutil.copy(page, os.path.join(self.tmp, "man", "man8"))
            env["MANPATH"] = os.path.join(self.tmp, "man")
        else:
            text = text.replace("man:gpufracd(8) ", "")
        path = self.write(text)
        p = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True,
                           timeout=120, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr.strip(), "", p.stderr)

    def test_sandbox_keeps_what_the_agent_needs(self):
        d = directives(configured("/usr/sbin", "/usr/share/doc/gpufrac"))
        caps = set(" ".join(d["CapabilityBoundingSet"]).split())
        self.assertEqual(NEEDED_CAPS - caps, set(), "the agent loses capabilities it uses")
        self.assertNotIn("CAP_SYS_ADMIN", caps)
        # fchownat (a user's ledger) and MPS's setuid are in @system-service; a
        # deny list of @privileged would take them away
        for f in d["SystemCallFilter"]:
            self.assertFalse(f.startswith("~") and re.search(r"@(privileged|chown|setuid)", f), f)
        self.assertIn("EPERM", d["SystemCallErrorNumber"])
        self.assertNotIn("PrivateDevices", d, "/dev/nvidia* must stay")
        self.assertIn("AF_INET", d["RestrictAddressFamilies"][0].split())
        self.assertEqual(d["KillMode"], ["process"], "the workloads outlive the agent")

    def test_site_flags_come_from_environment_file(self):
        d = directives(configured("/usr/sbin", "/usr/share/doc/gpufrac"))
        self.assertEqual(d["EnvironmentFile"], ["-/etc/default/gpufracd"])
        self.assertEqual(len(d["ExecStart"]), 1)
        exe = d["ExecStart"][0].split()
        self.assertEqual(exe[0], "/usr/sbin/gpufracd")
        self.assertEqual(exe[-1], "$GPUFRACD_ARGS", "site flags come last, so they win")


if __name__ == "__main__":
    if not shutil.which("systemd-analyze"):
        print("SKIP: systemd-analyze is not installed (apt-get install systemd)")
        sys.exit(77)
    h = subprocess.run(["systemd-analyze", "--help"], capture_output=True, text=True)
    if "--offline" not in h.stdout:
        print("SKIP: this systemd-analyze has no --offline (systemd 250 or later needed)")
        sys.exit(77)
    cases.main()
