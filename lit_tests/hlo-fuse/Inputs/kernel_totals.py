"""Prints the kernel count of each llo-gen --stats=json file (named by its
stem's last dotted part), then whether the second's total estimated cycles
do not exceed the third's."""
import json
import sys

totals = []
for path in sys.argv[1:]:
    kernels = json.load(open(path))["kernels"]
    name = path.rsplit(".", 2)[-2]
    print(f"{name}: {len(kernels)} kernels")
    totals.append(sum(k["estimated_cycles"] for k in kernels))
print(f"fused cycles <= xla cycles: {totals[1] <= totals[2]}")
