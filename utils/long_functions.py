#!/usr/bin/env python3
"""Lists the C++ functions longer than a limit (150 lines by default) and holds
them against an allow-list that may only shrink.

A function is a definition that starts in column 0 (the project's style: no
indentation inside namespaces) and ends at the next line that is exactly "}".
Its length counts the signature's first line through the closing brace.

  long_functions.py [--root DIR] [--limit N] [DIR...]            list them, longest first
  long_functions.py [--root DIR] --check [--allow FILE] [DIR...]  exit 1 when a function
      over the limit is not allowed, or an allowed one is gone or short enough
      to leave the list (so the list shrinks as functions are split)

The allow-list (utils/long_functions.allow) has one "PATH FUNCTION" per line;
'#' starts a comment. Sources are every .cpp and .h under the DIRs given
(relative to the root; default src/codegen) but tests (*_test.cpp).
"""
import argparse
import os
import re
import sys

SKIP_START = re.compile(r"^(#|//|/\*|\*|namespace\b|using\b|template\b|extern\b|static_assert\b|struct\b|class\b|"
                        r"union\b|enum\b|typedef\b|\}|\{|$|\s)")
NAME = re.compile(r"([A-Za-z_~][A-Za-z_0-9]*(?:::[A-Za-z_~][A-Za-z_0-9]*)*(?:::operator[^(]*)?)\s*\($")


def function_name(signature):
    """The qualified name before the parameter list of a signature."""
    depth = 0
    for i, ch in enumerate(signature):
        if ch == "(" and depth == 0:
            m = NAME.search(signature[:i + 1].rstrip("(").rstrip() + "(")
            return m.group(1) if m else None
        if ch == "<":
            depth += 1
        elif ch == ">" and depth > 0:
            depth -= 1
    return None


def functions(path):
    """(name, first line, length) of each column-0 function definition."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if SKIP_START.match(line) or "(" not in line:
            i += 1
            continue
        # The signature runs until a line that ends with "{" (a definition),
        # ";" (a declaration) or "}" (a one-line body), at most 12 lines.
        sig = [line]
        j = i
        while not re.search(r"[{;}]\s*(//.*)?$", lines[j]) and j - i < 12 and j + 1 < len(lines):
            j += 1
            sig.append(lines[j])
        text = " ".join(s.strip() for s in sig)
        if not re.search(r"\{\s*(//.*)?$", lines[j]) or re.search(r"=\s*\{?\s*$", text.split("(")[0]):
            i = j + 1
            continue
        name = function_name(text)
        k = j
        if not lines[j].rstrip().endswith("}"):  # not a one-line body
            k = j + 1
            while k < len(lines) and lines[k].rstrip() != "}":
                k += 1
        if name:
            out.append((name, i + 1, k - i + 1))
        i = k + 1
    return out


def sources(root, tops):
    for top in tops:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for fn in sorted(filenames):
                if fn.endswith((".cpp", ".h")) and not fn.endswith("_test.cpp"):
                    yield os.path.join(dirpath, fn)


def read_allow(path):
    allowed = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2:
                sys.exit(f"{path}:{n}: expected 'PATH FUNCTION', got '{line}'")
            allowed.append((parts[0], parts[1]))
    return allowed


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(here), help="the source tree (default: this checkout)")
    ap.add_argument("--limit", type=int, default=150, help="longest function allowed, in lines (default 150)")
    ap.add_argument("--check", action="store_true", help="hold the long functions against the allow-list")
    ap.add_argument("--allow", default=None, help="the allow-list (default: ROOT/utils/long_functions.allow)")
    ap.add_argument("dirs", nargs="*", default=["src/codegen"], help="folders to read (default src/codegen)")
    args = ap.parse_args()
    root = os.path.abspath(args.root)

    found = {}
    for path in sources(root, args.dirs):
        rel = os.path.relpath(path, root)
        for name, line, length in functions(path):
            key = (rel, name)
            if key not in found or found[key][1] < length:
                found[key] = (line, length)
    long = sorted(((length, rel, name, line) for (rel, name), (line, length) in found.items() if length > args.limit),
                  key=lambda x: (-x[0], x[1], x[2]))
    if not args.check:
        for length, rel, name, line in long:
            print(f"{length:5d}  {rel}:{line}  {name}")
        print(f"{len(long)} functions over {args.limit} lines")
        return 0

    allow_path = args.allow or os.path.join(root, "utils", "long_functions.allow")
    allowed = read_allow(allow_path)
    allowed_set = set(allowed)
    errors = []
    for length, rel, name, line in long:
        if (rel, name) not in allowed_set:
            errors.append(f"{rel}:{line}: {name} is {length} lines (limit {args.limit}): split it")
    for rel, name in allowed:
        if (rel, name) not in found:
            errors.append(f"{allow_path}: {rel} {name} is gone: take it off the list")
        elif found[(rel, name)][1] <= args.limit:
            errors.append(f"{allow_path}: {rel} {name} is {found[(rel, name)][1]} lines now, within the limit: "
                          "take it off the list")
    for e in errors:
        print(e)
    print(f"{len(long)} functions over {args.limit} lines, {len(allowed)} allowed")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
