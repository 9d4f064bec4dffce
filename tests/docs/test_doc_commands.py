#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs the commands of README.md and docs/*.md, so a wrong command fails CI.

The convention (README, "Commands in these docs"):
  ```sh       commands that work as written: each block runs here with `sh -e`,
              from a scratch copy of the source tree whose build/ is this
              build, with a scratch HOME, state directory and TMPDIR, gpusim
              as the GPU, and kubectl replaced by a stand-in that checks what
              `kubectl apply -f` is given (there is no cluster here). It must
              exit 0.
  ```console  commands shown, not run (they need root, a GPU, a cluster,
              systemd, or run until stopped). Every flag they give to
              gpufrac's own programs (gpufrac and its subcommands, gpufracd,
              gpufrac-scheduler, the benchmarks, deploy/render.py) must be one
              that program's --help shows, every `make` target must exist, and
              so must every file of the tree they name (deploy/..., docs/...).
  anything else (text, yaml, toml, json): not commands.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

import cases

SRC = os.environ.get("GPUFRAC_SOURCE") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(os.environ.get("GPUFRAC_BUILD", os.path.join(SRC, "build")))
HERE = os.path.dirname(os.path.abspath(__file__))
FENCE = re.compile(r"^([ \t]*)```([\w-]*)[^\n]*\n(.*?)^\1```[ \t]*$", re.S | re.M)
OWN = {"gpufrac", "gpufracd", "gpufrac-scheduler", "gpufrac-bench", "gpufracd-bench",
       "gpufrac-sched-bench"}


def doc_files():
    docs = os.path.join(SRC, "docs")
    return [os.path.join(SRC, "README.md")] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))


def blocks(path, lang):
    """(line, text) of each ```lang block, its indentation removed."""
    with open(path) as f:
        text = f.read()
    out = []
    for m in FENCE.finditer(text):
        if m.group(2) == lang:
            ind = len(m.group(1))
            body = "".join(ln[ind:] if ln[:ind].strip() == "" else ln
                           for ln in m.group(3).splitlines(True))
            out.append((text[:m.start()].count("\n") + 1, body))
    return out


def commands(body):
    """Simple commands of a block: continuations joined, comments dropped,
    split at | && || ; — each as a word list."""
    out = []
    for line in body.replace("\\\n", " ").splitlines():
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            words = line.split()
        cur = []
        for w in words + [";"]:
            if w in ("|", "&&", "||", ";"):
                if cur:
                    out.append(cur)
                cur = []
            else:
                cur.append(w)
    return out


_help_cache = {}


def help_of(argv):
    key = tuple(argv)
    if key not in _help_cache:
        p = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=60)
        _help_cache[key] = p.stdout + p.stderr
    return _help_cache[key]


def flag_problems(words):
    """What is wrong with one shown command: unknown flags, missing targets."""
    while words and (words[0] in ("sudo", "env") or re.match(r"^\w+=", words[0])):
        words = words[1:]
    if not words:
        return []
    prog = words[0]
    missing = ["%s: %s does not exist in the source tree" % (" ".join(words), w) for w in words
               if re.match(r"^(deploy|docs|scripts|tests|man|debian)/[\w./-]+$", w)
               and not os.path.exists(os.path.join(SRC, w))]
    if missing:
        return missing
    if prog == "make":
        with open(os.path.join(SRC, "Makefile")) as f:
            mk = f.read()
        return ["make %s: no such target in the Makefile" % t for t in words[1:]
                if "=" not in t and not t.startswith("-")
                and not re.search(r"^%s\s*:" % re.escape(t), mk, re.M)]
    if prog in ("python3", "python") and len(words) > 1 and words[1].endswith("render.py"):
        words = words[1:]
    name = os.path.basename(words[0])
    if name == "render.py":
        argv = [sys.executable, os.path.join(SRC, "deploy", "render.py")]
    elif name in OWN:
        argv = [os.path.join(BUILD, "bin", name)]
        if name == "gpufrac" and len(words) > 1 and not words[1].startswith("-"):
            argv.append(words[1])
    else:
        return []
    known = help_of(argv)
    problems = []
    for w in words[1:]:
        if w == "--":
            break  # the rest is the workload's command line
        m = re.match(r"^(--?[A-Za-z][\w-]*)", w)
        if m and not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(m.group(1)), known):
            problems.append("%s: %s is not in `%s --help`" % (" ".join(words), m.group(1),
                                                            " ".join(os.path.basename(a)
                                                                     for a in argv)))
    return problems


