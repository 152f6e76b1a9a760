#!/usr/bin/env python3
"""Before/after table of hlo-fuse's effect over the corpus.

For every module (default: ../shared/corpus/*.hlo, testdata/models and
testdata/workloads), runs `hlo-fuse | llo-gen --stats=json` with the tools
of two builds and prints, per module, the kernel count and the total
estimated cycles (llo-gen --stats) of each, and marks the modules where the
second build gives more kernels or more cycles. Exit status 1 when any
module got worse (or failed in the second build only).

Usage: fusion_table.py BEFORE_BIN_DIR AFTER_BIN_DIR [module.hlo ...]
       [--target=v5e] [--jobs=2] [--slack=0.001]
"""
import argparse
import concurrent.futures
import glob
import json
import os
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measure(bin_dir, module, target):
    """(kernels, estimated cycles) of module through bin_dir's hlo-fuse and llo-gen, or None."""
    with tempfile.TemporaryDirectory() as tmp:
        fused = os.path.join(tmp, "fused.hlo")
        stats = os.path.join(tmp, "stats.json")
        try:
            subprocess.run([os.path.join(bin_dir, "hlo-fuse"), module, f"--target={target}", "-o", fused],
                           check=True, capture_output=True, timeout=600)
            subprocess.run([os.path.join(bin_dir, "llo-gen"), fused, f"--target={target}", "--schedule=none",
                            "--stats=json", f"--stats-file={stats}", "-o", os.devnull],
                           check=True, capture_output=True, timeout=600)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            return None
        kernels = json.load(open(stats))["kernels"]
        return len(kernels), sum(k["estimated_cycles"] for k in kernels)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("modules", nargs="*")
    ap.add_argument("--target", default="v5e")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--slack", type=float, default=0.001, help="relative cycle increase tolerated (default 0.1%%)")
    args = ap.parse_args()
    modules = args.modules or sorted(
        glob.glob(os.path.join(SRC, "..", "shared", "corpus", "*.hlo")) +
        glob.glob(os.path.join(SRC, "testdata", "models", "*.hlo")) +
        glob.glob(os.path.join(SRC, "testdata", "workloads", "*.hlo")))
    jobs = [(b, m) for m in modules for b in (args.before, args.after)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda j: measure(j[0], j[1], args.target), jobs))
    worse = 0
    print(f"{'module':48} {'kernels':>15} {'estimated cycles':>27}  change")
    for i, m in enumerate(modules):
        b, a = results[2 * i], results[2 * i + 1]
        name = os.path.basename(m)[:48]
        if a is None:
            mark = "FAILED" if b is not None else "fails in both"
            worse += b is not None
            print(f"{name:48} {'':>15} {'':>27}  {mark}")
            continue
        if b is None:
            print(f"{name:48} {'-':>6} -> {a[0]:<6} {'-':>12} -> {a[1]:<12.0f}  (failed before)")
            continue
        mark = ""
        if a[0] > b[0] or a[1] > b[1] * (1 + args.slack):
            mark = "WORSE"
            worse += 1
        elif a[0] < b[0] or a[1] < b[1] * (1 - args.slack):
            mark = "better"
        print(f"{name:48} {b[0]:>6} -> {a[0]:<6} {b[1]:>12.0f} -> {a[1]:<12.0f}  {mark}")
    print(f"{len(modules)} modules, {worse} worse")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
