#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Render the gpufrac Helm chart without helm.

A small, dependency-free renderer for exactly the template subset the chart
uses (Debian has no helm package):

  {{ .Values.a.b }}  {{ .Release.Namespace }}  {{ .Release.Name }}
  {{ .Chart.Name }}  {{ .Chart.Version }}  {{ .Chart.AppVersion }}
  {{ .Files.Get "files/x" | indent N }}
  {{ quote X }}  {{ X | quote }}  {{ toYaml X | nindent N }}  {{ X | indent N }}
  {{ if X }} ... {{ else }} ... {{ end }}      (with {{- and -}} trimming)
  {{ or X Y ... }}  (the first non-empty argument, as in helm; also as an if condition)

and the YAML subset values.yaml is written in (block mappings and sequences,
plain or quoted scalars, [] and {}, comments). Anything else is an error, so
the chart cannot silently drift out of what this script understands.

  deploy/render.py [CHART] [--namespace NS] [--name RELEASE] [--create-namespace]
                   [-f VALUES.yaml]... [--set a.b=v]... [--chart DIR] [-o FILE]

Defaults: the chart next to this script, release "gpufrac", namespace = the
chart's .Values.namespace. Output is what `helm template` would apply: one
document per resource, each preceded by "---" and a "# Source:" line.
"""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


class RenderError(Exception):
    pass


# ---------------------------------------------------------------- YAML subset

def _scalar(text, where):
    t = text.strip()
    if t == "" or t in ("~", "null", "Null", "NULL"):
        return None
    if t in ("true", "True", "TRUE"):
        return True
    if t in ("false", "False", "FALSE"):
        return False
    if t == "[]":
        return []
    if t == "{}":
        return {}
    if t[0] == '"':
        if not t.endswith('"') or len(t) < 2:
            raise RenderError("%s: unterminated string %s" % (where, t))
        return json.loads(t)
    if t[0] == "'":
        if not t.endswith("'") or len(t) < 2:
            raise RenderError("%s: unterminated string %s" % (where, t))
        return t[1:-1].replace("''", "'")
    if t[0] in "[{&*!|>%@`":
        raise RenderError("%s: unsupported YAML %r (use block style)" % (where, t))
    if re.fullmatch(r"[-+]?[0-9]+", t):
        return int(t)
    if re.fullmatch(r"[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?", t):
        return float(t)
    return t


def _strip_comment(line):
    out, quote = [], None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            break
        out.append(ch)
    return "".join(out).rstrip()


def load_values(text, name="values.yaml"):
    """Parse the block-YAML subset into dicts, lists and scalars."""
    lines = []
    for no, raw in enumerate(text.splitlines(), 1):
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise RenderError("%s:%d: tab in indentation" % (name, no))
        s = _strip_comment(raw)
        if s.strip() in ("", "---"):
            continue
        lines.append((len(s) - len(s.lstrip(" ")), s.strip(), "%s:%d" % (name, no)))
    pos = [0]

    def block(indent):
        if pos[0] >= len(lines):
            return None
        ind, s, where = lines[pos[0]]
        if ind < indent:
            return None
        if s.startswith("- ") or s == "-":
            return seq(ind)
        return mapping(ind)

    def key_value(s, where):
        m = re.match(r'^("(?:[^"\\]|\\.)*"|\'[^\']*\'|[^:#]+?)\s*:(?:\s+(.*))?$', s)
        if not m:
            raise RenderError("%s: expected 'key: value', got %r" % (where, s))
        k = m.group(1)
        k = _scalar(k, where) if k[0] in "\"'" else k
        return str(k), m.group(2)

    def mapping(indent):
        out = {}
        while pos[0] < len(lines):
            ind, s, where = lines[pos[0]]
            if ind < indent:
                break
            if ind > indent or s.startswith("-"):
                raise RenderError("%s: bad indentation" % where)
            k, v = key_value(s, where)
            if k in out:
                raise RenderError("%s: duplicate key %s" % (where, k))
            pos[0] += 1
            if v is None or v == "":
                child = None
                if pos[0] < len(lines):
                    nind, ns, _ = lines[pos[0]]
                    if nind > indent or (nind == indent and ns.startswith("-")):
                        child = block(nind)
                out[k] = child
            else:
                out[k] = _scalar(v, where)
        return out

    def seq(indent):
        out = []
        while pos[0] < len(lines):
            ind, s, where = lines[pos[0]]
            if ind < indent or not (s.startswith("- ") or s == "-"):
                if ind > indent:
                    raise RenderError("%s: bad indentation" % where)
                break
            if ind > indent:
                raise RenderError("%s: bad indentation" % where)
            rest = s[1:].strip()
            if rest == "":
                pos[0] += 1
                out.append(block(indent + 1))
            elif re.match(r'^("[^"]*"|\'[^\']*\'|[^:#"\']+?)\s*:(\s|$)', rest):
                # "- key: v" starts a mapping whose keys sit at indent + 2
                lines[pos[0]] = (indent + 2, rest, where)
                out.append(mapping(indent + 2))
            else:
                pos[0] += 1
                out.append(_scalar(rest, where))
        return out

    result = block(0)
    if pos[0] != len(lines):
        raise RenderError("%s: unexpected content" % lines[pos[0]][2])
    return {} if result is None else result


def parse_set(expr):
    """--set a.b=v, typed as helm does: true/false/null/int, else string."""
    if "=" not in expr:
        raise RenderError("--set %s: expected key=value" % expr)
    key, val = expr.split("=", 1)
    if val in ("true", "false"):
        v = val == "true"
    elif val == "null":
        v = None
    elif re.fullmatch(r"-?[0-9]+", val):
        v = int(val)
    else:
        v = val
    return key.split("."), v


def merge(dst, src):
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            merge(dst[k], v)
        else:
            dst[k] = v
    return dst


# ---------------------------------------------------------------- toYaml

_PLAIN = re.compile(r"^[A-Za-z0-9_./][A-Za-z0-9_./ -]*$")
_AMBIGUOUS = re.compile(r"^([-+]?[0-9._]+([eE][-+]?[0-9]+)?|true|false|yes|no|on|off|y|n|null|~)$",
                        re.IGNORECASE)


def _yaml_scalar(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float)):
        return repr(v)
    s = str(v)
    if _PLAIN.match(s) and not _AMBIGUOUS.match(s) and not s.endswith(" "):
        return s
    return json.dumps(s)


def to_yaml(v, indent=0):
    """Block YAML with sorted keys, as helm's toYaml (sigs.k8s.io/yaml) writes it."""
    pad = " " * indent
    if isinstance(v, dict):
        if not v:
            return pad + "{}"
        out = []
        for k in sorted(v):
            x = v[k]
            key = _yaml_scalar(k)
            if isinstance(x, (dict, list)) and x:
                child_indent = indent if isinstance(x, list) else indent + 2
                out.append("%s%s:\n%s" % (pad, key, to_yaml(x, child_indent)))
            else:
                out.append("%s%s: %s" % (pad, key, to_yaml(x, 0)))
        return "\n".join(out)
    if isinstance(v, list):
        if not v:
            return pad + "[]"
        out = []
        for x in v:
            if isinstance(x, (dict, list)) and x:
                body = to_yaml(x, indent + 2)
                out.append(pad + "- " + body[indent + 2:])
            else:
                out.append(pad + "- " + to_yaml(x, 0))
        return "\n".join(out)
    return pad + _yaml_scalar(v)


