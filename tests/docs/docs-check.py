#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""docs-check: the project's documents point only at what exists.

Checks, in the source tree given as the only argument (default: the current
directory), every document: docs/*.md, docs/*/*.md, docs/man/*, README.md and the READMEs
under fs/ and blk/.

  1. Every repository path a document names exists: a word that starts with a
     top-level directory of the tree (fs/core/journal.c, blk/uring.c,
     tests/..., include/mendfs/..., .ci/run), globs (tests/bench/*-insns.sh)
     matching at least one file.  A path preceded by '/' or '~' (/dev/...,
     /sys/fs/..., build/fs/fuse/mendfs) is not one of ours and is skipped.
     Relative Markdown links ([text](FORMAT.md)) must resolve from the
     document's folder.
  2. No document mentions ARCHITECTURE.md (not part of the repository).
  3. Every man page's SEE ALSO entry naming a mendfs page (one of docs/man,
     or a name with "mendfs" or "mendctl" in it) resolves to a file
     docs/man/NAME.SECTION, and every ".so manN/PAGE" link to docs/man/PAGE.

Before the real run it checks itself on a small tree with one fault of each
kind, so that a checker that finds nothing cannot pass.  Prints every problem
as FILE:LINE: what; exits 0 when there is none, 1 otherwise.
"""
import glob
import os
import re
import sys
import tempfile


def documents(root):
    pats = ["docs/*.md", "docs/*/*.md", "docs/man/*", "README.md", "fs/**/README*", "blk/**/README*"]
    out = []
    for p in pats:
        out += sorted(glob.glob(os.path.join(root, p), recursive=True))
    return [f for f in out if os.path.isfile(f)]


def top_dirs(root):
    """Top-level directories of the source tree (not .git, not build trees)."""
    tops = []
    for d in sorted(os.listdir(root)):
        full = os.path.join(root, d)
        if not os.path.isdir(full) or d.startswith(".git"):
            continue
        if os.path.exists(os.path.join(full, "meson-private")):
            continue  # a meson build directory inside the tree
        tops.append(d)
    return tops


def man_text(text):
    """troff escapes that split a path: font changes, \\-, \\&."""
    text = re.sub(r"\\f(\[[^]]*\]|\(..|.)", "", text)
    return text.replace("\\-", "-").replace("\\&", "").replace("\\e", "\\")


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def exists(root, path):
    full = os.path.join(root, path)
    if any(c in path for c in "*?["):
        return bool(glob.glob(full))
    return os.path.exists(full)


def check(root):
    problems = []
    tops = top_dirs(root)
    path_re = re.compile(r"(?<![\w./~$@-])((?:%s)/[\w.+*/-]*[\w+*-])" %
                         "|".join(re.escape(t) for t in tops))
    link_re = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
    man_dir = os.path.join(root, "docs", "man")
    man_pages = set(os.listdir(man_dir)) if os.path.isdir(man_dir) else set()
    man_names = {p.rsplit(".", 1)[0] for p in man_pages}

    for doc in documents(root):
        rel = os.path.relpath(doc, root)
        with open(doc, encoding="utf-8", errors="replace") as f:
            text = f.read()
        is_man = rel.startswith("docs/man/")
        if is_man:
            text = man_text(text)

        for m in path_re.finditer(text):
            if not exists(root, m.group(1)):
                problems.append("%s:%d: no such path in the source tree: %s" %
                                (rel, line_of(text, m.start()), m.group(1)))
        if rel.endswith(".md"):
            for m in link_re.finditer(text):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
                    continue  # a URL, or not ours
                full = os.path.normpath(os.path.join(os.path.dirname(doc), target))
                if not os.path.exists(full):
                    problems.append("%s:%d: link to a missing file: %s" %
                                    (rel, line_of(text, m.start()), target))
        for m in re.finditer(r"ARCHITECTURE\.md", text):
            problems.append("%s:%d: mentions ARCHITECTURE.md, which is not part of the "
                            "repository" % (rel, line_of(text, m.start())))

        if not is_man:
            continue
        for m in re.finditer(r"^\.so\s+(\S+)", text, re.M):
            page = os.path.basename(m.group(1))
            if page not in man_pages:
                problems.append("%s:%d: .so link to a missing page: %s (no docs/man/%s)" %
                                (rel, line_of(text, m.start()), m.group(1), page))
        see = re.search(r"^\.SH\s+\"?SEE ALSO\"?\s*$(.*?)(?=^\.SH|\Z)", text, re.M | re.S)
        if not see:
            continue
        for m in re.finditer(r"([A-Za-z0-9_.+-]+)\s*\((\d[a-z]*)\)", see.group(1)):
            name, sect = m.group(1), m.group(2)
            ours = name in man_names or "mendfs" in name or "mendctl" in name
            if ours and "%s.%s" % (name, sect) not in man_pages:
                problems.append("%s:%d: SEE ALSO %s(%s): no docs/man/%s.%s" %
                                (rel, line_of(text, see.start(1) + m.start()), name, sect,
                                 name, sect))
    return problems


def self_test():
    """The checker must find one planted fault of each kind."""
    with tempfile.TemporaryDirectory(prefix="docs-check-") as t:
        for d in ("docs/man", "fs/core", "blk"):
            os.makedirs(os.path.join(t, d))
        files = {
            "fs/core/journal.c": "",
            "docs/man/mendfs.8": ".SH SEE ALSO\n.BR mkfs.mendfs (8),\n.BR mount (8)\n",
            "docs/man/mkfs.mendfs.8": ".SH SEE ALSO\n.BR mendctl (1),\n.BR mendfs (8)\n",
            "docs/man/mount.mendfs.8": ".so man8/mendfs.8\n",
            "docs/man/umount.mendfs.8": ".so man8/nothere.8\n",
            "docs/DESIGN.md": "See `fs/core/journal.c`, `/dev/dax0.0`, "
                              "`build/fs/fuse/mendfs`, [format](FORMAT.md)\n"
                              "and `fs/core/gone.c`, ARCHITECTURE.md.\n",
            "README.md": "Layout: `blk/uring.c` and `fs/core/*.c`.\n",
        }
        for name, body in files.items():
            with open(os.path.join(t, name), "w") as f:
                f.write(body)
        found = check(t)
        want = ["docs/DESIGN.md:1: link to a missing file: FORMAT.md",
                "docs/DESIGN.md:2: no such path in the source tree: fs/core/gone.c",
                "docs/DESIGN.md:2: mentions ARCHITECTURE.md",
                "README.md:1: no such path in the source tree: blk/uring.c",
                "docs/man/mkfs.mendfs.8:2: SEE ALSO mendctl(1)",
                "docs/man/umount.mendfs.8:1: .so link to a missing page: man8/nothere.8"]
        missed = [w for w in want if not any(p.startswith(w) for p in found)]
        extra = [p for p in found if not any(p.startswith(w) for w in want)]
        if missed or extra:
            for w in missed:
                print("docs-check self-test: not found: %s" % w)
            for p in extra:
                print("docs-check self-test: wrongly reported: %s" % p)
            return False
    return True


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    if not self_test():
        return 1
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print("docs-check: %d problem%s" % (len(problems), "" if len(problems) == 1 else "s"))
        return 1
    print("docs-check: %d documents, every path and page they name exists" %
          len(documents(root)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
