#!/usr/bin/python3
"""Runs every example the documentation shows, so none can rot.

usage: run_doc_examples.py --source-dir=SRC --scratch=DIR [--tools-dir=DIR] [--list]

Examples are taken, as doctest takes them, from
  - the "Examples:" block of every tool's --help (every executable in the
    tools directory, so a new tool's examples are picked up when it is built),
  - the EXAMPLES section of every man page in man/*.1,
  - the indented code blocks of README.
A line is an example when its first word is a tool, a build/tools/ path or
one of SHELL_WORDS; in --help, the description after two or more spaces is
dropped. The examples of one source run in order (later ones may use what
earlier ones wrote), with bash, in a fresh directory holding the FIXTURES,
and each must exit 0.

Examples name files (model.hlo, kernel.tpu, x.npy, ...): FIXTURES says which
shipped file each name is, or which command makes it. An example that needs
a file no fixture provides fails with the tool's "cannot open file" error:
add the file to FIXTURES (or use a name that is there).
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

# name -> ("file", path relative to the source tree) or ("run", command run
# in the fixture directory once the files are there, in this order).
FIXTURES = [
    ("model.hlo", ("file", "testdata/examples/model.hlo")),
    ("m.hlo", ("file", "testdata/examples/m.hlo")),
    ("add.hlo", ("file", "testdata/examples/add.hlo")),
    ("tests.hlo", ("file", "testdata/examples/tests.hlo")),
    ("allreduce.hlo", ("file", "lit_tests/tpu-run/Inputs/allreduce.hlo")),
    ("pod.hlo", ("file", "testdata/examples/pod.hlo")),  # 8 chips (2 replicas x 4 partitions)
    ("kernel.llo", ("file", "testdata/llo/add.llo")),
    ("dump/module_0001.jit_train_step.before_optimizations.txt", ("file", "testdata/examples/model.hlo")),
    ("sharded.hlo", ("file", "lit_tests/hlo-partition/Inputs/mlp.hlo")),
    ("model.hlob", ("run", "hlo-parse model.hlo -o model.hlob")),
    ("kernel.tpu", ("run", "llo-asm kernel.llo -o kernel.tpu")),
    ("x.npy", ("npy", (8, 128))),  # m.hlo's parameter
    ("b.npy", ("npy", (2,))),  # add.hlo's second parameter
    ("y.npy", ("run", "tpu-run --interpret m.hlo --input=@x.npy --output=@y.npy")),
    # Two profiles of model.hlo (with and without hlo-fuse) for --profile-diff.
    ("a.json", ("run", "tpu-run model.hlo --seed=1 --profile=json --profile-file=a.json")),
    ("b.json", ("run", "tpu-run -O0 model.hlo --seed=1 --profile=json --profile-file=b.json")),
]

# Placeholders in the text of examples, and what they stand for here.
SUBSTITUTIONS = [
    ("/path/to/tpu-tools/", "{source}/"),
    ("/tmp/", "{scratch}/"),
    ("| less", "| cat"),
]

# Words that start an example besides the tools themselves.
SHELL_WORDS = {"cat", "printf", "make", "cmp", "apt-get", "cmake", "ctest"}
# Steps of README's set-up that build and test this very tree: the test runs
# inside their result, so they are skipped (.ci/run runs them verbatim).
SETUP_WORDS = {"apt-get", "cmake", "ctest"}


def tool_names(tools_dir):
    return sorted(
        name for name in os.listdir(tools_dir)
        if os.access(os.path.join(tools_dir, name), os.X_OK) and re.fullmatch(r"(hlo|llo|tpu)-[a-z-]+", name))


def is_example(line, tools):
    words = line.split()
    if not words:
        return False
    first = words[0]
    return first in tools or first in SHELL_WORDS or (first.startswith("build/tools/") and
                                                      os.path.basename(first) in tools)


def help_examples(tool, tools_dir, tools):
    out = subprocess.run([os.path.join(tools_dir, tool), "--help"], capture_output=True, text=True).stdout
    if "Examples:" not in out:
        return []
    examples = []
    for line in out.split("Examples:", 1)[1].splitlines():
        command = re.split(r"\s{2,}", line.strip())[0]
        if is_example(command, tools):
            examples.append(command)
    return examples


def roff_text(line):
    """The text of a man page line: requests (.B, .BR) give their words."""
    if line.startswith("."):
        request, _, rest = line.partition(" ")
        if request not in (".B", ".BR", ".I", ".IR", ".BI"):
            return ""
        line = rest
    for escape, text in (("\\-", "-"), ("\\(dq", '"'), ("\\e", "\\"), ("\\fB", ""), ("\\fR", ""), ("\\fI", ""),
                         ("\\fP", ""), ("\\&", "")):
        line = line.replace(escape, text)
    return line.strip()


def man_examples(page, tools):
    lines = open(page, encoding="utf-8").read().splitlines()
    examples, inside = [], False
    for line in lines:
        if line.startswith(".SH"):
            inside = line.split(None, 1)[1:] == ["EXAMPLES"]
            continue
        if inside:
            text = roff_text(line)
            if is_example(text, tools):
                examples.append(text)
    return examples


def readme_blocks(readme, tools):
    """Runs of lines indented by exactly four spaces, after a blank line."""
    blocks, block, previous_blank = [], None, True
    for line in open(readme, encoding="utf-8").read().splitlines():
        code = line.startswith("    ") and not line.startswith("     ")
        if code and (block is not None or previous_blank):
            block = block if block is not None else []
            block.append(line[4:])
        elif block is not None and line.strip():
            blocks.append(block)
            block = None
        previous_blank = not line.strip()
    if block is not None:
        blocks.append(block)
    result = []
    for block in blocks:
        examples = [line for line in block if is_example(line, tools)]
        if examples:
            result.append(examples)
    return result


def without_setup(command):
    """Drops the `apt-get ...`, `cmake ...` and `ctest ...` steps of an && chain."""
    steps = [s.strip() for s in command.split("&&")]
    kept = [s for s in steps if s.split()[0] not in SETUP_WORDS]
    return " && ".join(kept)


def write_npy(path, shape):
    """A float32 .npy with deterministic values in [-1, 1)."""
    count = 1
    for d in shape:
        count *= d
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{d}, " for d in shape)
    header += " " * (63 - (len(header) + 10) % 64) + "\n"
    values = [((i * 37) % 200) / 100.0 - 1.0 for i in range(count)]
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("ascii"))
        f.write(struct.pack(f"<{count}f", *values))


def make_fixtures(directory, source, env):
    os.makedirs(directory)
    os.makedirs(os.path.join(directory, "build"))
    # README's set-up runs build/tools/tpu-run on testdata/ from the top of the tree.
    os.symlink(os.path.dirname(shutil.which("hlo-parse", path=env["PATH"])), os.path.join(directory, "build", "tools"))
    os.symlink(os.path.join(source, "testdata"), os.path.join(directory, "testdata"))
    for name, (kind, what) in FIXTURES:
        path = os.path.join(directory, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if kind == "file":
            shutil.copy(os.path.join(source, what), path)
        elif kind == "npy":
            write_npy(path, what)
        else:
            subprocess.run(["bash", "-c", what], cwd=directory, env=env, check=True)


def run_source(label, examples, fixture_dir, scratch, source, env):
    directory = os.path.join(scratch, re.sub(r"[^A-Za-z0-9_.-]", "_", label))
    shutil.copytree(fixture_dir, directory, symlinks=True)
    failures = []
    for example in examples:
        command = without_setup(example)
        for placeholder, value in SUBSTITUTIONS:
            command = command.replace(placeholder, value.format(source=source, scratch=directory))
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=directory, env=env,
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            failures.append(f"{label}: `{example}` exited {proc.returncode}:\n{proc.stderr.strip()[:2000]}")
            break  # later examples of a source may depend on this one
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--scratch", required=True)
    parser.add_argument("--tools-dir", help="default: where hlo-parse is found on PATH")
    parser.add_argument("--list", action="store_true", help="print the examples found, run none")
    args = parser.parse_args()
    source = os.path.abspath(args.source_dir)
    tools_dir = os.path.abspath(args.tools_dir or os.path.dirname(shutil.which("hlo-parse")))
    tools = set(tool_names(tools_dir))
    env = dict(os.environ, PATH=tools_dir + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"), NO_COLOR="1")

    sources = []  # (label, examples)
    for tool in sorted(tools):
        sources.append((f"{tool} --help", help_examples(tool, tools_dir, tools)))
    for page in sorted(os.listdir(os.path.join(source, "man"))):
        if page.endswith(".1"):
            sources.append((f"man/{page}", man_examples(os.path.join(source, "man", page), tools)))
    for i, block in enumerate(readme_blocks(os.path.join(source, "README"), tools)):
        sources.append((f"README block {i + 1}", block))
    sources = [(label, examples) for label, examples in sources if examples]
    count = sum(len(examples) for _, examples in sources)
    if args.list:
        for label, examples in sources:
            print(f"{label}:")
            for example in examples:
                print(f"  {example}")
        return 0

    shutil.rmtree(args.scratch, ignore_errors=True)
    fixture_dir = os.path.join(args.scratch, "fixtures")
    make_fixtures(fixture_dir, source, env)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = pool.map(lambda s: run_source(s[0], s[1], fixture_dir, args.scratch, source, env), sources)
        failures = [f for result in results for f in result]
    for failure in failures:
        print(failure)
    print(f"{count} examples from {len(sources)} sources ({len(tools)} tools): "
          f"{'all passed' if not failures else f'{len(failures)} failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