# ---------------------------------------------------------------- templates

_ACTION = re.compile(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.DOTALL)


def _tokens(text, name):
    toks, last = [], 0
    for m in _ACTION.finditer(text):
        toks.append(("text", text[last:m.start()]))
        if m.group(1):
            toks[-1] = ("text", toks[-1][1].rstrip(" \t\r\n"))
        toks.append(("action", m.group(2), m.group(3) == "-"))
        last = m.end()
    toks.append(("text", text[last:]))
    # apply -}} trimming to the following text
    out = []
    trim_next = False
    for t in toks:
        if t[0] == "text":
            s = t[1].lstrip(" \t\r\n") if trim_next else t[1]
            out.append(("text", s))
            trim_next = False
        else:
            out.append(("action", t[1]))
            trim_next = t[2]
    return out


def _parse(tokens, name):
    """Nest if/else/end into a tree: list of str | ('expr', e) | ('if', cond, then, else)."""
    stack = [([], None)]  # (body, if-node)
    for t in tokens:
        if t[0] == "text":
            if t[1]:
                stack[-1][0].append(t[1])
            continue
        a = t[1]
        if a.startswith("/*"):
            continue
        if a.startswith("if "):
            node = ["if", a[3:].strip(), [], []]
            stack[-1][0].append(node)
            stack.append((node[2], node))
        elif a == "else":
            if stack[-1][1] is None:
                raise RenderError("%s: else without if" % name)
            node = stack.pop()[1]
            stack.append((node[3], node))
        elif a == "end":
            if stack[-1][1] is None:
                raise RenderError("%s: end without if" % name)
            stack.pop()
        else:
            stack[-1][0].append(("expr", a))
    if len(stack) != 1:
        raise RenderError("%s: if without end" % name)
    return stack[0][0]


