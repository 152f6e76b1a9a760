#!/usr/bin/env python3
"""Runs two builds of one tool over every corpus module and testdata program
and reports any difference in what they write: for speed work that must not
change a decision (hlo-fuse, hlo-layout), the output of the old and the new
build must be byte-identical, remarks included.

Usage:
  compare_tool_outputs.py OLD_TOOL NEW_TOOL [--corpus DIR] [--testdata DIR]
                          [--args "ARGS"]... [--module FILE]... [--keep DIR]

Each --args is one run of both tools on every module (default: the tool's
default pipeline, then with --remarks=json, whose remarks go to a file).
Exit status: 0 when every output matches, 1 otherwise.
"""
import argparse
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent


def modules(corpus, testdata):
    found = sorted(pathlib.Path(corpus).glob("*.hlo"))
    found += sorted(pathlib.Path(testdata).rglob("*.hlo"))
    return found


def run(tool, module, args, workdir, tag):
    """Output file, remarks file, stderr and exit status of one run."""
    out = os.path.join(workdir, tag + ".out")
    remarks = os.path.join(workdir, tag + ".remarks")
    argv = [tool, str(module), "-o", out, "-f"] + [a.replace("{remarks}", remarks) for a in args]
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def read(path):
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    return read(out), read(remarks), proc.stderr, proc.returncode


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--corpus", default=str(HERE.parent.parent / "shared" / "corpus"))
    parser.add_argument("--testdata", default=str(HERE.parent / "testdata"))
    parser.add_argument("--args", action="append", default=None,
                        help="arguments of one run ({remarks} names a scratch file)")
    parser.add_argument("--module", action="append", default=[], help="one more module to compare on")
    parser.add_argument("--keep", help="keep the differing outputs in DIR")
    opts = parser.parse_args()
    runs = opts.args or ["", "--remarks=json --remarks-file={remarks}"]
    files = modules(opts.corpus, opts.testdata) + [pathlib.Path(m) for m in opts.module]
    if not files:
        print("no modules found", file=sys.stderr)
        return 1
    differ = 0
    compared = 0
    with tempfile.TemporaryDirectory() as work:
        for module in files:
            for args in runs:
                argv = shlex.split(args)
                old = run(opts.old, module, argv, work, "old")
                new = run(opts.new, module, argv, work, "new")
                compared += 1
                what = [name for name, a, b in zip(("output", "remarks", "stderr", "exit status"), old, new) if a != b]
                if not what:
                    continue
                differ += 1
                print(f"DIFFERS: {module} [{args}]: {', '.join(what)}")
                if opts.keep:
                    keep = pathlib.Path(opts.keep)
                    keep.mkdir(parents=True, exist_ok=True)
                    for tag, result in (("old", old), ("new", new)):
                        stem = f"{module.stem}.{compared}.{tag}"
                        (keep / (stem + ".out")).write_bytes(result[0] or b"")
                        (keep / (stem + ".err")).write_bytes(result[2] or b"")
    print(f"{compared - differ} of {compared} runs identical over {len(files)} modules")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
