#!/usr/bin/env python3
"""Check that src/ keeps the shape src/README.md draws.

    scripts/layers.py [--objects BUILD_DIR] [--list]

Three checks, each a failure when broken:

1. Upward includes. Each folder of src/ is a layer; src/README.md holds a
   ```layers block naming, for each layer, the layers it may include
   (directly; the script takes the closure). A `#include "x.h"` that resolves
   to a header of a layer not below the includer fails. Sibling folders
   (`siblings: a/b a/c` in the block) may not include each other.
2. Cycles between files. A file pair x.c/x.h (with x_impl.h) is one module; a module depends
   on another when it includes its header, and (with --objects) when its
   object file references a symbol the other defines (the callgraph, from
   `nm`). Any strongly connected set of two or more modules is a cycle; it
   fails unless scripts/layers-allow.txt names a cycle containing it.
3. Size: no file of src/ or lua/moonhttp/ over MAX_LINES lines, unless the
   allowlist says `size <path>`.
4. The Lua modules of lua/moonhttp/: no cycle in their `require` graph (a
   require inside a function counts: it is still a dependency).
5. Docs that name the code: docs/guide/layout.md lists every .c file of src/
   and Lua module as its first comment says (scripts/layout_doc.py --check),
   and every function docs/guide/life-of-a-request.md names (`name()`) is
   defined in src/.
6. Error constants in one case: an exported `const char` string of src/
   (`mh_client_err_refused`) and a file's own error string (`err_malformed`)
   are named in lower case, as h2o's socket errors; upper case is for macros
   and enum members.

An allowlist entry that no longer matches anything fails too, so what a
branch fixes comes off the list. --list prints every cycle found (allowed
or not) and the module graph's size.
"""

import argparse
import collections
import os
import re
import subprocess
import sys

import layout_doc  # scripts/layout_doc.py, beside this file

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SRC = os.path.join(ROOT, "src")
ALLOW = os.path.join(ROOT, "scripts", "layers-allow.txt")
LUA = os.path.join(ROOT, "lua", "moonhttp")
LIFE = os.path.join(ROOT, "docs", "guide", "life-of-a-request.md")
REQUIRE_RE = re.compile(r"""\brequire\s*\(?\s*["'](moonhttp(?:\.[\w.]+)?)["']""")
MAX_LINES = 1000
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_layers():
    """The ```layers block of src/README.md: (may_include closure, siblings)."""
    text = open(os.path.join(SRC, "README.md"), encoding="utf-8").read()
    m = re.search(r"^```layers\n(.*?)^```", text, re.M | re.S)
    if not m:
        sys.exit("layers.py: src/README.md has no ```layers block")
    direct, siblings = {}, []
    for line in m.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, rest = line.partition(":")
        name = name.strip()
        if name == "siblings":
            siblings.append(rest.split())
        else:
            direct[name] = rest.split()
    closure = {}

    def below(name, seen=()):
        if name in closure:
            return closure[name]
        if name in seen:
            sys.exit("layers.py: the layer order in src/README.md has a cycle at " + name)
        if name not in direct:
            sys.exit("layers.py: src/README.md names an unknown layer " + name)
        out = set()
        for d in direct[name]:
            out.add(d)
            out |= below(d, seen + (name,))
        closure[name] = out
        return out

    for name in direct:
        below(name)
    return closure, siblings


def source_files():
    out = []
    for dirpath, _, files in os.walk(SRC):
        for f in files:
            if f.endswith((".c", ".h")):
                out.append(os.path.relpath(os.path.join(dirpath, f), SRC))
    return sorted(out)


def module(path):
    """A file's module: x.c, x.h and x_impl.h (the private header of x's files) are one."""
    m = os.path.splitext(path)[0]
    return m[: -len("_impl")] if m.endswith("_impl") and path.endswith(".h") else m


def folder(path):
    return os.path.dirname(path)


def layer(path, layers):
    """The deepest declared layer a file sits in (http/h1/x.c -> http/h1 if declared)."""
    d = folder(path)
    while d and d not in layers:
        d = os.path.dirname(d)
    return d


def resolve(inc, includer, headers_by_name):
    """Which src/ header an include names: its own folder first, as the compiler does."""
    local = os.path.normpath(os.path.join(folder(includer), inc))
    if local in headers_by_name["paths"]:
        return local
    hits = headers_by_name.get(os.path.basename(inc), [])
    return hits[0] if len(hits) == 1 else None


