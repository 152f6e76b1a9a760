# Writes an HLO module with N f32[8] constants (one HBM buffer each), added
# in a chain: python many_constants.py N
import sys

n = int(sys.argv[1])
out = ["HloModule many_constants", "ENTRY main {", "  p = f32[8] parameter(0)"]
prev = "p"
for i in range(n):
    out.append(f"  k{i} = f32[8] constant({{{i}, 1, 2, 3, 4, 5, 6, 7}})")
    out.append(f"  a{i} = f32[8] add({prev}, k{i})")
    prev = f"a{i}"
out.append(f"  ROOT r = f32[8] negate({prev})")
out.append("}")
print("\n".join(out))
