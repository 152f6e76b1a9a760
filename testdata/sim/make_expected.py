#!/usr/bin/python3
"""Writes inputs and numpy-computed expected outputs for the simulator's
kernel tests into the directory given as argv[1] (.npy files):
  matmul_a.npy (bf16 bits as uint16), matmul_b.npy, matmul_c.npy (f32, a@b in f64 rounded)
  ew_a.npy, ew_b.npy, ew_out.npy       out = max(a*b + a, 0)
  rowsum_x.npy, rowsum_out.npy         out = x.sum(axis=1)
  xpose_x.npy, xpose_y.npy             y = x.T
Sizes are fixed here and in sim_numpy_test.cpp."""
import sys
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(1234)


def to_bf16_bits(x):
    """Round f32 to bf16 (nearest even), returned as uint16 bits."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


M, N, K = 128, 1024, 512
a = to_bf16_bits(rng.uniform(-1, 1, (M, K)).astype(np.float32))
b = to_bf16_bits(rng.uniform(-1, 1, (K, N)).astype(np.float32))
c = (bf16_to_f32(a).astype(np.float64) @ bf16_to_f32(b).astype(np.float64)).astype(np.float32)
np.save(f"{out}/matmul_a.npy", a)
np.save(f"{out}/matmul_b.npy", b)
np.save(f"{out}/matmul_c.npy", c)

n = 3 * 8192
ea = rng.standard_normal(n).astype(np.float32)
eb = rng.standard_normal(n).astype(np.float32)
np.save(f"{out}/ew_a.npy", ea)
np.save(f"{out}/ew_b.npy", eb)
np.save(f"{out}/ew_out.npy", np.maximum(ea * eb + ea, np.float32(0)))

x = rng.standard_normal((40, 640)).astype(np.float32)
np.save(f"{out}/rowsum_x.npy", x)
np.save(f"{out}/rowsum_out.npy", x.sum(axis=1, dtype=np.float32))

t = rng.standard_normal((256, 384)).astype(np.float32)
np.save(f"{out}/xpose_x.npy", t)
np.save(f"{out}/xpose_y.npy", np.ascontiguousarray(t.T))
