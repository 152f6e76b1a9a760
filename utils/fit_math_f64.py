#!/usr/bin/python3
"""Coefficients of llo-gen's f64 library math expansions
(src/codegen/kernels/math_f64.cpp), computed with exact rationals
(fractions) and 80-digit decimals, then rounded once to the nearest double
(float(Fraction) rounds correctly). No mpmath needed.

  taylor tables: the series' own coefficients as exact rationals (log's
      2/(2n+1), sin's and cos's +-1/n!, expm1's 1/n!, erf near 0);
  erfc: g(u) = erfc(1/u) e^(1/u^2) interpolated at Chebyshev points of
      u in [1/6, 1/0.84375] (degree 29; the next Chebyshev coefficient is
      below 1e-18), written as a polynomial of t = (u - mid) / half;
  atan, asin: (f(t) - t) / t^3 as a polynomial of z = t^2 on t in
      [0, 7/16] (degree 10) and [0, 1/2] (degree 13), interpolated at
      Chebyshev points of z; atan's reduction points' values as head + tail;
  payne: the bits of 2/pi for sin/cos/tan's Payne-Hanek reduction of huge
      arguments, from pi by Machin's formula in exact integer arithmetic
      (1600 bits; the table's floor is checked to be far from a rounding
      boundary), as 64-bit words after one word of leading zeros, and
      floor(pi/2 2^127) as two 64-bit words;
  hard: the doubles closest to a multiple of pi/2 (math_f64_test.cpp's hard
      cases for sin/cos/tan): for every exponent E, candidates m 2^E, m in
      [2^52, 2^53), from the continued fraction of 2^E 2/pi mod 1 (multiples
      of its last convergent denominators below 2^53 and the semiconvergents
      at the limit; it finds Kahan and McDonald's 6381956970095103 2^797),
      the 24 with the smallest |x 2/pi - n|, and their sin, cos and tan from
      the exact reduction (2400-bit pi) and 400-bit fixed-point series, as
      head + tail doubles (about 16 s).

Run with Debian's python3: utils/fit_math_f64.py [table ...]; prints C++
arrays (hexadecimal doubles, so the values are exact) and, for the fits,
the largest interpolation error found on a dense check grid.
"""
import sys
from decimal import Decimal as D, getcontext
from fractions import Fraction as F
from math import factorial

getcontext().prec = 80
EPS = D(10) ** -76


def arctan_small(x):
    """atan(x) for |x| < 1 by its alternating series."""
    x = D(x)
    s, t, k, x2 = D(0), x, 1, x * x
    while abs(t) > EPS:
        s += t / k
        t = -t * x2
        k += 2
    return s


PI = 16 * arctan_small(D(1) / 5) - 4 * arctan_small(D(1) / 239)
SQRT_PI = PI.sqrt()


def dcos(x):
    x = D(x)
    s, t, n = D(0), D(1), 0
    while abs(t) > EPS:
        s += t
        n += 2
        t = -t * x * x / (n * (n - 1))
    return s


def erf(x):
    """erf by its Taylor series, exact enough at 80 digits for |x| <= 6."""
    x = D(x)
    s, t, n, x2 = D(0), x, 0, x * x
    while True:
        term = t / (2 * n + 1)
        if n > 5 and abs(term) < EPS:
            break
        s += term if n % 2 == 0 else -term
        n += 1
        t = t * x2 / n
    return 2 * s / SQRT_PI


def chebyshev_fit(f, a, b, degree):
    """Interpolant of f at the Chebyshev points of [a, b], as monomial
    coefficients of t = (x - (a + b) / 2) / ((b - a) / 2) (exact rationals)."""
    n = degree + 1
    nodes = [dcos(PI * (k + D(1) / 2) / n) for k in range(n)]
    vals = [f((a + b) / 2 + (b - a) / 2 * t) for t in nodes]
    cheb = []
    for j in range(n):
        s = sum(vals[k] * dcos(PI * j * (k + D(1) / 2) / n) for k in range(n))
        cheb.append(F(s * 2 / n if j else s / n))
    # Chebyshev polynomials as monomials, T_k = 2t T_{k-1} - T_{k-2}.
    polys = [[F(1)], [F(0), F(1)]]
    for k in range(2, n):
        p = [F(0)] + [2 * c for c in polys[k - 1]]
        q = polys[k - 2] + [F(0)] * (len(p) - len(polys[k - 2]))
        polys.append([p[i] - q[i] for i in range(len(p))])
    mono = [F(0)] * n
    for k in range(n):
        for i, c in enumerate(polys[k]):
            mono[i] += cheb[k] * c
    return mono


def horner(coef, t):
    s = F(0)
    for c in reversed(coef):
        s = s * t + c
    return s


def g_erfc(u):
    x = 1 / D(u)
    return (1 - erf(x)) * (x * x).exp()


