"""Checks that .npy files, given in pairs, are bit-identical and all finite."""
import sys

import numpy as np

paths = sys.argv[1:]
for a, b in zip(paths[0::2], paths[1::2]):
    x, y = np.load(a), np.load(b)
    if x.shape != y.shape or x.tobytes() != y.tobytes():
        sys.exit(f"{a} and {b} differ")
    if not np.isfinite(x).all():
        sys.exit(f"{a} has non-finite values")
print(f"{len(paths) // 2} pairs identical and finite")
