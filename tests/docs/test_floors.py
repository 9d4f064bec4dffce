# SPDX-License-Identifier: Apache-2.0
"""The house as docs/architecture.md draws it, checked against the code's own
includes and calls: the agent's floors (listed in agent/CMakeLists.txt, bottom
first) point only downward, or at a file listed earlier on their own floor;
nothing below main.c calls into main.c; the agent includes no scheduler
header; the runtime compiles and includes nothing of the CLI."""
import os
import re
import unittest

import cases

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def agent_floors():
    """[[file stem, ...], ...] from the '# floor N:' comments of agent/CMakeLists.txt."""
    text = read("agent", "CMakeLists.txt")
    floors = []
    for line in text[text.index("set(GF_AGENT_SOURCES"):].splitlines()[1:]:
        line = line.strip()
        if line.startswith("# floor"):
            floors.append([])
        elif line and not line.startswith("#"):
            floors[-1].extend(f.rstrip(")")[:-2] for f in line.split()
                              if f.rstrip(")").endswith(".c"))
            if line.endswith(")"):
                break
    return floors


def strip_comments(src):
    return re.sub(r"/\*.*?\*/", "", src, flags=re.S)


class AgentFloors(unittest.TestCase):
    def setUp(self):
        self.floors = agent_floors()
        self.rank = {}
        for i, floor in enumerate(self.floors):
            for j, stem in enumerate(floor):
                self.rank[stem] = (i, j)
        self.rank["agent"] = (0, len(self.floors[0]))  # the shared types: atop floor 0
        self.rank["main"] = (len(self.floors), 0)

    def test_every_agent_source_is_on_a_floor(self):
        stems = {f[:-2] for f in os.listdir(os.path.join(ROOT, "agent")) if f.endswith(".c")}
        self.assertEqual(stems - set(self.rank), set(), "agent sources on no floor")
        self.assertGreaterEqual(len(self.floors), 5)

    def test_includes_point_down(self):
        wrong = []
        for name in os.listdir(os.path.join(ROOT, "agent")):
            stem, ext = os.path.splitext(name)
            if ext not in (".c", ".h") or stem not in self.rank:
                continue
            for inc in re.findall(r'^#include "(\w+)\.h"', read("agent", name), re.M):
                if inc in self.rank and inc != stem and self.rank[inc] > self.rank[stem]:
                    wrong.append(f"agent/{name} includes {inc}.h")
        self.assertEqual(wrong, [], "an include that points up a floor")

    def test_calls_point_down(self):
        defined = {}
        sources = {}
        for name in os.listdir(os.path.join(ROOT, "agent")):
            if name.endswith(".c"):
                sources[name[:-2]] = strip_comments(read("agent", name))
        for stem, src in sources.items():
            for m in re.finditer(r"^(?!static)[a-z_][\w \*]*?\b(gf_\w+)\(", src, re.M):
                defined.setdefault(m.group(1), stem)
        wrong = []
        for stem, src in sources.items():
            for fn, home in defined.items():
                if home != stem and self.rank[home] > self.rank[stem] and \
                        re.search(r"\b" + fn + r"\b", src):
                    wrong.append(f"agent/{stem}.c calls {fn} of agent/{home}.c")
        self.assertEqual(wrong, [], "a call that points up a floor")

    def test_main_defines_nothing_others_call(self):
        src = strip_comments(read("agent", "main.c"))
        exported = re.findall(r"^(?!static)[a-z_][\w \*]*?\b(\w+)\(", src, re.M)
        self.assertEqual([f for f in exported if f != "main"], [])

    def test_agent_includes_no_scheduler_header(self):
        sched = {f for f in os.listdir(os.path.join(ROOT, "scheduler")) if f.endswith(".h")}
        wrong = []
        for name in os.listdir(os.path.join(ROOT, "agent")):
            if name.endswith((".c", ".h")):
                for inc in re.findall(r'^#include "([\w/]+\.h)"', read("agent", name), re.M):
                    if os.path.basename(inc) in sched and not os.path.exists(
                            os.path.join(ROOT, "agent", inc)) and not os.path.exists(
                            os.path.join(ROOT, "core", inc)):
                        wrong.append(f"agent/{name} includes {inc}")
        self.assertEqual(wrong, [])


class Sideways(unittest.TestCase):
    def test_runtime_compiles_no_cli_source(self):
        text = read("runtime", "CMakeLists.txt")
        self.assertNotRegex(text, r"cli/\w+\.c")
        self.assertNotRegex(text, r"\{CMAKE_SOURCE_DIR\}/cli\b")

    def test_runtime_includes_no_cli_header(self):
        cli = {f for f in os.listdir(os.path.join(ROOT, "cli")) if f.endswith(".h")}
        own = {f for f in os.listdir(os.path.join(ROOT, "runtime"))}
        wrong = []
        for name in os.listdir(os.path.join(ROOT, "runtime")):
            if name.endswith((".c", ".h")):
                for inc in re.findall(r'^#include "([\w/]+\.h)"', read("runtime", name), re.M):
                    if inc in cli and inc not in own:
                        wrong.append(f"runtime/{name} includes {inc}")
        self.assertEqual(wrong, [])


if __name__ == "__main__":
    cases.main()
