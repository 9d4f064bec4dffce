#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The tree stands alone: what its files cite is in the tree.

Invariants, each a test:
  - no tracked file (sources, docs, tests, scripts, packaging; this file
    excepted) points outside the repository for its reasoning: no section of
    an outside design or reference document ("DESIGN §", "REFERENCE §"), no
    path into ../shared, no issue number of a tracker ("issue 12",
    "issues 8 and 12", "#12 "). An upstream project's issue cited with the
    project's name ("containerd #5837", "KAI #2153") is a citation of that
    project, not a pointer into ours, and is allowed;
  - every relative link of README.md and docs/*.md names a file (or a
    folder) of the repository.
"""
import os
import re
import subprocess
import sys
import unittest

import cases

SRC = os.environ.get("GPUFRAC_SOURCE") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
SELF = os.path.relpath(os.path.abspath(__file__), SRC)

OUTSIDE = re.compile(r"DESIGN §|REFERENCE §|\.\./shared|shared/DESIGN|shared/REFERENCE")
# "issue 12", "Issues #8", "issues 8 and 12"
ISSUE_WORD = re.compile(r"\bissues?\s+#?\d+", re.I)
# "#12" standing alone in prose: not "&#12;", "$#", "a#1", a colour "#1f77b4" or "#000"".
ISSUE_HASH = re.compile(r"(?<![\w&#$/\\])#\d+(?=$|[\s),;.:\]])", re.M)
# Upstream projects whose trackers the tree may cite by name.
UPSTREAM = {"containerd", "kai", "kubernetes", "kube-scheduler", "runc", "crun", "hami",
            "hami-core", "prometheus", "nvidia", "glibc", "linux", "jansson", "libmicrohttpd",
            "cmocka", "curl", "libcurl", "golang", "debian", "helm"}
# The project named just before a reference, across "issues", "PR" and a list: "containerd
# issues #5837, #7982" names containerd for both numbers.
NAMED_BY = re.compile(r"([A-Za-z][\w.-]*)\s+(?:(?:issues?|PRs?|pull requests?)\s+)?"
                      r"(?:#?\d+\s*(?:,|and)\s*)*$", re.I)


def tracked_files():
    """Paths (relative to SRC) of the repository's files: git's list (new
    files not yet committed included, ignored ones not), or, in a copy
    without .git, every file but build output."""
    try:
        out = subprocess.run(["git", "-C", SRC, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], capture_output=True,
                             check=True).stdout.decode()
        files = [f for f in out.split("\0") if f]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for root, dirs, names in os.walk(SRC):
        dirs[:] = [d for d in dirs if d != ".git" and not d.startswith("build")]
        files += [os.path.relpath(os.path.join(root, n), SRC) for n in names]
    return files


def issue_references(text):
    """(line, excerpt) of each issue-number reference that names no upstream project."""
    found = []
    for rx in (ISSUE_WORD, ISSUE_HASH):
        for m in rx.finditer(text):
            start = text.rfind("\n", 0, m.start()) + 1
            before = text[start:m.start()]
            if rx is ISSUE_WORD:
                named = re.search(r"([A-Za-z][\w.-]*)\s+$", before)
            else:
                named = NAMED_BY.search(before)
            if named and named.group(1).lower() in UPSTREAM:
                continue
            end = text.find("\n", m.end())
            found.append((text.count("\n", 0, m.start()) + 1,
                          text[start:end if end >= 0 else len(text)].strip()[:120]))
    return found


def outside_references(text):
    return [(text.count("\n", 0, m.start()) + 1, m.group(0)) for m in OUTSIDE.finditer(text)]


def read_text(rel):
    try:
        with open(os.path.join(SRC, rel), encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
        return None  # binary, a submodule, or deleted but not yet committed


FENCED = re.compile(r"^([ \t]*)(```|~~~).*?^\1\2[ \t]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
INLINE_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+[^)]*)?\)")
REF_LINK = re.compile(r"^[ ]{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$", re.M)


def relative_links(text):
    """(line, target) of each relative link, code blocks and code spans left out."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # keeps line numbers
    text = CODE_SPAN.sub(blank, FENCED.sub(blank, text))
    out = []
    for rx in (INLINE_LINK, REF_LINK):
        for m in rx.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
                continue  # a URL, mailto:, or a heading of the same page
            out.append((text.count("\n", 0, m.start()) + 1, target))
    return out


def link_problem(doc, target, files, dirs):
    path = re.split(r"[#?]", target, 1)[0]
    rel = os.path.normpath(os.path.join(os.path.dirname(doc), path))
    if rel.startswith(".." + os.sep) or rel == ".." or os.path.isabs(path):
        return "points outside the repository"
    if rel not in files and rel not in dirs:
        return "names no file of the repository"
    return None


class DocReferences(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.files = tracked_files()

    def test_no_reference_outside_the_tree(self):
        problems = []
        for rel in self.files:
            if rel == SELF or rel.startswith(".git/"):
                continue
            text = read_text(rel)
            if text is None:
                continue
            problems += ["%s:%d: cites %r" % (rel, line, what)
                         for line, what in outside_references(text)]
            problems += ["%s:%d: cites an issue number: %s" % (rel, line, what)
                         for line, what in issue_references(text)]
        self.assertEqual(problems, [], "\n".join(
            ["files cite what is not in the tree (say it in the tree's own words instead):"]
            + problems))

    def test_relative_links_name_files_of_the_repository(self):
        files = set(self.files)
        dirs = {os.path.dirname(f) for f in files}
        dirs |= {d for f in list(dirs) for d in _parents(f)}
        docs = ["README.md"] + sorted(f for f in files if re.match(r"^docs/[^/]+\.md$", f))
        problems, seen = [], 0
        for doc in docs:
            text = read_text(doc)
            if text is None:
                continue
            for line, target in relative_links(text):
                seen += 1
                why = link_problem(doc, target, files, dirs)
                if why:
                    problems.append("%s:%d: link %s %s" % (doc, line, target, why))
        self.assertEqual(problems, [], "\n".join(problems))
        self.assertGreater(seen, 0, "no relative link found: the link parser is broken")

    def test_the_checks_catch_mistakes(self):
        for text in ("fixed in issue 12.", "see Issues #8 and 12", "as #12 says", "(#7)",
                     "#12 was", "merge of issues 8 and 12:"):
            self.assertTrue(issue_references(text), text)
        for text in ("#include <stdio.h>", "#!/bin/sh", "echo $#", "colour #1f77b4",
                     '"#000000"', "&#12;", "(containerd issues #5837, #7982)",
                     "over-pack a GPU (KAI #2153).", "issue tracking systems", "a#1"):
            self.assertFalse(issue_references(text), text)
        for text in ("DESIGN §3.1", "REFERENCE §2", "../shared/x", "/work/shared/DESIGN.md"):
            self.assertTrue(outside_references(text), text)
        links = relative_links("[a](docs/x.md) [b](https://x.org) [c](#top) `[d](no.md)`\n"
                               "```\n[e](no.md)\n```\n[f]: ../g.md\n![h](img.png \"t\")\n")
        self.assertEqual([t for _, t in links], ["docs/x.md", "img.png", "../g.md"])
        files = {"docs/x.md", "README.md"}
        self.assertIsNone(link_problem("README.md", "docs/x.md#part", files, {"docs"}))
        self.assertIsNone(link_problem("docs/y.md", "x.md", files, {"docs"}))
        self.assertIsNone(link_problem("docs/y.md", "../docs", files, {"docs"}))
        self.assertTrue(link_problem("docs/y.md", "nothing.md", files, {"docs"}))
        self.assertTrue(link_problem("docs/y.md", "../../shared/DESIGN.md", files, {"docs"}))


def _parents(d):
    while d:
        yield d
        d = os.path.dirname(d)


if __name__ == "__main__":
    cases.main()