def scratch_tree(tmp):
    """A copy of the source tree (tracked and untracked, not ignored files) with
    build/ pointing at this build."""
    src = os.path.join(tmp, "src")
    files = subprocess.run(["git", "-C", SRC, "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], capture_output=True, check=True).stdout
    for rel in files.decode().split("\0"):
        p = os.path.join(SRC, rel)
        if rel and os.path.isfile(p):
            dst = os.path.join(src, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(p, dst)
    os.symlink(BUILD, os.path.join(src, "build"))
    return src


def run_block(body, tmp, src):
    stand = os.path.join(tmp, "standins")
    os.makedirs(stand, exist_ok=True)
    kubectl = os.path.join(stand, "kubectl")
    if not os.path.exists(kubectl):
        os.symlink(os.path.join(HERE, "kubectl-standin"), kubectl)
    home = tempfile.mkdtemp(dir=tmp)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUFRAC_", "GPUSIM_", "CUDA_", "NVIDIA_", "KUBE"))
           and k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    env.update(HOME=home, TMPDIR=home, GPUFRAC_STATE_DIR=os.path.join(home, "state"),
               PATH=":".join([stand, os.path.join(BUILD, "bin"), "/usr/sbin", "/usr/bin",
                              "/sbin", "/bin"]),
               GPUSIM_DEVICES="16Gi", GPUSIM_STATE=os.path.join(home, "gpusim"),
               LD_LIBRARY_PATH=os.path.join(BUILD, "lib", "gpusim"))
    return subprocess.run(["sh", "-e", "-c", body], cwd=src, env=env, capture_output=True,
                          text=True, timeout=300)


class DocCommands(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpufrac-doccmds-")
        cls.src = scratch_tree(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_sh_blocks_run(self):
        ran = 0
        for path in doc_files():
            for line, body in blocks(path, "sh"):
                with self.subTest(block="%s:%d" % (os.path.relpath(path, SRC), line)):
                    p = run_block(body, self.tmp, self.src)
                    self.assertEqual(p.returncode, 0, "%s:%d failed (exit %d):\n%s\n--- output:\n%s%s"
                                     % (os.path.relpath(path, SRC), line, p.returncode, body,
                                        p.stdout[-3000:], p.stderr[-3000:]))
                    ran += 1
        self.assertGreater(ran, 0, "no ```sh block found")

    def test_console_blocks_use_real_flags(self):
        problems = []
        for path in doc_files():
            for line, body in blocks(path, "console"):
                for words in commands(body):
                    problems += ["%s:%d: %s" % (os.path.relpath(path, SRC), line, p)
                                 for p in flag_problems(words)]
        self.assertEqual(problems, [])

    def test_the_checks_catch_mistakes(self):
        # a failing command fails, a made-up flag or make target is reported,
        # and the kubectl stand-in refuses empty input (the README's old bug)
        self.assertNotEqual(run_block("true\nfalse\n", self.tmp, self.src).returncode, 0)
        self.assertTrue(flag_problems(["gpufrac", "run", "--memroy", "1Gi", "--", "x"]))
        self.assertFalse(flag_problems(["gpufrac", "run", "--memory", "1Gi", "--", "x", "--y"]))
        self.assertTrue(flag_problems(["python3", "deploy/render.py", "--bogus"]))
        self.assertTrue(flag_problems(["make", "no-such-target"]))
        self.assertTrue(flag_problems(["sudo", "install", "deploy/systemd/no-such.service", "/x"]))
        self.assertNotEqual(run_block("true | kubectl apply -f -\n", self.tmp,
                                      self.src).returncode, 0)


if __name__ == "__main__":
    try:
        import yaml  # noqa: F401  (the kubectl stand-in reads YAML)
    except ImportError:
        sys.exit("test_doc_commands: PyYAML is missing: apt-get install python3-yaml")
    if not os.path.exists(os.path.join(BUILD, "bin", "gpufrac")):
        print("SKIP: %s/bin/gpufrac is not built" % BUILD)
        sys.exit(77)
    cases.main()
