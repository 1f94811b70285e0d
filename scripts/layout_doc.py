#!/usr/bin/env python3
"""Write the file tables of docs/guide/layout.md from each file's first comment.

    scripts/layout_doc.py           rewrite the tables in the page
    scripts/layout_doc.py --check   exit 1, naming each file the page misses or
                                    lists wrongly (scripts/layers.py runs this)

One table per folder of src/ (its .c files) and of lua/moonhttp/ (its Lua
modules), between the page's `<!-- files -->` and `<!-- end files -->`. A
row is the file and the first sentence of its first comment: the .c file's,
or its header's when the .c file opens without one or only points there
(the header is the contract); for a Lua module, its leading `--` lines. A file without such a
comment is an error: say what it holds there, not here.
"""

import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PAGE = os.path.join(ROOT, "docs", "guide", "layout.md")
BEGIN, END = "<!-- files -->", "<!-- end files -->"
POINTER = re.compile(r"see \S+\.h( for the contract)?\.$")


def c_comment(path):
    """The comment a C file opens with (a header's after its include guard), or None."""
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"^(\s*#(ifndef|define)\s+\w+\s*\n)+", "", text) if path.endswith(".h") else text
    m = re.match(r"\s*/\*(.*?)\*/", text, re.S)
    return m.group(1) if m else None


def lua_comment(path):
    lines = []
    for line in open(path, encoding="utf-8"):
        if not line.startswith("--"):
            break
        lines.append(line[2:])
    return "".join(lines) or None


def first_sentence(comment):
    """The first sentence of the comment's first paragraph, on one line."""
    para = []
    for line in comment.splitlines():
        line = line.strip().lstrip("*").strip()
        if not line and para:
            break
        para.append(line)
    text = " ".join(" ".join(para).split())
    m = re.search(r"[.!?](?=\s+[A-Z(`\"]|$)", text)
    return (text[: m.end()] if m else text).replace("|", "\\|")


def files():
    """(folder, name, path relative to ROOT) of every file the page lists."""
    out = []
    for top, ext in (("src", ".c"), (os.path.join("lua", "moonhttp"), ".lua")):
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            for n in names:
                if n.endswith(ext):
                    rel = os.path.relpath(os.path.join(dirpath, n), ROOT)
                    out.append((os.path.dirname(rel), n, rel))
    return sorted(out)


def summary(rel):
    path = os.path.join(ROOT, rel)
    if rel.endswith(".lua"):
        comment = lua_comment(path)
    else:
        comment = c_comment(path)
        header = path[:-2] + ".h"
        # a .c file that opens with no comment, or only "x: see x.h", says it in its header
        if (comment is None or POINTER.search(first_sentence(comment))) and os.path.exists(header):
            comment = c_comment(header) or comment
    if not comment:
        return None
    text = first_sentence(comment)
    return text[:-1] + "." if text.endswith(":") else text


def render():
    """The tables' markdown, and the files without a first comment."""
    lines, missing, current = [], [], None
    for folder, name, rel in files():
        if folder != current:
            if current is not None:
                lines.append("")
            lines += ["`%s/`" % folder, "", "| file | what it holds |", "|---|---|"]
            current = folder
        s = summary(rel)
        if s is None:
            missing.append(rel)
            s = ""
        lines.append("| `%s` | %s |" % (name, s))
    return "\n".join(lines) + "\n", missing


def page_parts():
    text = open(PAGE, encoding="utf-8").read()
    a, b = text.find(BEGIN), text.find(END)
    if a < 0 or b < a:
        sys.exit("layout_doc.py: %s has no %s ... %s block" % (PAGE, BEGIN, END))
    return text[: a + len(BEGIN)] + "\n", text[a + len(BEGIN) : b].strip("\n") + "\n", "\n" + text[b:]


def rows(table):
    """{folder/name: summary} of the tables' rows."""
    out, folder = {}, None
    for line in table.splitlines():
        m = re.match(r"^`(.+)/`$", line)
        if m:
            folder = m.group(1)
        m = re.match(r"^\| `([^`]+)` \| (.*) \|$", line)
        if m and folder:
            out[folder + "/" + m.group(1)] = m.group(2)
    return out


def check():
    """The page's errors: files it misses or lists wrongly, files without a first comment."""
    want, missing = render()
    _, have, _ = page_parts()
    errors = ["%s: no first comment to say what it holds" % f for f in missing]
    if have != want:
        w, h = rows(want), rows(have)
        for f in sorted(set(w) - set(h)):
            errors.append("docs/guide/layout.md does not list %s" % f)
        for f in sorted(set(h) - set(w)):
            errors.append("docs/guide/layout.md lists %s, which does not exist" % f)
        for f in sorted(set(w) & set(h)):
            if w[f] != h[f]:
                errors.append("docs/guide/layout.md says %s holds \"%s\"; its first comment: \"%s\"" % (f, h[f], w[f]))
        if not errors:
            errors.append("docs/guide/layout.md's file tables are not as generated")
        errors.append("(scripts/layout_doc.py rewrites the tables)")
    return errors


def main():
    if sys.argv[1:] == ["--check"]:
        errors = check()
        for e in errors:
            print("layout_doc.py: " + e, file=sys.stderr)
        return 1 if errors else 0
    if sys.argv[1:]:
        sys.exit(__doc__)
    head, _, tail = page_parts()
    table, missing = render()
    open(PAGE, "w", encoding="utf-8").write(head + table + tail)
    for f in missing:
        print("layout_doc.py: %s: no first comment to say what it holds" % f, file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
