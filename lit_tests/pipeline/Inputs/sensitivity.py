"""Compares a compiled model's outputs with the interpreter's, measured
against the model's own sensitivity: the interpreter run again on the same
input with every element nudged by 2^-9 (half a bf16 ulp).

Deep bf16 models with random (elided) weights are chaotic: a sub-ulp change
of the input moves their outputs far more than any elementwise tolerance, so
an elementwise --check cannot pass for any bf16-accurate implementation.
What must hold is that the compiled program is much closer to the
interpreter than that perturbation moves the interpreter itself.

    sensitivity.py MAKE-INPUTS DIR SHAPE...     write DIR/x.npy and DIR/x2.npy
    sensitivity.py COMPARE DIR N                compare N results
"""
import sys

import numpy as np


def make_inputs(out, shape):
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    np.save(f"{out}/x.npy", x)
    nudge = rng.choice([-1.0, 1.0], x.shape) * 2.0**-9
    np.save(f"{out}/x2.npy", (x * (1 + nudge)).astype(np.float32))


def rel(a, b):
    return np.abs(a - b) / (1 + np.abs(b))


def compare(out, n):
    ok = True
    for k in range(n):
        ref = np.load(f"{out}/interp{k}.npy").astype(np.float64)
        compiled = rel(np.load(f"{out}/compiled{k}.npy").astype(np.float64), ref)
        nudged = rel(np.load(f"{out}/nudged{k}.npy").astype(np.float64), ref)
        cm, nm = np.median(compiled), np.median(nudged)
        cf, nf = (compiled > 0.05).mean(), (nudged > 0.05).mean()
        good = cm <= 0.25 * nm + 1e-6 and cf <= 0.5 * nf + 1e-6
        ok = ok and good
        print(f"result {k}: median relative error compiled {cm:.3g} vs nudged input {nm:.3g}; "
              f"share above 0.05 compiled {cf:.3f} vs nudged {nf:.3f}: {'ok' if good else 'TOO FAR'}")
    print("compiled closer than the model's own sensitivity" if ok else "compiled too far from the interpreter")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1] == "MAKE-INPUTS":
        make_inputs(sys.argv[2], [int(d) for d in sys.argv[3:]])
        sys.exit(0)
    sys.exit(compare(sys.argv[2], int(sys.argv[3])))