def include_edges(files, layers, siblings, allowed_up, errors):
    headers = {"paths": set(f for f in files if f.endswith(".h"))}
    for f in headers["paths"]:
        headers.setdefault(os.path.basename(f), []).append(f)
    edges = collections.defaultdict(set)
    for f in files:
        text = open(os.path.join(SRC, f), encoding="utf-8", errors="replace").read()
        for inc in INCLUDE_RE.findall(text):
            target = resolve(inc, f, headers)
            if target is None:
                continue  # a generated or third-party header
            if module(target) != module(f):
                edges[module(f)].add(module(target))
            lf, lt = layer(f, layers), layer(target, layers)
            if lf != lt and lt not in layers.get(lf, ()) and not lf.startswith(lt + "/"):
                if (f, target) in allowed_up:
                    allowed_up[(f, target)] = True
                    continue
                errors.append("upward include: %s includes %s (%s may not include %s)" % (f, target, lf or "src", lt))
            for group in siblings:
                a = next((g for g in group if f.startswith(g + "/")), None)
                b = next((g for g in group if target.startswith(g + "/")), None)
                if a and b and a != b:
                    errors.append("sibling include: %s includes %s" % (f, target))
    return edges


def call_edges(build_dir, modules):
    """module -> modules whose symbols its object file references, from nm."""
    objects = {}
    for dirpath, _, files in os.walk(build_dir):
        for f in files:
            if not f.endswith(".c.o"):
                continue
            p = os.path.join(dirpath, f).replace(os.sep, "/")
            i = p.rfind("/src/")
            if i < 0 or "/mh_" not in p:
                continue
            m = module(p[i + 5 : -2])
            if m in modules:
                objects[m] = os.path.join(dirpath, f)
    if not objects:
        sys.exit("layers.py: no object files of src/ under " + build_dir)
    nm = os.environ.get("NM") or "nm"
    by_path = {path: m for m, path in objects.items()}
    paths = sorted(by_path)
    out = subprocess.run([nm, "-A"] + paths, capture_output=True, text=True, check=True).stdout
    defined, used = {}, collections.defaultdict(set)
    for line in out.splitlines():
        path, _, rest = line.rpartition(":")  # nm -A: "file: [addr] type name"
        m = by_path.get(path)
        parts = rest.split()
        if m is None:
            continue
        if len(parts) == 2 and parts[0] == "U":
            used[m].add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRCGSV":
            defined[parts[2]] = m
    edges = collections.defaultdict(set)
    for m, syms in used.items():
        for s in syms:
            d = defined.get(s)
            if d and d != m:
                edges[m].add(d)
    return edges


