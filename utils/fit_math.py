#!/usr/bin/python3
"""Fits the polynomial coefficients of llo-gen's f32 math expansions
(src/codegen/kernels/math.cpp) and measures them evaluated in f32.

    f(t) = t + t * z * P(z),  z = t * t

P is fitted by weighted least squares on Chebyshev points of the z range,
weighted by z (the error of P enters the result scaled by z), rounded to
f32, and the result evaluated with f32 Horner steps against float64 numpy.
Run with Debian's python3 (numpy): utils/fit_math.py [atan|asin] [degree].
"""
import sys
import numpy as np

FUNCS = {
    # name: (function, t range upper end)
    "atan": (np.arctan, np.tan(np.pi / 8)),
    "asin": (np.arcsin, 0.5),
}


def fit(name, degree):
    f, hi = FUNCS[name]
    zmax = hi * hi
    k = np.arange(4000)
    z = zmax * (1 - np.cos(np.pi * (k + 0.5) / len(k))) / 2  # Chebyshev points on [0, zmax]
    z = z[z > 1e-12]
    t = np.sqrt(z)
    g = (f(t) - t) / (t * z)
    a = np.vander(z, degree + 1, increasing=True)
    w = z
    coef, *_ = np.linalg.lstsq(a * w[:, None], g * w, rcond=None)
    return coef.astype(np.float32)


def evaluate(name, coef):
    f, hi = FUNCS[name]
    t = np.linspace(0, hi, 2000001, dtype=np.float64).astype(np.float32)
    t = t[t > 0]
    z = t * t
    p = np.full_like(t, coef[-1])
    for c in coef[-2::-1]:
        p = (p * z + c).astype(np.float32)
    r = (t + (t * z).astype(np.float32) * p).astype(np.float32)
    want = f(t.astype(np.float64))
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.max(np.abs(r - want) / ulp)


def main():
    names = [sys.argv[1]] if len(sys.argv) > 1 else list(FUNCS)
    for name in names:
        degrees = [int(sys.argv[2])] if len(sys.argv) > 2 else range(3, 8)
        for d in degrees:
            c = fit(name, d)
            print(f"{name} degree {d}: max {evaluate(name, c):.3f} ulps; coefficients "
                  + ", ".join(f"{float(x)!r}f" for x in c))


if __name__ == "__main__":
    main()
