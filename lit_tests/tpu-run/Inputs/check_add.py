"""check_add.py A B C: C must equal A + B exactly (f32 add is exact in both)."""
import sys
import numpy as np
a, b, c = (np.load(p) for p in sys.argv[1:4])
assert c.dtype == np.float32 and c.shape == a.shape, (c.dtype, c.shape)
np.testing.assert_array_equal(c, (a + b).astype(np.float32))
print("add matches numpy")