def cycles(edges):
    """Strongly connected sets of two or more modules (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    nodes = sorted(set(edges) | {t for ts in edges.values() for t in ts})
    counter = [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                scc = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    scc.append(w)
                    if w == v:
                        break
                if len(scc) > 1:
                    out.append(sorted(scc))
    return sorted(out)


def lua_modules():
    """{module name: path relative to ROOT} of lua/moonhttp/ ("moonhttp" is init.lua)."""
    out = {}
    for dirpath, _, names in os.walk(LUA):
        for n in names:
            if n.endswith(".lua"):
                rel = os.path.relpath(os.path.join(dirpath, n), LUA)[: -len(".lua")]
                name = "moonhttp" if rel == "init" else "moonhttp." + rel.replace(os.sep, ".")
                out[name] = os.path.relpath(os.path.join(dirpath, n), ROOT)
    return out


def require_edges(modules):
    """module -> the lua/moonhttp modules it requires (modules made in C are not files here)."""
    edges = collections.defaultdict(set)
    for name, rel in modules.items():
        for target in REQUIRE_RE.findall(open(os.path.join(ROOT, rel), encoding="utf-8").read()):
            if target in modules and target != name:
                edges[name].add(target)
    return edges


def undefined_functions(path):
    """The `name()` a docs page names that no line of src/ defines."""
    if not os.path.exists(path):
        return ["%s is missing" % os.path.relpath(path, ROOT)]
    names = sorted(set(re.findall(r"`(\w+)\(\)`", open(path, encoding="utf-8").read())))
    defined = set()
    for f in source_files():
        text = open(os.path.join(SRC, f), encoding="utf-8", errors="replace").read()
        # a definition: a line that starts with its type (not indented), has no ";", and
        # names the function before its "(" (after any __attribute__((...)))
        for line in re.findall(r"^[A-Za-z_][^;\n]*\([^;\n]*$", text, re.M):
            defined.update(re.findall(r"\b(\w+)\(", line))
    return ["%s names %s(), which src/ does not define" % (os.path.relpath(path, ROOT), n)
            for n in names if n not in defined]


STRING_CONST_RE = re.compile(
    r"^(?:static\s+|extern\s+)?const\s+char\s*(?:\*\s*const\s*)?([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*[=;]", re.M)


def upper_case_constants(files):
    """Exported string constants and error strings of src/ whose names are not lower case."""
    errors = []
    for f in files:
        text = open(os.path.join(SRC, f), encoding="utf-8", errors="replace").read()
        for m in STRING_CONST_RE.finditer(text):
            name = m.group(1)
            exported = not m.group(0).startswith("static")
            if name != name.lower() and (exported or "ERR" in name):
                errors.append("%s: string constant %s: name it in lower case (%s), as every "
                              "error constant" % (f, name, name.lower()))
    return errors


def read_allow():
    """scripts/layers-allow.txt: {line: (kind, args)}."""
    entries = {}
    if not os.path.exists(ALLOW):
        return entries
    for n, line in enumerate(open(ALLOW, encoding="utf-8"), 1):
        body = line.split("#", 1)[0].split()
        if not body:
            continue
        kind, rest = body[0], body[1:]
        if (kind, len(rest) > 1) not in (("cycle", True), ("size", False), ("include", True)) or (
            kind == "include" and len(rest) != 2
        ):
            sys.exit("layers.py: %s:%d: expected `cycle <modules...>`, `size <path>` or `include <file> <header>`" % (ALLOW, n))
        entries[n] = (kind, rest)
    return entries


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objects", metavar="BUILD_DIR", help="also check the callgraph of this build's object files")
    ap.add_argument("--list", action="store_true", help="print every cycle found, allowed or not")
    args = ap.parse_args()

    layers, siblings = read_layers()
    allow = read_allow()
    used = set()
    files = source_files()
    errors = []
    for f in files:
        if layer(f, layers) not in layers:
            errors.append("%s: folder not in src/README.md's layers" % f)
    allowed_up = {tuple(rest): False for kind, rest in allow.values() if kind == "include"}
    inc = include_edges(files, layers, siblings, allowed_up, errors)
    used.update(n for n, (kind, rest) in allow.items() if kind == "include" and allowed_up[tuple(rest)])
    graphs = [("include", inc)]
    if args.objects:
        graphs.append(("call", call_edges(args.objects, {module(f) for f in files})))

    for kind, edges in graphs:
        for scc in cycles(edges):
            ok = [n for n, (k, rest) in allow.items() if k == "cycle" and set(scc) <= set(rest)]
            used.update(ok)
            if args.list or not ok:
                tag = "allowed (layers-allow.txt:%d)" % ok[0] if ok else "CYCLE"
                print("%s %s cycle: %s" % (tag, kind, " ".join(scc)))
            if not ok:
                errors.append("%s cycle between %s" % (kind, ", ".join(scc)))

    lua = lua_modules()
    for scc in cycles(require_edges(lua)):
        errors.append("require cycle between Lua modules: %s" % ", ".join(scc))

    sized = [(f, os.path.join(SRC, f)) for f in files]
    sized += [(os.path.relpath(p, ROOT), os.path.join(ROOT, p)) for p in sorted(lua.values())]
    for f, path in sized:
        n = sum(1 for _ in open(path, encoding="utf-8", errors="replace"))
        if n > MAX_LINES:
            ok = [line for line, (k, rest) in allow.items() if k == "size" and rest[0] == f]
            used.update(ok)
            if not ok:
                errors.append("%s: %d lines (at most %d)" % (f, n, MAX_LINES))

    errors += layout_doc.check()
    errors += undefined_functions(LIFE)
    errors += upper_case_constants(files)

    for n, (kind, _) in sorted(allow.items()):
        if n not in used and (args.objects or kind != "cycle"):  # a call cycle is only seen with --objects
            errors.append("layers-allow.txt:%d matches nothing any more: delete it" % n)

    for e in errors:
        print("layers.py: " + e, file=sys.stderr)
    if errors:
        return 1
    print("layers.py: %d files, layers and cycles as src/README.md draws them; %d Lua modules; "
          "docs/guide/layout.md and life-of-a-request.md as the code is" % (len(files), len(lua)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
