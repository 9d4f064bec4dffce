# SPDX-License-Identifier: Apache-2.0
"""Checks a gpufracd metrics page with Prometheus' own parser.

    check_metrics.py PAGE EXPECTED

EXPECTED has one sample a line: `name value k=v&k=v...` with label values
percent-encoded; every one must be on the page with exactly that value.
The page must parse, end in a newline, carry HELP and TYPE once per name
before its samples, keep each name's samples together, and type names
ending in _total as counters. Exit 0 when all holds, else 1 with the reasons."""
import sys
import urllib.parse

from prometheus_client.parser import text_string_to_metric_families


def structure(text):
    problems, seen, done, current = [], {}, set(), None
    for line in text.split("\n")[:-1]:
        if line.startswith("# "):
            kind, name = line.split(" ", 3)[1:3]
            seen.setdefault(name, []).append(kind)
            if seen[name].count(kind) > 1:
                problems.append(f"{kind} twice for {name}")
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name != current:
            if name in done:
                problems.append(f"samples of {name} are not contiguous")
            if "TYPE" not in seen.get(name, []):
                problems.append(f"{name} has a sample before its TYPE")
            done.add(current)
            current = name
    return problems


def parse_expected(path):
    out = []
    with open(path, encoding="utf-8") as fp:
        for line in fp:
            name, value, labels = (line.rstrip("\n").split(" ", 2) + [""])[:3]
            pairs = {}
            for kv in filter(None, labels.split("&")):
                k, v = kv.split("=", 1)
                pairs[k] = urllib.parse.unquote(v)
            out.append((name, pairs, float(value)))
    return out


def main():
    with open(sys.argv[1], encoding="utf-8") as fp:
        text = fp.read()
    problems = [] if text.endswith("\n") else ["no final newline"]
    problems += structure(text)
    samples, names = {}, []
    try:
        for fam in text_string_to_metric_families(text):
            names.append(fam.name)
            for s in fam.samples:
                if s.name.endswith("_total") and fam.type != "counter":
                    problems.append(f"{s.name} is typed {fam.type}")
                key = (s.name, tuple(sorted(s.labels.items())))
                if key in samples:
                    problems.append(f"sample twice: {key}")
                samples[key] = s.value
    except Exception as e:  # the parser's own complaint is the finding
        problems.append(f"parser: {e!r}")
    if len(names) != len(set(names)):
        problems.append(f"a family appears twice: {names}")
    for name, labels, value in parse_expected(sys.argv[2]):
        key = (name, tuple(sorted(labels.items())))
        if key not in samples:
            problems.append(f"missing {name}{labels}")
        elif samples[key] != value:
            problems.append(f"{name}{labels} = {samples[key]}, expected {value}")
    for p in problems:
        print("check_metrics:", p)
    print(f"check_metrics: {len(samples)} samples in {len(names)} families")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
