#!/usr/bin/python3
"""Writes lit_tests/pipeline/: one end-to-end test per HLO program the
reference interpreter runs (the corpus modules with an interpreter test in
lit_tests/interpret/, testdata/models/*.hlo and the hand-written programs in
testdata/programs/*.hlo).

Each test compiles the program through the tool pipeline
(hlo-parse | llo-gen | llo-asm), runs the machine code on the simulator, and
runs `tpu-run --check`, which compiles the module again in memory, simulates
it and compares every result with the interpreter on the same seeded inputs
(tolerance from the precision of the module's dots; integers bit-exact).

Programs that do not compile (or match) yet get a negative test instead,
pinning the first error, probed with the tools of BUILD_DIR (default: build).
When a lowering lands the error changes or goes away and that test fails, so
the list cannot go stale: re-run this script and commit the result.

    utils/gen_pipeline_tests.py [BUILD_DIR]
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(os.path.dirname(ROOT), "shared", "corpus")
OUT = os.path.join(ROOT, "lit_tests", "pipeline")
INTERPRET_TESTS = os.path.join(ROOT, "lit_tests", "interpret")
# Probing one program may simulate a whole model; more than this is a hang.
PROBE_SECONDS = 300
# Modules whose elementwise --check cannot pass for any bf16-accurate
# compiler, and the test that checks them another way.
CHECKED_ELSEWHERE = {
    "ssd_mobilenet_tf.hlo": "chaotic bf16 network with random weights, compared with the interpreter "
                            "against its own sensitivity in ssd-mobilenet-sensitivity.test",
}

TEMPLATE = """# REQUIRES: hlo-parse, llo-gen, llo-asm, tpu-run
# {what}: compiled through the tool pipeline, run on the
# simulated chip, and compared with the reference interpreter (tpu-run --check).
# RUN: hlo-parse {path} | llo-gen | llo-asm -o %t.tpu
# RUN: tpu-run %t.tpu --seed=1 > %t.out
# RUN: tpu-run {path} --seed=1 --check --stats 2>&1 > /dev/null | FileCheck %s
# CHECK: check: {{{{[0-9]+ results? match(es)?}}}} the interpreter
"""

NOT_YET = """# REQUIRES: tpu-run
# {what}: tpu-run --check does not pass yet{why}:
# RUN: not tpu-run {path} --seed=1 --check 2>&1 | FileCheck %s
# CHECK: error: {reason}
"""


def programs():
    """(test name, lit path, file path) of every program the interpreter runs."""
    out = []
    for name in sorted(os.listdir(INTERPRET_TESTS)):
        m = re.fullmatch(r"corpus-(.*)\.test", name)
        if m and m.group(1) not in ("complete", "unsupported-custom-calls"):
            module = m.group(1) + ".hlo"
            out.append(("corpus-" + m.group(1), "%corpus/" + module, os.path.join(CORPUS, module)))
    models = os.path.join(ROOT, "testdata", "models")
    for name in sorted(os.listdir(models)):
        if name.endswith(".hlo"):
            out.append(("testdata-" + name[:-4], "%testdata/models/" + name, os.path.join(models, name)))
    hand = os.path.join(ROOT, "testdata", "programs")
    for name in sorted(os.listdir(hand)):
        if name.endswith(".hlo"):
            out.append(("program-" + name[:-4], "%testdata/programs/" + name, os.path.join(hand, name)))
    return out


def probe(build_dir, path):
    """None if `tpu-run --check` passes, else the first error line."""
    tool = os.path.join(build_dir, "tools", "tpu-run")
    try:
        r = subprocess.run([tool, path, "--seed=1", "--check"], capture_output=True, text=True,
                           timeout=PROBE_SECONDS, env=dict(os.environ, NO_COLOR="1"))
    except subprocess.TimeoutExpired:
        return f"tpu-run --check takes more than {PROBE_SECONDS} s"
    if r.returncode == 0:
        return None
    for line in r.stderr.splitlines():
        if "error:" in line:
            return re.sub(r"^.*?error: ", "", line).strip()
    return f"tpu-run exits with status {r.returncode}"


def main():
    build_dir = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
    os.makedirs(OUT, exist_ok=True)
    for old in os.listdir(OUT):
        if old.endswith(".test"):
            os.remove(os.path.join(OUT, old))
    failing = 0
    items = programs()
    for test, lit_path, path in items:
        reason = probe(build_dir, path)
        kind = {"corpus": "Corpus module ", "testdata": "Shipped model ", "program": "Test program "}
        what = kind[test.split("-")[0]] + os.path.basename(path)
        with open(os.path.join(OUT, test + ".test"), "w") as f:
            if reason:
                failing += 1
                why = CHECKED_ELSEWHERE.get(os.path.basename(path), "")
                # FileCheck reads {{ and [[ as patterns: pin the text before them.
                pinned = re.split(r"\{\{|\[\[", reason)[0].rstrip()
                f.write(NOT_YET.format(what=what, why=f" ({why})" if why else "", path=lit_path, reason=pinned))
            else:
                f.write(TEMPLATE.format(what=what, path=lit_path))
        print(f"{test}: {'not yet: ' + reason if reason else 'passes'}")
    print(f"{len(items)} tests written, {len(items) - failing} pass, {failing} pin why they do not compile yet")


if __name__ == "__main__":
    main()
