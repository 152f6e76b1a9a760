#!/usr/bin/python3
"""usage: fresh_dir.py DIR MODEL.hlo MAKEFILE_INC

Makes DIR afresh with MODEL.hlo copied in as model.hlo and the README's
Makefile: `include MAKEFILE_INC` and `all: model.tpu`."""
import os
import shutil
import sys

directory, model, makefile_inc = sys.argv[1:4]
shutil.rmtree(directory, ignore_errors=True)
os.makedirs(directory)
shutil.copy(model, os.path.join(directory, "model.hlo"))
with open(os.path.join(directory, "Makefile"), "w") as f:
    f.write(f"include {makefile_inc}\nall: model.tpu\n")