def _lookup(path, ctx, name):
    if not path.startswith("."):
        raise RenderError("%s: unsupported term %r" % (name, path))
    cur = ctx
    for part in path[1:].split("."):
        if not isinstance(cur, dict) or part not in cur:
            raise RenderError("%s: %s is not set" % (name, path))
        cur = cur[part]
    return cur


def _truthy(v):
    return not (v is None or v is False or v == 0 or v == "" or v == [] or v == {})


def _to_str(v):
    if v is None:
        return ""
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (dict, list)):
        raise RenderError("a map or list needs toYaml")
    return str(v)


def _files_get(ctx, rel, name):
    """A file of the chart, as helm's .Files.Get (never templated)."""
    root = ctx.get("ChartDir")
    path = os.path.normpath(os.path.join(root or "", str(rel)))
    if not root or not path.startswith(os.path.normpath(root) + os.sep) or not os.path.isfile(path):
        raise RenderError("%s: .Files.Get %r: no such file in the chart" % (name, rel))
    with open(path) as f:
        return f.read().rstrip("\n")


def _eval(expr, ctx, name):
    stages = [s.strip() for s in expr.split("|")]
    val = None
    for i, st in enumerate(stages):
        words = st.split()
        if not words:
            raise RenderError("%s: empty pipeline stage in %r" % (name, expr))
        fn, args = words[0], words[1:]
        if fn == ".Files.Get" and len(args) == 1 and not i:
            val = _files_get(ctx, _scalar(args[0], name), name)
            continue
        if fn.startswith("."):
            if args or i:
                raise RenderError("%s: unsupported %r" % (name, expr))
            val = _lookup(fn, ctx, name)
            continue
        argv = [_lookup(a, ctx, name) if a.startswith(".") else _scalar(a, name) for a in args]
        if i:
            argv.append(val)
        if fn == "or" and argv:
            val = next((a for a in argv if _truthy(a)), argv[-1])
        elif fn == "quote" and len(argv) == 1:
            val = json.dumps(_to_str(argv[0]))
        elif fn == "toYaml" and len(argv) == 1:
            val = to_yaml(argv[0])
        elif fn in ("nindent", "indent") and len(argv) == 2 and isinstance(argv[0], int):
            pad = " " * argv[0]
            body = "\n".join(pad + ln if ln else ln for ln in _to_str(argv[1]).split("\n"))
            val = ("\n" + body) if fn == "nindent" else body
        else:
            raise RenderError("%s: unsupported function in %r" % (name, expr))
    return val


def _run(tree, ctx, name, out):
    for node in tree:
        if isinstance(node, str):
            out.append(node)
        elif node[0] == "expr":
            out.append(_to_str(_eval(node[1], ctx, name)))
        else:
            cond = node[1]
            neg = cond.startswith("not ")
            v = _truthy(_eval(cond[4:] if neg else cond, ctx, name))
            _run(node[2] if v != neg else node[3], ctx, name, out)