def taylor_tables():
    return {
        # log(1 + f) = f - s f + s R(s^2), s = f / (2 + f): R = sum 2/(2n+1) z^n, n = 1..11
        "kLogR": [F(2, 2 * n + 1) for n in range(1, 12)],
        # sin r = r + r z S(z): S = sum (-1)^n / (2n+1)! z^(n-1), n = 1..9
        "kSinS": [F((-1) ** n, factorial(2 * n + 1)) for n in range(1, 10)],
        # cos r = 1 - z/2 + z^2 C(z): C = sum (-1)^n / (2n)! z^(n-2), n = 2..9
        "kCosC": [F((-1) ** n, factorial(2 * n)) for n in range(2, 10)],
        # expm1 x = x + x^2 E(x): E = sum 1 / n! x^(n-2), n = 2..19 (|x| < 1)
        "kExpm1E": [F(1, factorial(n)) for n in range(2, 20)],
        # erf x = x + x P(x^2): P = 2/sqrt(pi) sum (-1)^n / (n! (2n+1)) z^n - 1, n = 0..17
        # (|x| < 0.84375; the constant term 2/sqrt(pi) - 1 rounds with a 9x smaller error)
        "kErfP": [F(D((-1) ** n) * 2 / SQRT_PI / (factorial(n) * (2 * n + 1))) - (1 if n == 0 else 0)
                  for n in range(18)],
    }


def erfc_fit():
    a, b = D(1) / 6, D(1) / D("0.84375")
    coef = chebyshev_fit(g_erfc, a, b, 29)
    worst = D(0)
    for k in range(301):
        t = D(-1) + D(2) * k / 300
        u = (a + b) / 2 + (b - a) / 2 * t
        want = g_erfc(u)
        got = horner([F(float(c)) for c in coef], F(t))
        got = D(got.numerator) / D(got.denominator)
        worst = max(worst, abs(got - want) / want)
    return coef, {"kErfcMid": (a + b) / 2, "kErfcHalf": (b - a) / 2}, worst


def arcsin_small(x):
    """asin(x) for |x| <= 1/2 by its series sum (2n)! / (4^n (n!)^2 (2n+1)) x^(2n+1)."""
    x = D(x)
    s, c, n, p = D(0), D(1), 0, x
    while abs(c * p) > EPS:
        s += c * p / (2 * n + 1)
        c = c * (2 * n + 1) / (2 * n + 2)
        n += 1
        p *= x * x
    return s


def odd_fit(f, tmax, degree):
    """(f(t) - t) / t^3 as a polynomial of z = t^2 on t in [0, tmax]: Chebyshev
    interpolation in z, re-expanded in z itself; and the largest relative error
    of the double-rounded coefficients on a check grid."""
    zmax = D(tmax) ** 2

    def h(z):
        t = D(z).sqrt()
        return (f(t) - t) / (t * t * t)

    h0 = h(D(10) ** -30)
    tc = chebyshev_fit(lambda z: h(z) if z > D(10) ** -30 else h0, D(0), zmax, degree)
    c = F(zmax) / 2
    mono = [F(0)] * len(tc)
    for k, a in enumerate(tc):  # sum tc_k ((z - c) / c)^k
        for i in range(k + 1):
            binom = factorial(k) // (factorial(i) * factorial(k - i))
            mono[i] += a * binom * (F(-1) ** (k - i)) / c**i
    worst = D(0)
    for k in range(1, 401):
        z = zmax * k / 400
        want = h(z)
        got = horner([F(float(m)) for m in mono], F(z))
        worst = max(worst, abs(D(got.numerator) / D(got.denominator) - want) / abs(want))
    return mono, worst


def atan_table():
    """atan of fdlibm's reduction points 1/2, 1, 3/2, inf as head + tail."""
    vals = [arctan_small(D(1) / 2), PI / 4, PI / 2 - arctan_small(D(2) / 3), PI / 2]
    hi = [float(v) for v in vals]
    lo = [float(v - D(h)) for v, h in zip(vals, hi)]
    return hi, lo


