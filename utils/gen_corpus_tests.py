#!/usr/bin/python3
"""Writes one lit test per corpus module into lit_tests/hlo-parse/corpus/.

Each test parses and verifies the module, checks that printing is a fixed
point, and that text -> .hlob -> text gives identical text and identical
bytes. lit_tests/hlo-parse/corpus-complete.test fails when a corpus module
has no test, so re-run this script when the corpus grows.
"""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(os.path.dirname(ROOT), "shared", "corpus")
OUT = os.path.join(ROOT, "lit_tests", "hlo-parse", "corpus")

TEMPLATE = """# REQUIRES: hlo-parse
# Corpus module {name}: parse + verify, print fixed point, binary round trip.
# RUN: hlo-parse %corpus/{name} -o %t.1.hlo
# RUN: hlo-parse %t.1.hlo -o %t.2.hlo
# RUN: cmp %t.1.hlo %t.2.hlo
# RUN: hlo-parse %corpus/{name} -o %t.hlob
# RUN: hlo-parse %t.hlob -o %t.3.hlo
# RUN: cmp %t.1.hlo %t.3.hlo
# RUN: hlo-parse %t.1.hlo --emit=binary -o %t.a.hlob
# RUN: hlo-parse %t.3.hlo --emit=binary -o %t.b.hlob
# RUN: cmp %t.a.hlob %t.b.hlob
"""

def main():
    os.makedirs(OUT, exist_ok=True)
    names = sorted(n for n in os.listdir(CORPUS) if n.endswith(".hlo"))
    for name in names:
        with open(os.path.join(OUT, name[:-4] + ".test"), "w") as f:
            f.write(TEMPLATE.format(name=name))
    print(f"{len(names)} tests written")

if __name__ == "__main__":
    main()