def render_template(text, ctx, name="template"):
    out = []
    _run(_parse(_tokens(text, name), name), ctx, name, out)
    return "".join(out)


# helm's install order (pkg/releaseutil/kind_sorter.go), for the kinds that
# matter here; other kinds go last. One file applies cleanly top to bottom.
INSTALL_ORDER = ["PriorityClass", "Namespace", "ServiceAccount", "Secret", "ConfigMap",
                 "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Role",
                 "RoleBinding", "Service", "DaemonSet", "Deployment"]


def _kind(doc):
    m = re.search(r"^kind:\s*(\S+)", doc, re.M)
    return m.group(1) if m else ""


def render_chart(chart_dir, values, release_name, namespace, create_namespace=False):
    with open(os.path.join(chart_dir, "Chart.yaml")) as f:
        chart = load_values(f.read(), "Chart.yaml")
    ctx = {
        "Values": values,
        "Release": {"Name": release_name, "Namespace": namespace, "Service": "Helm"},
        "ChartDir": os.path.abspath(chart_dir),
        "Chart": {"Name": chart.get("name"), "Version": chart.get("version"),
                  "AppVersion": chart.get("appVersion")},
    }
    tdir = os.path.join(chart_dir, "templates")
    docs = []
    for fn in sorted(os.listdir(tdir)):
        if not fn.endswith(".yaml") or fn.startswith("_"):
            continue
        with open(os.path.join(tdir, fn)) as f:
            text = render_template(f.read(), ctx, fn)
        for doc in re.split(r"^---[ \t]*$\n?", text, flags=re.M):
            if doc.strip() and not all(ln.strip().startswith("#") or not ln.strip()
                                       for ln in doc.splitlines()):
                docs.append("---\n# Source: %s/templates/%s\n%s\n"
                            % (chart.get("name"), fn, doc.strip("\n")))
    if create_namespace:
        docs.append("---\n# Source: render.py --create-namespace\napiVersion: v1\nkind: Namespace\n"
                    "metadata:\n  name: %s\n" % namespace)
    rank = {k: i for i, k in enumerate(INSTALL_ORDER)}
    docs.sort(key=lambda d: rank.get(_kind(d), len(INSTALL_ORDER)))  # stable
    return "".join(docs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("chart_dir", nargs="?", metavar="CHART",
                    help="the chart directory, as helm template takes it (same as --chart)")
    ap.add_argument("--chart", help="the chart directory (default: the chart next to this script)")
    ap.add_argument("--name", default="gpufrac", help="release name (default gpufrac)")
    ap.add_argument("--namespace", "-n", help="namespace (default: .Values.namespace)")
    ap.add_argument("--create-namespace", action="store_true",
                    help="add a Namespace document (as helm --create-namespace does)")
    ap.add_argument("-f", "--values", action="append", default=[], help="extra values file")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("-o", "--output", help="write here instead of stdout")
    args = ap.parse_args(argv)
    if args.chart_dir and args.chart and os.path.realpath(args.chart_dir) != os.path.realpath(args.chart):
        ap.error("two charts given: %s and --chart %s" % (args.chart_dir, args.chart))
    args.chart = args.chart_dir or args.chart or os.path.join(HERE, "helm", "gpufrac")
    try:
        with open(os.path.join(args.chart, "values.yaml")) as f:
            values = load_values(f.read())
        for fn in args.values:
            with open(fn) as f:
                merge(values, load_values(f.read(), fn))
        for expr in args.set:
            keys, v = parse_set(expr)
            cur = values
            for k in keys[:-1]:
                if not isinstance(cur.get(k), dict):
                    cur[k] = {}
                cur = cur[k]
            cur[keys[-1]] = v
        ns = args.namespace or values.get("namespace") or "default"
        text = render_chart(args.chart, values, args.name, ns, args.create_namespace)
    except (RenderError, OSError) as e:
        print("render.py: %s" % e, file=sys.stderr)
        return 1
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