def pi_fixed(bits):
    """floor(pi 2^bits) up to a few units: Machin's formula in integers."""
    guard = 32
    one = 1 << (bits + guard)

    def arctan_inv(k):  # atan(1/k) 2^(bits+guard), truncated terms
        s, t, n, sign = 0, one // k, 1, 1
        while t:
            s += sign * (t // n)
            t //= k * k
            n += 2
            sign = -sign
        return s

    return (16 * arctan_inv(5) - 4 * arctan_inv(239)) >> guard


PAYNE_WORDS = 20  # one word of zeros, then 19 words of 2/pi's fraction bits


def payne_table():
    """2/pi = sum b_k 2^-k; the table is floor(2/pi 2^(64 (PAYNE_WORDS - 1))) as
    PAYNE_WORDS 64-bit words, most significant first (the first word is 0)."""
    bits = 64 * (PAYNE_WORDS - 1)
    prec = bits + 400
    pi = pi_fixed(prec)
    # 2/pi 2^bits = 2^(bits + prec + 1) / (pi 2^prec); pi is known to within
    # 2^-(prec - 8), so the floor is exact unless the remainder is that close
    # to 0 or to the divisor.
    t, rem = divmod(1 << (bits + prec + 1), pi)
    assert 2**-300 < F(rem, pi) < 1 - 2**-300, "2/pi table too close to a rounding boundary"
    # Cross-check the leading bits with the 80-digit decimal pi.
    approx = int(D(2) / PI * (D(2) ** 200))
    assert abs((t >> (bits - 200)) - approx) <= 1
    return [(t >> (64 * (PAYNE_WORDS - 1 - i))) & (2**64 - 1) for i in range(PAYNE_WORDS)], pi, prec


def payne_pio2(pi, prec):
    """floor(pi/2 2^127) as two 64-bit words, the high one first."""
    c = pi >> (prec - 126)
    return [c >> 64, c & (2**64 - 1)]


def hard_cases(count=24):
    prec = 2400
    pi = pi_fixed(prec)
    k = 2300  # 2/pi 2^k
    two_over_pi = (1 << (k + prec + 1)) // pi
    found = []
    for e in range(-52, 972):
        den_bits = k - e
        num = two_over_pi & ((1 << den_bits) - 1) if e >= 0 else two_over_pi
        dens = []
        a, b, q2, q1 = num, 1 << den_bits, 1, 0
        while b:
            ai, r = divmod(a, b)
            q = ai * q1 + q2
            if q >= 1 << 53:
                jmax = ((1 << 53) - 1 - q2) // q1 if q1 else 0
                dens += [j * q1 + q2 for j in range(max(1, jmax - 3), jmax + 1)]
                break
            dens.append(q)
            q2, q1, a, b = q1, q, b, r
        cands = set()
        for q in dens[-6:]:
            first = ((1 << 52) + q - 1) // q
            last = min(((1 << 53) - 1) // q, first + 40)
            cands.update(j * q for j in range(first, last + 1))
        for m in cands:
            if (1 << 52) <= m < (1 << 53):
                v = (m * num) % (1 << den_bits)
                found.append((F(min(v, (1 << den_bits) - v), 1 << den_bits), m, e))
    found.sort()
    rows = []
    fixed = 400
    one = 1 << fixed
    for _, m, e in found[:count]:
        x = F(m) * F(2) ** e
        xs = x * 2 ** prec  # x pi-units: n = round(x 2/pi)
        n = round(F(2) * xs / pi)
        r = x - F(n * pi, 2 ** (prec + 1))  # x - n pi/2
        rr = round(r * one)
        # sin and cos of rr 2^-fixed by their series in fixed point
        s_, c_, t, i = 0, 0, one, 0
        while t:
            if i % 2 == 0:
                c_ += t if i % 4 == 0 else -t
            else:
                s_ += t if i % 4 == 1 else -t
            i += 1
            t = t * rr // (one * i)
        q = n % 4
        sin_x, cos_x = [(s_, c_), (c_, -s_), (-s_, -c_), (-c_, s_)][q]
        vals = [F(sin_x, one), F(cos_x, one), F(sin_x, cos_x)]
        out = [float(x).hex()]
        for v in vals:
            h = float(v)
            out += [h.hex(), float(v - F(h)).hex()]
        rows.append("{" + ", ".join(out) + "}")
    return rows


def cpp(name, values):
    body = ", ".join(float(v).hex() for v in values)
    return f"constexpr double {name}[] = {{{body}}};"


def main():
    wanted = set(sys.argv[1:]) or {"taylor", "erfc", "atan", "asin", "payne"}
    if "taylor" in wanted:
        for name, vals in taylor_tables().items():
            print(cpp(name, vals))
    if "erfc" in wanted:
        coef, consts, worst = erfc_fit()
        print(cpp("kErfcG", coef))
        for k, v in consts.items():
            print(f"constexpr double {k} = {float(v).hex()};")
        print(f"// erfc fit: largest relative error on the check grid {float(worst):.3g}")
    if "atan" in wanted:
        coef, worst = odd_fit(arctan_small, D(7) / 16, 10)
        print(cpp("kAtanQ", coef))
        print(f"// atan fit: largest relative error of (atan(t) - t) / t^3 {float(worst):.3g}")
        hi, lo = atan_table()
        print(cpp("kAtanHi", hi))
        print(cpp("kAtanLo", lo))
    if "asin" in wanted:
        coef, worst = odd_fit(arcsin_small, D(1) / 2, 13)
        print(cpp("kAsinQ", coef))
        print(f"// asin fit: largest relative error of (asin(t) - t) / t^3 {float(worst):.3g}")
    if "hard" in wanted:
        print("// x, sin x, cos x, tan x (head, tail)")
        print("const TrigHardCase kTrigHardCases[] = {")
        for row in hard_cases():
            print(f"    {row},")
        print("};")
    if "payne" in wanted:
        words, pi, prec = payne_table()
        body = ", ".join(f"0x{w:016x}ull" for w in words)
        print(f"constexpr uint64_t kTwoOverPiWords[] = {{{body}}};")
        body = ", ".join(f"0x{w:016x}ull" for w in payne_pio2(pi, prec))
        print(f"constexpr uint64_t kPio2Fixed[] = {{{body}}};")


if __name__ == "__main__":
    main()
