#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The man pages: man --warnings finds nothing to say about them, and every
flag a program's --help shows is in its page (so they stay in step).

gpufrac-runtime's --help is the real runtime's (it passes every verb through);
its page is checked for every setting the runtime reads instead
(runtime/settings.c: environment variable and runtime.conf key).
Exits 77 (skip) when the pages were not built (no scdoc) or man is missing.
"""
import os
import re
import shutil
import subprocess
import sys
import unittest

import cases

BUILD = os.environ.get("GPUFRAC_BUILD", "build")
SRC = os.environ.get("GPUFRAC_SOURCE") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
MAN = os.path.join(BUILD, "man")
BIN = os.path.join(BUILD, "bin")
PAGES = ["gpufrac.1", "gpufracd.8", "gpufrac-runtime.8", "gpufrac-scheduler.8"]
FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def page_text(page):
    """The page's words with roff font escapes and \\- taken out."""
    with open(os.path.join(MAN, page)) as f:
        src = f.read()
    return re.sub(r"\\f[BIRP]", "", src).replace("\\-", "-").replace("\\&", "")


def help_text(*argv):
    p = subprocess.run(list(argv) + ["--help"], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError("%s --help exited %d: %s" % (" ".join(argv), p.returncode, p.stderr))
    return p.stdout + p.stderr


def flags(text):
    return sorted({m.group(1).rstrip("-") for m in FLAG.finditer(text)} - {"-"})


class ManPages(unittest.TestCase):
    def test_man_warns_about_nothing(self):
        env = dict(os.environ, LC_ALL="C.UTF-8", MANROFFSEQ="", MANWIDTH="80")
        for page in PAGES:
            p = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z",
                                os.path.join(MAN, page)],
                               capture_output=True, text=True, env=env, timeout=60)
            self.assertEqual(p.returncode, 0, "%s: man failed: %s" % (page, p.stderr))
            self.assertEqual(p.stderr, "", "%s: man --warnings: %s" % (page, p.stderr))

    def check_flags(self, page, *argv):
        text = page_text(page)
        missing = [f for f in flags(help_text(*argv)) if not re.search(
            r"(?<![\w-])%s(?![\w-])" % re.escape(f), text)]
        self.assertEqual(missing, [], "%s --help shows flags that man/%s.scd lacks"
                         % (" ".join(os.path.basename(a) for a in argv), page))

    def test_gpufrac_page_has_every_flag(self):
        gpufrac = os.path.join(BIN, "gpufrac")
        self.check_flags("gpufrac.1", gpufrac)
        for cmd in ("run", "status", "top", "demo", "install"):
            self.check_flags("gpufrac.1", gpufrac, cmd)

    def test_gpufracd_page_has_every_flag(self):
        self.check_flags("gpufracd.8", os.path.join(BIN, "gpufracd"))

    def test_scheduler_page_has_every_flag(self):
        self.check_flags("gpufrac-scheduler.8", os.path.join(BIN, "gpufrac-scheduler"))

    def test_runtime_page_has_every_setting(self):
        with open(os.path.join(SRC, "runtime", "settings.c")) as f:
            src = f.read()
        settings = re.findall(r'pick\("(GPUFRAC_\w+)", "(\w+)"', src)
        self.assertGreater(len(settings), 0, "no pick(...) calls found in runtime/settings.c")
        settings += [(e, None) for e in re.findall(r'getenv\("(GPUFRAC_\w+)"\)', src)]
        text = page_text("gpufrac-runtime.8")
        for env, key in settings:
            self.assertIn(env, text, "gpufrac-runtime.8 does not describe %s" % env)
            if key:
                self.assertIn(key + "=", text, "gpufrac-runtime.8 does not describe %s=" % key)

    def test_a_missing_flag_is_caught(self):
        # the check itself: a flag the page does not have is reported
        self.assertNotRegex(page_text("gpufracd.8"), r"(?<![\w-])--no-such-flag(?![\w-])")
        self.assertIn("--no-such-flag", flags("  --no-such-flag N   what"))


if __name__ == "__main__":
    if not all(os.path.exists(os.path.join(MAN, p)) for p in PAGES):
        print("SKIP: man pages not built in %s (scdoc missing: apt-get install scdoc)" % MAN)
        sys.exit(77)
    if not shutil.which("man"):
        print("SKIP: man is not installed (apt-get install man-db)")
        sys.exit(77)
    cases.main()
