# Regenerates the .npy fixtures read by src/support/npy_test.cpp:
#   /usr/bin/python3 testdata/eval/npy/make_fixtures.py
# Each array is arange(6) reshaped to (2, 3) in the named dtype (bool: x % 2).
import os
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
types = ["bool", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]
for t in types:
    base = np.arange(6).reshape(2, 3)
    a = (base % 2).astype(bool) if t == "bool" else base.astype(t)
    if t.startswith("c"):
        a = a + 1j * a.astype(t)
    if t == "i1":
        a[0, 0] = -7
    np.save(os.path.join(here, f"le_{t}.npy"), a)
    if t != "bool" and t not in ("i1", "u1"):
        np.save(os.path.join(here, f"be_{t}.npy"), a.astype(a.dtype.newbyteorder(">")))
with open(os.path.join(here, "v2_f4.npy"), "wb") as f:
    np.lib.format.write_array(f, np.arange(6, dtype="f4").reshape(2, 3), version=(2, 0))
with open(os.path.join(here, "v3_f4.npy"), "wb") as f:
    np.lib.format.write_array(f, np.arange(6, dtype="f4").reshape(2, 3), version=(3, 0))
np.save(os.path.join(here, "fortran_f4.npy"), np.asfortranarray(np.arange(6, dtype="f4").reshape(2, 3)))
np.save(os.path.join(here, "scalar_f8.npy"), np.float64(2.5))
np.save(os.path.join(here, "empty_f4.npy"), np.zeros((0, 4), "f4"))
np.save(os.path.join(here, "object.npy"), np.array([1, "a"], dtype=object), allow_pickle=True)
np.save(os.path.join(here, "structured.npy"), np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")]))
