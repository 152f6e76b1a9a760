#!/usr/bin/python3
"""usage: fake_bin.py DIR [TOOL...]

Fills DIR with links to the real tools (found on PATH) and, for each TOOL
named (hlo-partition, hlo-layout, hlo-fuse), a link to that tool when it is
on PATH, else to hlo-parse under that name: an identity stage, so the chain
Makefile.inc builds can be tested before (and whether or not) the real tools
exist."""
import os
import shutil
import sys

directory, fakes = sys.argv[1], sys.argv[2:]
os.makedirs(directory, exist_ok=True)
for tool in ["hlo-parse", "llo-gen", "llo-asm", "tpu-run"] + fakes:
    link = os.path.join(directory, tool)
    if os.path.lexists(link):
        os.remove(link)
    real = shutil.which(tool) or shutil.which("hlo-parse")
    os.symlink(real, link)
