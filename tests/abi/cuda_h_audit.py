# SPDX-License-Identifier: Apache-2.0
"""The cuda.h audit: every allocation-like entry point the toolkit's cuda.h
declares (legacy names, _ptsz/_ptds variants and versioned names included)
is either hooked by the shim (shim/hooks.def) or listed, with the reason, in
the table of docs/footprint.md. Exits 77 (skipped) when no cuda.h exists.

    cuda_h_audit.py [--list] [CUDA_H]
"""
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("GPUFRAC_SOURCE") or os.path.join(HERE, "..", "..")
HOOKS = os.path.join(ROOT, "shim", "hooks.def")
DOC = os.path.join(ROOT, "docs", "footprint.md")

# Names that make, reserve, import or map something that may take device
# memory, or change how much a context holds.
ALLOC_LIKE = re.compile(
    r"Alloc|Create|Load|Import|OpenMemHandle|Retain|Reserve|Register|SetLimit|Upload|"
    r"Instantiate|^cuMemMap|SetMemPool|MulticastBind|GraphicsMap|SetGraphMemAttribute|"
    r"MemPoolSetAttribute|GetMappedBuffer|GetMappedMipmappedArray|PrefetchAsync|"
    r"ExecUpdate|AddMemAllocNode|AddNode")
NOT_ALLOC = re.compile(r"Get(?!MappedBuffer|MappedMipmappedArray)|Destroy|Release|Free|Unload|"
                       r"Unregister|Unmap|Query|Export|Cancel")


def find_cuda_h(argv):
    cands = [a for a in argv if not a.startswith("--")]
    inc = os.environ.get("GPUFRAC_CUDA_INCLUDE")
    if inc:
        cands.append(os.path.join(inc, "cuda.h"))
    cands += ["/usr/local/cuda/include/cuda.h"] + sorted(
        glob.glob("/usr/local/cuda-*/include/cuda.h"), reverse=True)
    for c in cands:
        if os.path.isfile(c):
            return c
    return None


def exports(text):
    """Every entry point name cuda.h makes a program link against."""
    names = set(re.findall(r"CUresult\s+CUDAAPI\s+(\w+)\s*\(", text))
    for a, b in re.findall(r"#define\s+(cu\w+)\s+(.+)", text):
        b = b.strip()
        m = re.match(r"__CUDA_API_PT(SZ|DS)\((\w+)\)", b)
        if m:
            names.add(m.group(2))
            names.add(m.group(2) + "_pt" + m.group(1).lower())
        elif re.fullmatch(r"cu\w+", b):
            names.add(b)
    return names


def hooked():
    with open(HOOKS) as f:
        return set(re.findall(r"^CU_HOOK\((\w+),", f.read(), re.M))


def listed():
    """{name: treatment} from the table rows of docs/footprint.md."""
    out = {}
    with open(DOC) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not line.startswith("|") or len(cells) < 3 or not cells[2]:
                continue
            for name in re.findall(r"`(cu\w+)`", cells[0]):
                out[name] = cells[1]
    return out


def main(argv):
    path = find_cuda_h(argv)
    if not path:
        print("SKIP: no CUDA toolkit cuda.h found (GPUFRAC_CUDA_INCLUDE, /usr/local/cuda*); "
              "the entry-point audit needs one")
        return 77
    with open(path, errors="replace") as f:
        names = exports(f.read())
    alloc = sorted(n for n in names if ALLOC_LIKE.search(n) and not NOT_ALLOC.search(n))
    if "--list" in argv:
        print("\n".join(alloc))
        return 0
    hooks, table = hooked(), listed()
    bad = []
    for n in alloc:
        if n not in hooks and n not in table:
            bad.append("%s: allocation-like, neither hooked (shim/hooks.def) nor listed in "
                       "docs/footprint.md" % n)
    for n, how in sorted(table.items()):
        if how.startswith("hooked") and n not in hooks:
            bad.append("%s: docs/footprint.md says hooked, shim/hooks.def has no hook" % n)
        if n in hooks and not how.startswith("hooked"):
            bad.append("%s: hooked, but docs/footprint.md says '%s'" % (n, how))
    for n in sorted(hooks):
        if n not in table:
            bad.append("%s: hooked but missing from the table in docs/footprint.md" % n)
    print("cuda.h: %s; %d entry points, %d allocation-like, %d hooked, %d listed" % (
        path, len(names), len(alloc), len(hooks), len(table)))
    for b in bad:
        print("FAIL " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
