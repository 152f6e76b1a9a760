#!/usr/bin/python3
"""Oracle tests: the reference interpreter against numpy.

For every case: seeded random inputs (plus the edge cases of the opset spec)
are written as .npy, the HLO module as text, `tpu-run --interpret` evaluates
it, and its .npy outputs are compared with numpy's answer. Integers and
exact ops compare bit-exactly; transcendental floats with the tolerance
given per case (numpy computes in float64, then rounds to float32).

  /usr/bin/python3 src/eval/oracle/oracle.py --tool build-eval/tools/tpu-run [--filter dot] [--keep DIR]
  /usr/bin/python3 src/eval/oracle/oracle.py --dry-run   # generate only
  /usr/bin/python3 src/eval/oracle/oracle.py --compiled --filter c64-,c128-   # llo-gen + simulator instead

Exit status 0 when every case matches, 1 otherwise.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

NP_TO_HLO = {
    np.dtype("bool"): "pred", np.dtype("int8"): "s8", np.dtype("int16"): "s16", np.dtype("int32"): "s32",
    np.dtype("int64"): "s64", np.dtype("uint8"): "u8", np.dtype("uint16"): "u16", np.dtype("uint32"): "u32",
    np.dtype("uint64"): "u64", np.dtype("float16"): "f16", np.dtype("float32"): "f32",
    np.dtype("float64"): "f64", np.dtype("complex64"): "c64", np.dtype("complex128"): "c128",
}

EXACT = (0.0, 0.0)
TRANSCENDENTAL = (2e-6, 1e-6)  # (rtol, atol) against float64 numpy


def shape_str(dtype, dims):
    t = dtype if isinstance(dtype, str) else NP_TO_HLO[np.dtype(dtype)]
    layout = "{" + ",".join(str(i) for i in reversed(range(len(dims)))) + "}" if dims else ""
    return f"{t}[{','.join(str(d) for d in dims)}]{layout}"


def sh(a):
    return shape_str(a.dtype, a.shape)


class Case:
    def __init__(self, name, hlo, inputs, expected, tol=EXACT, flags=()):
        self.name, self.hlo, self.inputs, self.tol, self.flags = name, hlo, inputs, tol, list(flags)
        self.expected = expected if isinstance(expected, list) else [expected]


def module(body, extra=""):
    return f"HloModule m\n\n{extra}ENTRY main {{\n{body}\n}}\n"


def params(inputs):
    return "\n".join(f"  p{i} = {sh(a)} parameter({i})" for i, a in enumerate(inputs))


RNG = np.random.default_rng(1234)


def floats(*dims, lo=-4.0, hi=4.0, dtype=np.float32):
    return RNG.uniform(lo, hi, size=dims).astype(dtype)


def ints(*dims, dtype=np.int32, lo=-100, hi=100):
    return RNG.integers(lo, hi, size=dims).astype(dtype)


F32_EDGES = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1e-40, np.inf, -np.inf, np.nan], np.float32)


def with_edges(a):
    flat = a.reshape(-1).copy()
    flat[: len(F32_EDGES)] = F32_EDGES[: len(flat)]
    return flat.reshape(a.shape)


def to32(x):
    return np.asarray(x).astype(np.float32)


def erf64(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def round_afz(x):
    # Keeps the sign of zero results (round(-0.4) = -0.0), as IEEE rounding does.
    return np.where(np.isfinite(x), np.copysign(np.floor(np.abs(x) + 0.5), x), x)


def unary_cases():
    out = []
    x = with_edges(floats(4, 8))
    pos = floats(4, 8, lo=0.01, hi=10)
    unit = floats(4, 8, lo=-0.99, hi=0.99)
    d = x.astype(np.float64)
    err = np.seterr(all="ignore")
    table = [
        ("abs", x, np.abs(x), EXACT),
        ("negate", x, -x, EXACT),
        ("exponential", x, to32(np.exp(d)), TRANSCENDENTAL),
        ("exponential-minus-one", x, to32(np.expm1(d)), TRANSCENDENTAL),
        ("log", pos, to32(np.log(pos.astype(np.float64))), TRANSCENDENTAL),
        ("log-plus-one", pos, to32(np.log1p(pos.astype(np.float64))), TRANSCENDENTAL),
        ("sqrt", pos, np.sqrt(pos), EXACT),
        ("rsqrt", pos, to32(1 / np.sqrt(pos.astype(np.float64))), TRANSCENDENTAL),
        ("cbrt", x, to32(np.cbrt(d)), TRANSCENDENTAL),
        ("tanh", x, to32(np.tanh(d)), TRANSCENDENTAL),
        ("logistic", x, to32(1 / (1 + np.exp(-d))), TRANSCENDENTAL),
        ("sine", x, to32(np.sin(d)), TRANSCENDENTAL),
        ("cosine", x, to32(np.cos(d)), TRANSCENDENTAL),
        ("tan", unit, to32(np.tan(unit.astype(np.float64))), TRANSCENDENTAL),
        ("atan", x, to32(np.arctan(d)), TRANSCENDENTAL),
        ("erf", x, to32(erf64(d)), TRANSCENDENTAL),
        ("floor", x, np.floor(x), EXACT),
        ("ceil", x, np.ceil(x), EXACT),
        ("round-nearest-even", x, np.round(x), EXACT),
        ("round-nearest-afz", x, round_afz(x).astype(np.float32), EXACT),
        ("sign", x, np.where(x == 0, x, np.sign(x)), EXACT),  # sign(-0) = -0
    ]
    np.seterr(**err)
    for op, a, e, tol in table:
        body = params([a]) + f"\n  ROOT r = {sh(e)} {op}(p0)"
        with np.errstate(all="ignore"):
            out.append(Case(f"unary-{op}", module(body), [a], e, tol))
    body = params([x]) + f"\n  ROOT r = {shape_str('pred', x.shape)} is-finite(p0)"
    out.append(Case("unary-is-finite", module(body), [x], np.isfinite(x)))
    i = ints(4, 8, dtype=np.int32, lo=-2**31, hi=2**31 - 1)
    i.reshape(-1)[:3] = [0, -2**31, -1]
    u = i.view(np.uint32)
    clz = np.array([32 - int(v).bit_length() for v in u.reshape(-1)], np.int32).reshape(i.shape)
    pop = np.array([bin(int(v)).count("1") for v in u.reshape(-1)], np.int32).reshape(i.shape)
    for op, e in [("abs", np.abs(i)), ("negate", -i), ("not", ~i), ("count-leading-zeros", clz),
                  ("popcnt", pop), ("sign", np.sign(i))]:
        body = params([i]) + f"\n  ROOT r = {sh(e)} {op}(p0)"
        with np.errstate(all="ignore"):
            out.append(Case(f"unary-s32-{op}", module(body), [i], e))
    return out


def int_div(a, b, signed=True):
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    with np.errstate(all="ignore"):
        q = np.where(b64 == 0, -1, np.trunc(a64 / np.where(b64 == 0, 1, b64))).astype(np.int64)
    if signed:
        q = np.where((a64 == np.iinfo(a.dtype).min) & (b64 == -1), np.iinfo(a.dtype).min, q)
    return q.astype(a.dtype) if signed else np.where(b == 0, np.iinfo(a.dtype).max, a // np.where(b == 0, 1, b)).astype(a.dtype)


def int_rem(a, b):
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    safe = np.where(b64 == 0, 1, b64)
    r = np.fmod(a64, safe)
    r = np.where(b64 == 0, a64, r)
    r = np.where(b64 == -1, 0, r)
    return r.astype(a.dtype)


def shifts(a, s, kind):
    bits = a.dtype.itemsize * 8
    u = a.view(np.dtype(f"u{a.dtype.itemsize}")).astype(np.uint64)
    amt = s.view(np.dtype(f"u{a.dtype.itemsize}")).astype(np.uint64)
    big = amt >= bits
    amt_c = np.where(big, 0, amt)
    mask = (1 << bits) - 1
    if kind == "shift-left":
        r = np.where(big, 0, (u << amt_c) & np.uint64(mask))
    elif kind == "shift-right-logical":
        r = np.where(big, 0, u >> amt_c)
    else:
        sa = a.astype(np.int64)
        r = np.where(big, np.where(sa < 0, -1, 0), sa >> amt_c.astype(np.int64))
        return r.astype(a.dtype)
    return r.astype(np.dtype(f"u{a.dtype.itemsize}")).view(a.dtype)


def binary_cases():
    out = []
    a = with_edges(floats(4, 8))
    b = floats(4, 8)
    b.reshape(-1)[-4:] = [np.nan, 0.0, -0.0, np.inf]
    d = a.astype(np.float64), b.astype(np.float64)
    pa = floats(4, 8, lo=0.1, hi=3)
    with np.errstate(all="ignore"):
        table = [
            ("add", a, b, a + b, EXACT), ("subtract", a, b, a - b, EXACT), ("multiply", a, b, a * b, EXACT),
            ("divide", a, b, a / b, EXACT), ("maximum", a, b, np.maximum(a, b), EXACT),
            ("minimum", a, b, np.minimum(a, b), EXACT),
            ("power", pa, b, to32(np.power(pa.astype(np.float64), d[1])), TRANSCENDENTAL),
            ("remainder", a, b, np.fmod(a, b), EXACT),
            ("atan2", a, b, to32(np.arctan2(d[0], d[1])), TRANSCENDENTAL),
        ]
    for op, x, y, e, tol in table:
        body = params([x, y]) + f"\n  ROOT r = {sh(e)} {op}(p0, p1)"
        out.append(Case(f"binary-f32-{op}", module(body), [x, y], e, tol))
    x = ints(4, 8, lo=-2**31, hi=2**31 - 1)
    y = ints(4, 8, lo=-40, hi=40)
    x.reshape(-1)[:4] = [-2**31, 7, -7, 5]
    y.reshape(-1)[:4] = [-1, 0, 2, 33]
    with np.errstate(all="ignore"):
        itable = [
            ("add", x + y), ("subtract", x - y), ("multiply", x * y), ("divide", int_div(x, y)),
            ("remainder", int_rem(x, y)), ("maximum", np.maximum(x, y)), ("minimum", np.minimum(x, y)),
            ("and", x & y), ("or", x | y), ("xor", x ^ y),
            ("shift-left", shifts(x, y, "shift-left")), ("shift-right-logical", shifts(x, y, "shift-right-logical")),
            ("shift-right-arithmetic", shifts(x, y, "shift-right-arithmetic")),
        ]
    for op, e in itable:
        body = params([x, y]) + f"\n  ROOT r = {sh(e)} {op}(p0, p1)"
        out.append(Case(f"binary-s32-{op}", module(body), [x, y], e.astype(np.int32)))
    ux = x.view(np.uint32)
    uy = y.view(np.uint32) & np.uint32(63)
    uy.reshape(-1)[:2] = [0, 5]
    with np.errstate(all="ignore"):
        udiv = np.where(uy == 0, np.uint32(0xFFFFFFFF), ux // np.where(uy == 0, 1, uy)).astype(np.uint32)
        urem = np.where(uy == 0, ux, ux % np.where(uy == 0, 1, uy)).astype(np.uint32)
    for op, e in [("divide", udiv), ("remainder", urem), ("shift-right-logical", shifts(ux, uy, "shift-right-logical"))]:
        body = params([ux, uy]) + f"\n  ROOT r = {sh(e)} {op}(p0, p1)"
        out.append(Case(f"binary-u32-{op}", module(body), [ux, uy], e))
    base = ints(16, lo=-3, hi=4)
    ex = ints(16, lo=-2, hi=9)
    pw = np.array([1 if (e < 0 and b == 1) else ((-1) ** (-e) if (e < 0 and b == -1) else (0 if e < 0 else b ** e))
                   for b, e in zip(base, ex)], np.int32)
    body = params([base, ex]) + f"\n  ROOT r = {sh(pw)} power(p0, p1)"
    out.append(Case("binary-s32-power", module(body), [base, ex], pw))
    return out


def total_order_key(x):
    i = x.view(np.int32).astype(np.int64)
    return np.where(i < 0, i ^ 0x7FFFFFFF, i)


def compare_cases():
    out = []
    a = with_edges(floats(4, 8))
    b = a.copy()
    b.reshape(-1)[12:] = floats(20)
    b.reshape(-1)[0] = -0.0
    dirs = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
            "GE": np.greater_equal}
    for dname, f in dirs.items():
        with np.errstate(all="ignore"):
            e = f(a, b)
        body = params([a, b]) + f"\n  ROOT r = {shape_str('pred', a.shape)} compare(p0, p1), direction={dname}"
        out.append(Case(f"compare-f32-{dname}", module(body), [a, b], e))
        e = f(total_order_key(a), total_order_key(b))
        body = params([a, b]) + (f"\n  ROOT r = {shape_str('pred', a.shape)} compare(p0, p1), direction={dname}, "
                                 "type=TOTALORDER")
        out.append(Case(f"compare-f32-totalorder-{dname}", module(body), [a, b], e))
    x, y = ints(32, lo=-5, hi=5), ints(32, lo=-5, hi=5)
    for dname, f in dirs.items():
        body = params([x, y]) + f"\n  ROOT r = {shape_str('pred', x.shape)} compare(p0, p1), direction={dname}"
        out.append(Case(f"compare-s32-{dname}", module(body), [x, y], f(x, y)))
        ux, uy = x.view(np.uint32), y.view(np.uint32)
        body = params([ux, uy]) + f"\n  ROOT r = {shape_str('pred', x.shape)} compare(p0, p1), direction={dname}"
        out.append(Case(f"compare-u32-{dname}", module(body), [ux, uy], f(ux, uy)))
    return out


def f32_to_int(x, dtype):
    # XLA's convert: truncate toward zero, saturate, NaN -> 0 (exact Python ints).
    info = np.iinfo(dtype)
    vals = []
    for v in x.reshape(-1).astype(np.float64):
        if math.isnan(v):
            vals.append(0)
        elif math.isinf(v):
            vals.append(info.max if v > 0 else info.min)
        else:
            vals.append(min(max(int(v), info.min), info.max))
    return np.array(vals, dtype=dtype).reshape(x.shape)


def bf16_round(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    out = r.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, out)


def conversion_cases():
    out = []
    x = with_edges(floats(4, 8, lo=-3e9, hi=3e9))
    x.reshape(-1)[12:16] = [2.7, -2.7, 300.5, -129.5]
    for t, dt in [("s32", np.int32), ("s8", np.int8), ("u8", np.uint8), ("u32", np.uint32), ("s64", np.int64)]:
        e = f32_to_int(x, dt)
        body = params([x]) + f"\n  ROOT r = {sh(e)} convert(p0)"
        out.append(Case(f"convert-f32-{t}", module(body), [x], e))
    i = ints(32, lo=-2**31, hi=2**31 - 1)
    e = i.astype(np.float32)
    out.append(Case("convert-s32-f32", module(params([i]) + f"\n  ROOT r = {sh(e)} convert(p0)"), [i], e))
    e = i.astype(np.int8)
    out.append(Case("convert-s32-s8", module(params([i]) + f"\n  ROOT r = {sh(e)} convert(p0)"), [i], e))
    e = (x != 0)
    out.append(Case("convert-f32-pred", module(params([x]) + f"\n  ROOT r = {shape_str('pred', x.shape)} convert(p0)"),
                    [x], e))
    h = floats(32, lo=-70000, hi=70000)
    with np.errstate(over="ignore"):
        e = h.astype(np.float16)
    out.append(Case("convert-f32-f16", module(params([h]) + f"\n  ROOT r = {sh(e)} convert(p0)"), [h], e))
    # bf16 round trip: convert to bf16 and back to f32 (RNE).
    body = params([h]) + f"\n  c = {shape_str('bf16', h.shape)} convert(p0)\n  ROOT r = {sh(h)} convert(c)"
    out.append(Case("convert-f32-bf16-f32", module(body), [h], bf16_round(h)))
    e = x.view(np.int32)
    out.append(Case("bitcast-convert-f32-s32", module(params([x]) + f"\n  ROOT r = {sh(e)} bitcast-convert(p0)"),
                    [x], e))
    body = params([h]) + f"\n  ROOT r = {sh(h)} reduce-precision(p0), exponent_bits=8, mantissa_bits=7"
    out.append(Case("reduce-precision-bf16", module(body), [h], bf16_round(h)))
    return out


def data_movement_cases():
    out = []
    a = floats(2, 3, 4)
    e = np.transpose(a, (2, 0, 1))
    out.append(Case("transpose", module(params([a]) + f"\n  ROOT r = {sh(e)} transpose(p0), dimensions={{2,0,1}}"),
                    [a], e))
    e = a.reshape(6, 4)
    out.append(Case("reshape", module(params([a]) + f"\n  ROOT r = {sh(e)} reshape(p0)"), [a], e))
    out.append(Case("copy", module(params([a]) + f"\n  ROOT r = {sh(a)} copy(p0)"), [a], a))
    v = floats(3)
    e = np.broadcast_to(v[None, :, None], (2, 3, 4)).copy()
    out.append(Case("broadcast", module(params([v]) + f"\n  ROOT r = {sh(e)} broadcast(p0), dimensions={{1}}"),
                    [v], e))
    e = a[:, 1:3, 0:4:3]
    out.append(Case("slice", module(params([a]) + f"\n  ROOT r = {sh(e)} slice(p0), slice={{[0:2], [1:3], [0:4:3]}}"),
                    [a], e))
    e = a[:, ::-1, ::-1]
    out.append(Case("reverse", module(params([a]) + f"\n  ROOT r = {sh(e)} reverse(p0), dimensions={{1,2}}"), [a], e))
    b = floats(2, 2, 4)
    e = np.concatenate([a, b], axis=1)
    out.append(Case("concatenate", module(params([a, b]) + f"\n  ROOT r = {sh(e)} concatenate(p0, p1), dimensions={{1}}"),
                    [a, b], e))
    m = floats(3, 4)
    pv = np.array(9.5, np.float32)
    # low 1 / high -1 / interior 1 on dim 0; low -1 / high 2 / interior 0 on dim 1.
    inter = np.full((5, 4), 9.5, np.float32)
    inter[::2] = m
    e = np.full((6, 5), 9.5, np.float32)
    e[1:6, 0:3] = inter[0:5, 1:4]
    e = e[0:5]
    body = params([m, pv]) + f"\n  ROOT r = {sh(e)} pad(p0, p1), padding=1_-1_1x-1_2"
    out.append(Case("pad-negative-interior", module(body), [m, pv], e))
    e = np.broadcast_to(np.arange(4, dtype=np.int32)[None, :], (3, 4)).copy()
    out.append(Case("iota", module(f"  ROOT r = {sh(e)} iota(), iota_dimension=1"), [], e))
    i0, i1 = np.array(5, np.int32), np.array(-3, np.int32)
    e = m[1:3, 0:2]  # start (5, -3) clamps to (1, 0) for a 2x2 window
    body = params([m, i0, i1]) + f"\n  ROOT r = {sh(e)} dynamic-slice(p0, p1, p2), dynamic_slice_sizes={{2,2}}"
    out.append(Case("dynamic-slice-clamped", module(body), [m, i0, i1], e))
    upd = floats(2, 3)
    j0, j1 = np.array(1, np.int32), np.array(7, np.int32)
    e = m.copy()
    e[1:3, 1:4] = upd
    body = params([m, upd, j0, j1]) + f"\n  ROOT r = {sh(e)} dynamic-update-slice(p0, p1, p2, p3)"
    out.append(Case("dynamic-update-slice-clamped", module(body), [m, upd, j0, j1], e))
    p = RNG.integers(0, 2, size=(3, 4)).astype(bool)
    t, f = floats(3, 4), floats(3, 4)
    body = params([p, t, f]) + f"\n  ROOT r = {sh(t)} select(p0, p1, p2)"
    out.append(Case("select", module(body), [p, t, f], np.where(p, t, f)))
    lo, hi = np.array(-1, np.float32), np.array(1.5, np.float32)
    body = params([lo, t, hi]) + f"\n  ROOT r = {sh(t)} clamp(p0, p1, p2)"
    out.append(Case("clamp-scalar-bounds", module(body), [lo, t, hi], np.clip(t, -1, 1.5)))
    return out


ADD_F32 = "add_f32 {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
MAX_F32 = "max_f32 {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] maximum(x, y)\n}\n\n"
ADD_S32 = "add_s32 {\n  x = s32[] parameter(0)\n  y = s32[] parameter(1)\n  ROOT s = s32[] add(x, y)\n}\n\n"
GE_F32 = "ge_f32 {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = pred[] compare(x, y), direction=GE\n}\n\n"
LT_F32 = "lt_f32 {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = pred[] compare(x, y), direction=LT\n}\n\n"


def reduction_cases():
    out = []
    a = floats(3, 4, 5)
    e = a.astype(np.float64).sum(axis=(0, 2)).astype(np.float32)
    body = params([a]) + f"\n  z = f32[] constant(0)\n  ROOT r = {sh(e)} reduce(p0, z), dimensions={{0,2}}, to_apply=add_f32"
    out.append(Case("reduce-add-2dims", module(body, ADD_F32), [a], e, (1e-5, 1e-5)))
    e = a.max(axis=1)
    body = params([a]) + f"\n  z = f32[] constant(-inf)\n  ROOT r = {sh(e)} reduce(p0, z), dimensions={{1}}, to_apply=max_f32"
    out.append(Case("reduce-max", module(body, MAX_F32), [a], e))
    i = ints(6, 7)
    e = i.sum(axis=1).astype(np.int32)
    body = params([i]) + f"\n  z = s32[] constant(0)\n  ROOT r = {sh(e)} reduce(p0, z), dimensions={{1}}, to_apply=add_s32"
    out.append(Case("reduce-add-s32", module(body, ADD_S32), [i], e))
    # reduce-window: 2x2 max pool, stride 2, pad 1 high on both dims, over a [1,5,5,1] input.
    x = floats(1, 5, 5, 1)
    padded = np.full((1, 6, 6, 1), -np.inf, np.float32)
    padded[:, :5, :5] = x
    e = padded.reshape(1, 3, 2, 3, 2, 1).max(axis=(2, 4))
    body = params([x]) + (f"\n  z = f32[] constant(-inf)\n  ROOT r = {sh(e)} reduce-window(p0, z), "
                          "window={size=1x2x2x1 stride=1x2x2x1 pad=0_0x0_1x0_1x0_0}, to_apply=max_f32")
    out.append(Case("reduce-window-maxpool", module(body, MAX_F32), [x], e))
    # window dilation 2 and base dilation 2 on a 1-D sum.
    v = floats(5)
    based = np.zeros(9, np.float32)
    based[::2] = v  # holes contribute nothing (sum: 0)
    e = np.array([based[j] + based[j + 2] for j in range(0, 9 - 2, 1)], np.float32)
    body = params([v]) + (f"\n  z = f32[] constant(0)\n  ROOT r = {sh(e)} reduce-window(p0, z), "
                          "window={size=2 rhs_dilate=2 lhs_dilate=2}, to_apply=add_f32")
    out.append(Case("reduce-window-dilations", module(body, ADD_F32), [v], e))
    # select-and-scatter: max-pool gradient, 2x2 windows stride 2 on 4x4.
    op = floats(4, 4)
    src = floats(2, 2)
    e = np.zeros((4, 4), np.float32)
    for wi in range(2):
        for wj in range(2):
            win = op[2 * wi:2 * wi + 2, 2 * wj:2 * wj + 2]
            k = np.argmax(win.reshape(-1))
            e[2 * wi + k // 2, 2 * wj + k % 2] += src[wi, wj]
    body = params([op, src]) + (f"\n  z = f32[] constant(0)\n  ROOT r = {sh(e)} select-and-scatter(p0, p1, z), "
                                "window={size=2x2 stride=2x2}, select=ge_f32, scatter=add_f32")
    out.append(Case("select-and-scatter", module(body, GE_F32 + ADD_F32), [op, src], e))
    return out


def linalg_cases():
    out = []
    a, b = floats(3, 64, 48, lo=-1, hi=1), floats(3, 40, 48, lo=-1, hi=1)
    e = np.einsum("bik,bjk->bij", a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    body = params([a, b]) + (f"\n  ROOT r = {sh(e)} dot(p0, p1), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, "
                             "rhs_batch_dims={0}, rhs_contracting_dims={2}")
    out.append(Case("dot-batched", module(body), [a, b], e, (1e-5, 1e-5)))
    m1, m2 = floats(130, 70, lo=-1, hi=1), floats(70, 90, lo=-1, hi=1)
    e = (m1.astype(np.float64) @ m2.astype(np.float64)).astype(np.float32)
    body = params([m1, m2]) + f"\n  ROOT r = {sh(e)} dot(p0, p1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"
    out.append(Case("dot-matmul", module(body), [m1, m2], e, (1e-5, 1e-5)))
    i1, i2 = ints(5, 6, lo=-2**20, hi=2**20), ints(6, 4, lo=-2**20, hi=2**20)
    e = (i1.astype(np.int64) @ i2.astype(np.int64)).astype(np.int32)
    body = params([i1, i2]) + f"\n  ROOT r = {sh(e)} dot(p0, p1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"
    out.append(Case("dot-s32-wraps", module(body), [i1, i2], e))
    # conv NHWC x HWIO, stride 2, padding 1, 3x3.
    x, w = floats(2, 7, 7, 3, lo=-1, hi=1), floats(3, 3, 3, 4, lo=-1, hi=1)
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    oh = (9 - 3) // 2 + 1
    e = np.zeros((2, oh, oh, 4))
    for i in range(oh):
        for j in range(oh):
            patch = xp[:, 2 * i:2 * i + 3, 2 * j:2 * j + 3, :]
            e[:, i, j, :] = np.einsum("nhwc,hwco->no", patch, w.astype(np.float64))
    e = e.astype(np.float32)
    body = params([x, w]) + (f"\n  ROOT r = {sh(e)} convolution(p0, p1), window={{size=3x3 stride=2x2 pad=1_1x1_1}}, "
                             "dim_labels=b01f_01io->b01f")
    out.append(Case("convolution-nhwc", module(body), [x, w], e, (1e-5, 1e-5)))
    # depthwise: feature_group_count = C.
    x2, w2 = floats(1, 6, 6, 4, lo=-1, hi=1), floats(2, 2, 1, 4, lo=-1, hi=1)
    e = np.zeros((1, 5, 5, 4))
    for i in range(5):
        for j in range(5):
            e[0, i, j, :] = np.einsum("hwc,hwc->c", x2[0, i:i + 2, j:j + 2, :].astype(np.float64), w2[:, :, 0, :])
    e = e.astype(np.float32)
    body = params([x2, w2]) + (f"\n  ROOT r = {sh(e)} convolution(p0, p1), window={{size=2x2}}, "
                               "dim_labels=b01f_01io->b01f, feature_group_count=4")
    out.append(Case("convolution-depthwise", module(body), [x2, w2], e, (1e-5, 1e-5)))
    return out


def gather_scatter_sort_cases():
    out = []
    table = floats(10, 4)
    idx = np.array([[3], [0], [12], [-2], [9]], np.int32)
    e = table[np.clip(idx[:, 0], 0, 9)]
    body = params([table, idx]) + (f"\n  ROOT r = {sh(e)} gather(p0, p1), offset_dims={{1}}, collapsed_slice_dims={{0}}, "
                                   "start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}")
    out.append(Case("gather-rows-clamped", module(body), [table, idx], e))
    base = floats(6, 3)
    sidx = np.array([[1], [4], [1], [9]], np.int32)
    upd = floats(4, 3)
    e = base.astype(np.float64).copy()
    for k in range(4):
        if 0 <= sidx[k, 0] < 6:
            e[sidx[k, 0]] += upd[k]
    e = e.astype(np.float32)
    body = params([base, sidx, upd]) + (f"\n  ROOT r = {sh(e)} scatter(p0, p1, p2), update_window_dims={{1}}, "
                                        "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                                        "index_vector_dim=1, to_apply=add_f32")
    out.append(Case("scatter-add-repeated-oob", module(body, ADD_F32), [base, sidx, upd], e, (1e-6, 1e-6)))
    keys = floats(4, 9)
    keys[0, :3] = [1.0, 1.0, 1.0]
    vals = np.broadcast_to(np.arange(9, dtype=np.int32), (4, 9)).copy()
    order = np.argsort(keys, axis=1, kind="stable")
    ek, ev = np.take_along_axis(keys, order, 1), np.take_along_axis(vals, order, 1)
    cmp = ("cmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  c = s32[] parameter(2)\n"
           "  d = s32[] parameter(3)\n  ROOT lt = pred[] compare(a, b), direction=LT\n}\n\n")
    body = params([keys, vals]) + (f"\n  ROOT r = ({sh(ek)}, {sh(ev)}) sort(p0, p1), dimensions={{1}}, is_stable=true, "
                                   "to_apply=cmp")
    out.append(Case("sort-stable-two-operands", module(body, cmp), [keys, vals], [ek, ev]))
    return out


def control_flow_cases():
    out = []
    # while: sum i for i in 0..9 into a vector accumulator.
    acc = floats(4)
    cond = ("cond {\n  s = (s32[], f32[4]{0}) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
            "  n = s32[] constant(10)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n\n")
    body_c = ("body {\n  s = (s32[], f32[4]{0}) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
              "  v = f32[4]{0} get-tuple-element(s), index=1\n  fi = f32[] convert(i)\n"
              "  b = f32[4]{0} broadcast(fi), dimensions={}\n  nv = f32[4]{0} add(v, b)\n  one = s32[] constant(1)\n"
              "  ni = s32[] add(i, one)\n  ROOT t = (s32[], f32[4]{0}) tuple(ni, nv)\n}\n\n")
    e = acc + np.float32(45)
    body = params([acc]) + ("\n  zero = s32[] constant(0)\n  t = (s32[], f32[4]{0}) tuple(zero, p0)\n"
                            "  w = (s32[], f32[4]{0}) while(t), condition=cond, body=body\n"
                            "  ROOT r = f32[4]{0} get-tuple-element(w), index=1")
    out.append(Case("while-loop", module(body, cond + body_c), [acc], e))
    # conditional, index form with an out-of-range index selecting the last branch.
    x = floats(3)
    br = ("b0 {\n  a = f32[3]{0} parameter(0)\n  ROOT n = f32[3]{0} negate(a)\n}\n\n"
          "b1 {\n  a = f32[3]{0} parameter(0)\n  ROOT n = f32[3]{0} abs(a)\n}\n\n"
          "b2 {\n  a = f32[3]{0} parameter(0)\n  ROOT n = f32[3]{0} floor(a)\n}\n\n")
    for k, expect in [(1, np.abs(x)), (7, np.floor(x)), (-1, np.floor(x))]:
        sel = np.array(k, np.int32)
        body = params([sel, x]) + ("\n  ROOT r = f32[3]{0} conditional(p0, p1, p1, p1), "
                                   "branch_computations={b0, b1, b2}")
        out.append(Case(f"conditional-index-{k}", module(body, br), [sel, x], expect))
    for flag, expect in [(True, -x), (False, np.abs(x))]:
        p = np.array(flag)
        body = params([p, x]) + "\n  ROOT r = f32[3]{0} conditional(p0, p1, p1), true_computation=b0, false_computation=b1"
        out.append(Case(f"conditional-pred-{flag}", module(body, br), [p, x], expect))
    y = floats(2, 3)
    body = params([y, y]) + f"\n  ROOT r = {sh(y)} map(p0, p1), dimensions={{0,1}}, to_apply=add_f32"
    out.append(Case("map", module(body, ADD_F32), [y, y], y + y))
    body = params([y, y]) + f"\n  ROOT r = {sh(y)} call(p0, p1), to_apply=add_f32x"
    callee = f"add_f32x {{\n  x = {sh(y)} parameter(0)\n  y = {sh(y)} parameter(1)\n  ROOT s = {sh(y)} add(x, y)\n}}\n\n"
    out.append(Case("call", module(body, callee), [y, y], y + y))
    body = params([y, y]) + f"\n  ROOT r = {sh(y)} fusion(p0, p1), kind=kLoop, calls=add_f32x"
    out.append(Case("fusion", module(body, callee), [y, y], y + y))
    body = params([y, x]) + (f"\n  t = ({sh(y)}, {sh(x)}) tuple(p0, p1)\n  b = ({sh(y)}, {sh(x)}) opt-barrier(t)\n"
                             f"  g0 = {sh(y)} get-tuple-element(b), index=0\n  g1 = {sh(x)} get-tuple-element(b), index=1\n"
                             f"  ROOT r = ({sh(x)}, {sh(y)}) tuple(g1, g0)")
    out.append(Case("tuple-gte-opt-barrier", module(body), [y, x], [x, y]))
    return out


def comp(name, params_, root, body=""):
    """A computation over scalar parameters given as (type) strings."""
    ps = "\n".join(f"  p{i} = {t}[] parameter({i})" for i, t in enumerate(params_))
    return f"{name} {{\n{ps}\n{body}  ROOT r = {root}\n}}\n\n"


def gather_scatter_extended_cases():
    out = []
    # gather with operand/start-indices batching dims: per batch b, rows idx[b, j] of table[b].
    table = floats(3, 5, 4)
    idx = np.array([[4, 0], [2, 9], [-1, 1]], np.int32)
    e = np.stack([table[b][np.clip(idx[b], 0, 4)] for b in range(3)])
    body = params([table, idx]) + (f"\n  ROOT r = {sh(e)} gather(p0, p1), offset_dims={{2}}, collapsed_slice_dims={{1}}, "
                                   "start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, "
                                   "index_vector_dim=2, slice_sizes={1,1,4}")
    out.append(Case("gather-batching-dims", module(body), [table, idx], e))
    # gather with a 2-component index vector and 2x2 windows (clamped at the far edge).
    m = floats(6, 7)
    starts = np.array([[0, 0], [4, 5], [5, 6], [2, 3]], np.int32)
    e = np.stack([m[min(r, 4):min(r, 4) + 2, min(c, 5):min(c, 5) + 2] for r, c in starts])
    body = params([m, starts]) + (f"\n  ROOT r = {sh(e)} gather(p0, p1), offset_dims={{1,2}}, collapsed_slice_dims={{}}, "
                                  "start_index_map={0,1}, index_vector_dim=1, slice_sizes={2,2}")
    out.append(Case("gather-2d-windows", module(body), [m, starts], e))
    # scatter with batching dims: per batch b, operand[b, idx[b, j]] += upd[b, j].
    base = floats(2, 6)
    sidx = np.array([[1, 1, 5], [0, 3, 7]], np.int32)
    upd = floats(2, 3)
    e = base.astype(np.float64).copy()
    for b in range(2):
        for j in range(3):
            if 0 <= sidx[b, j] < 6:
                e[b, sidx[b, j]] += upd[b, j]
    e = e.astype(np.float32)
    body = params([base, sidx, upd]) + (f"\n  ROOT r = {sh(e)} scatter(p0, p1, p2), update_window_dims={{}}, "
                                        "inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, "
                                        "input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2, "
                                        "to_apply=add_f32")
    out.append(Case("scatter-batching-dims", module(body, ADD_F32), [base, sidx, upd], e, (1e-6, 1e-6)))
    # scatter overwrite: the last update to a repeated index wins (row-major order).
    ibase = ints(8)
    oidx = np.array([[2], [5], [2], [-1]], np.int32)
    oupd = ints(4)
    e = ibase.copy()
    for k in range(4):
        if 0 <= oidx[k, 0] < 8:
            e[oidx[k, 0]] = oupd[k]
    over = comp("keep_new", ["s32", "s32"], "s32[] add(p1, zero)", "  zero = s32[] constant(0)\n")
    body = params([ibase, oidx, oupd]) + (f"\n  ROOT r = {sh(e)} scatter(p0, p1, p2), update_window_dims={{}}, "
                                          "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
                                          "to_apply=keep_new")
    out.append(Case("scatter-overwrite-s32", module(body, over), [ibase, oidx, oupd], e))
    # scatter of 2-row windows with a multiply combiner; the window at row 5 does not fit and is skipped.
    mb = floats(6, 3)
    widx = np.array([[0], [3], [5], [3]], np.int32)
    wupd = floats(4, 2, 3)
    e = mb.astype(np.float64).copy()
    for k in range(4):
        r = widx[k, 0]
        if 0 <= r <= 4:
            e[r:r + 2] *= wupd[k]
    e = e.astype(np.float32)
    mul = comp("mul_f32", ["f32", "f32"], "f32[] multiply(p0, p1)")
    body = params([mb, widx, wupd]) + (f"\n  ROOT r = {sh(e)} scatter(p0, p1, p2), update_window_dims={{1,2}}, "
                                       "inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
                                       "to_apply=mul_f32")
    out.append(Case("scatter-windows-multiply", module(body, mul), [mb, widx, wupd], e, (1e-6, 1e-6)))
    # variadic scatter (two operands) with a combiner that keeps the larger key and its payload.
    keys, pay = ints(5, lo=0, hi=50), ints(5, lo=0, hi=1000)
    vidx = np.array([[1], [1], [4]], np.int32)
    ukeys, upay = np.array([60, 70, 3], np.int32), np.array([1, 2, 3], np.int32)
    ek, ep = keys.copy(), pay.copy()
    for k in range(3):
        i = vidx[k, 0]
        if ukeys[k] > ek[i]:
            ek[i], ep[i] = ukeys[k], upay[k]
    maxk = ("maxk {\n  ak = s32[] parameter(0)\n  ap = s32[] parameter(1)\n  bk = s32[] parameter(2)\n"
            "  bp = s32[] parameter(3)\n  gt = pred[] compare(bk, ak), direction=GT\n  k = s32[] select(gt, bk, ak)\n"
            "  p = s32[] select(gt, bp, ap)\n  ROOT t = (s32[], s32[]) tuple(k, p)\n}\n\n")
    body = params([keys, pay, vidx, ukeys, upay]) + (
        f"\n  ROOT r = ({sh(ek)}, {sh(ep)}) scatter(p0, p1, p2, p3, p4), update_window_dims={{}}, "
        "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=maxk")
    out.append(Case("scatter-variadic", module(body, maxk), [keys, pay, vidx, ukeys, upay], [ek, ep]))
    return out


def sort_extended_cases():
    out = []
    # Descending TOTALORDER sort along dim 0 with NaNs and signed zeros.
    x = floats(6, 3)
    x[:, 0] = [np.nan, -0.0, 0.0, -np.inf, 1.0, -np.nan]
    key = total_order_key(x)
    order = np.argsort(-key, axis=0, kind="stable")
    e = np.take_along_axis(x, order, 0)
    gt = ("gt {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
          "  ROOT r = pred[] compare(a, b), direction=GT, type=TOTALORDER\n}\n\n")
    body = params([x]) + f"\n  ROOT r = {sh(e)} sort(p0), dimensions={{0}}, is_stable=true, to_apply=gt"
    out.append(Case("sort-totalorder-descending-dim0", module(body, gt), [x], e))
    # Two-key comparator (primary key ascending, ties by the second key descending): the generic path.
    k1 = ints(12, lo=0, hi=3)
    k2 = ints(12, lo=0, hi=100)
    order = sorted(range(12), key=lambda i: (k1[i], -k2[i]))
    e1, e2 = k1[order], k2[order]
    lex = ("lex {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  c = s32[] parameter(2)\n"
           "  d = s32[] parameter(3)\n  lt = pred[] compare(a, b), direction=LT\n  eq = pred[] compare(a, b), direction=EQ\n"
           "  gt2 = pred[] compare(c, d), direction=GT\n  tie = pred[] and(eq, gt2)\n  ROOT r = pred[] or(lt, tie)\n}\n\n")
    body = params([k1, k2]) + f"\n  ROOT r = ({sh(e1)}, {sh(e2)}) sort(p0, p1), dimensions={{0}}, to_apply=lex"
    out.append(Case("sort-two-keys-generic", module(body, lex), [k1, k2], [e1, e2]))
    return out


def reduce_extended_cases():
    out = []
    # Variadic reduce: argmax along dim 1 (first index on ties) through a general reducer.
    v = ints(4, 9, lo=0, hi=5)
    iota = np.broadcast_to(np.arange(9, dtype=np.int32), (4, 9)).copy()
    em, ei = v.max(axis=1), v.argmax(axis=1).astype(np.int32)
    argmax = ("argmax {\n  av = s32[] parameter(0)\n  ai = s32[] parameter(1)\n  bv = s32[] parameter(2)\n"
              "  bi = s32[] parameter(3)\n  gt = pred[] compare(bv, av), direction=GT\n"
              "  eq = pred[] compare(bv, av), direction=EQ\n  lti = pred[] compare(bi, ai), direction=LT\n"
              "  tie = pred[] and(eq, lti)\n  take = pred[] or(gt, tie)\n  rv = s32[] select(take, bv, av)\n"
              "  ri = s32[] select(take, bi, ai)\n  ROOT t = (s32[], s32[]) tuple(rv, ri)\n}\n\n")
    body = params([v, iota]) + ("\n  lo = s32[] constant(-2147483648)\n  z = s32[] constant(0)\n"
                                f"  ROOT r = ({sh(em)}, {sh(ei)}) reduce(p0, p1, lo, z), dimensions={{1}}, to_apply=argmax")
    out.append(Case("reduce-variadic-argmax", module(body, argmax), [v, iota], [em, ei]))
    # bf16 sum rounds after every add (the reducer runs in bf16).
    b = floats(64, lo=0, hi=1)
    acc = np.float32(0)
    for t in bf16_round(b):
        acc = bf16_round(np.array([acc + t], np.float32))[0]
    addb = comp("add_bf16", ["bf16", "bf16"], "bf16[] add(p0, p1)")
    body = params([b]) + ("\n  c = bf16[64]{0} convert(p0)\n  z = bf16[] constant(0)\n"
                          "  s = bf16[] reduce(c, z), dimensions={0}, to_apply=add_bf16\n  ROOT r = f32[] convert(s)")
    out.append(Case("reduce-bf16-rounds-per-add", module(body, addb), [b], np.array(acc, np.float32)))
    # reduce-window with a general (non-recognised) reducer, strides and negative padding.
    w = floats(7, lo=0.5, hi=1.5)
    e = np.array([w[1] * w[2] * w[3], w[3] * w[4] * w[5]], np.float32)
    mulsq = comp("mul2", ["f32", "f32"], "f32[] multiply(p0, p1)")
    body = params([w]) + ("\n  one = f32[] constant(1)\n"
                          f"  ROOT r = {sh(e)} reduce-window(p0, one), window={{size=3 stride=2 pad=-1_-1}}, to_apply=mul2")
    out.append(Case("reduce-window-negative-pad", module(body, mulsq), [w], e, (1e-6, 0)))
    # select-and-scatter with padding and a strict GT select (first maximum wins).
    op = floats(5, 5)
    src = floats(3, 3)
    padded = np.full((7, 7), -np.inf, np.float32)
    padded[1:6, 1:6] = op
    e = np.zeros((5, 5), np.float32)
    for wi in range(3):
        for wj in range(3):
            win = padded[2 * wi:2 * wi + 3, 2 * wj:2 * wj + 3]
            k = int(np.argmax(win.reshape(-1)))
            e[2 * wi + k // 3 - 1, 2 * wj + k % 3 - 1] += src[wi, wj]
    gt_f32 = comp("gt_f32", ["f32", "f32"], "pred[] compare(p0, p1), direction=GT")
    body = params([op, src]) + (f"\n  z = f32[] constant(0)\n  ROOT r = {sh(e)} select-and-scatter(p0, p1, z), "
                                "window={size=3x3 stride=2x2 pad=1_1x1_1}, select=gt_f32, scatter=add_f32")
    out.append(Case("select-and-scatter-padded-gt", module(body, gt_f32 + ADD_F32), [op, src], e, (1e-6, 1e-6)))
    return out


def control_flow_extended_cases():
    out = []
    # while writing row i of a buffer each iteration (dynamic-update-slice in the loop).
    x = floats(5, 3)
    cond = ("cond {\n  s = (s32[], f32[5,3]{1,0}) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
            "  n = s32[] constant(5)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n\n")
    body_c = ("body {\n  s = (s32[], f32[5,3]{1,0}) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
              "  b = f32[5,3]{1,0} get-tuple-element(s), index=1\n  z = s32[] constant(0)\n"
              "  row = f32[1,3]{1,0} dynamic-slice(b, i, z), dynamic_slice_sizes={1,3}\n"
              "  fi = f32[] convert(i)\n  fb = f32[1,3]{1,0} broadcast(fi), dimensions={}\n"
              "  nr = f32[1,3]{1,0} multiply(row, fb)\n  nb = f32[5,3]{1,0} dynamic-update-slice(b, nr, i, z)\n"
              "  one = s32[] constant(1)\n  ni = s32[] add(i, one)\n  ROOT t = (s32[], f32[5,3]{1,0}) tuple(ni, nb)\n}\n\n")
    e = x * np.arange(5, dtype=np.float32)[:, None]
    body = params([x]) + ("\n  zero = s32[] constant(0)\n  t = (s32[], f32[5,3]{1,0}) tuple(zero, p0)\n"
                          "  w = (s32[], f32[5,3]{1,0}) while(t), condition=cond, body=body\n"
                          "  ROOT r = f32[5,3]{1,0} get-tuple-element(w), index=1")
    out.append(Case("while-dynamic-update-slice", module(body, cond + body_c), [x], e))
    # rng-bit-generator: the same state twice gives the same bits; the counter advances by the blocks used.
    st = np.array([42, 5], np.uint64)
    body = params([st]) + ("\n  a = (u64[2]{0}, u32[6]{0}) rng-bit-generator(p0), algorithm=rng_three_fry\n"
                           "  b = (u64[2]{0}, u32[6]{0}) rng-bit-generator(p0), algorithm=rng_three_fry\n"
                           "  sa = u64[2]{0} get-tuple-element(a), index=0\n  ba = u32[6]{0} get-tuple-element(a), index=1\n"
                           "  bb = u32[6]{0} get-tuple-element(b), index=1\n"
                           "  eq = pred[6]{0} compare(ba, bb), direction=EQ\n  ROOT r = (u64[2]{0}, pred[6]{0}) tuple(sa, eq)")
    out.append(Case("rng-bit-generator-deterministic", module(body), [st],
                    [np.array([42, 8], np.uint64), np.ones(6, bool)]))
    return out


def collective_cases():
    out = []
    # Each replica r holds p0 + r (replica-id), so the expected values follow from p0.
    x = floats(4, 6)
    pre = ("  id = u32[] replica-id()\n  fid = f32[] convert(id)\n  b = f32[4,6]{1,0} broadcast(fid), dimensions={}\n"
           "  v = f32[4,6]{1,0} add(p0, b)\n")
    n = 4
    per = [x + np.float32(r) for r in range(n)]
    total = per[0] + per[1] + per[2] + per[3]
    flags = [f"--replicas={n}"]
    body = params([x]) + "\n" + pre + f"  ROOT r = {sh(total)} all-reduce(v), replica_groups={{}}, to_apply=add_f32"
    out.append(Case("all-reduce-4-replicas", module(body, ADD_F32), [x], total, (1e-6, 1e-6), flags))
    pair = per[0] + per[2]  # replica 0's group {0,2}
    body = params([x]) + "\n" + pre + f"  ROOT r = {sh(pair)} all-reduce(v), replica_groups={{{{0,2}},{{1,3}}}}, to_apply=add_f32"
    out.append(Case("all-reduce-groups", module(body, ADD_F32), [x], pair, (1e-6, 1e-6), flags))
    g = np.concatenate(per, axis=1)
    body = params([x]) + "\n" + pre + f"  ROOT r = {sh(g)} all-gather(v), replica_groups={{}}, dimensions={{1}}"
    out.append(Case("all-gather-dim1", module(body), [x], g, EXACT, flags))
    rs = total[0:1]
    body = params([x]) + "\n" + pre + f"  ROOT r = {sh(rs)} reduce-scatter(v), replica_groups={{}}, dimensions={{0}}, to_apply=add_f32"
    out.append(Case("reduce-scatter-dim0", module(body, ADD_F32), [x], rs, (1e-6, 1e-6), flags))
    a2a = np.concatenate([p[0:1] for p in per], axis=0)  # replica 0 receives block 0 of everyone
    body = params([x]) + "\n" + pre + f"  ROOT r = {sh(a2a)} all-to-all(v), replica_groups={{}}, dimensions={{0}}"
    out.append(Case("all-to-all-dim0", module(body), [x], a2a, EXACT, flags))
    perm = per[3]  # replica 0 receives from replica 3 in the ring r -> r+1
    body = params([x]) + "\n" + pre + f"  ROOT r = {sh(perm)} collective-permute(v), source_target_pairs={{{{0,1}},{{1,2}},{{2,3}},{{3,0}}}}"
    out.append(Case("collective-permute-ring", module(body), [x], perm, EXACT, flags))
    body = params([x]) + "\n" + pre + f"  ROOT r = {sh(x)} collective-permute(v), source_target_pairs={{{{0,1}}}}"
    out.append(Case("collective-permute-no-source-zeros", module(body), [x], np.zeros_like(x), EXACT, flags))
    # Partitions: cross-partition all-reduce (channel_id) of partition ids over 2 partitions.
    body = ("  id = u32[] partition-id()\n  ROOT r = u32[] all-reduce(id), channel_id=1, replica_groups={{0,1}}, "
            "use_global_device_ids=true, to_apply=add_u32")
    add_u32 = comp("add_u32", ["u32", "u32"], "u32[] add(p0, p1)")
    out.append(Case("all-reduce-partitions", module(body, add_u32), [], np.array(1, np.uint32), EXACT,
                    ["--partitions=2"]))
    return out


# ---- Relative error near zero, f64, complex and fft (issue #14 point 5) ----

# Tolerances judged by relative error alone: an absolute floor would hide
# lost digits near zero (|a-b|/(1+|b|) cannot see a 6% error at 1e-7).
REL_F32 = (4 * 2.0 ** -24, 0.0)     # 4 ulps of f32 relative to the exact value
REL_F64 = (8 * 2.0 ** -53, 0.0)     # 8 ulps of f64
# Complex results: |got - want| <= rtol * |want| (the complex magnitude), so
# a component much smaller than the other is judged against the whole value.
CPLX_C64 = (8 * 2.0 ** -24, 0.0)
CPLX_C128 = (16 * 2.0 ** -53, 0.0)


def near_zero(n, dtype):
    """Magnitudes from 1e-30 to 1e-2, both signs, plus the exact zeros."""
    mags = np.logspace(-30 if dtype == np.float32 else -200, -2, n)
    v = mags * np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    v[:2] = [0.0, -0.0]
    return v.astype(dtype)


def near_zero_cases():
    out = []
    table = [
        ("exponential-minus-one", np.expm1), ("log-plus-one", np.log1p), ("tan", np.tan),
        ("sine", np.sin), ("tanh", np.tanh), ("atan", np.arctan), ("asin", np.arcsin),
        ("asinh", np.arcsinh), ("atanh", np.arctanh), ("erf", erf64),
    ]
    for dtype, tol in [(np.float32, REL_F32), (np.float64, REL_F64)]:
        x = near_zero(64, dtype)
        for op, f in table:
            e = f(x.astype(np.float64)).astype(dtype)
            body = params([x]) + f"\n  ROOT r = {sh(e)} {op}(p0)"
            out.append(Case(f"near-zero-{NP_TO_HLO[np.dtype(dtype)]}-{op}", module(body), [x], e, tol))
    return out


def f64_cases():
    out = []
    rng = np.random.default_rng(64)
    x = rng.uniform(-4, 4, size=(4, 8))
    x.reshape(-1)[:8] = [0.0, -0.0, 1.0, -1.0, 0.5, np.inf, -np.inf, np.nan]
    pos = rng.uniform(0.01, 10, size=(4, 8))
    unit = rng.uniform(-0.99, 0.99, size=(4, 8))
    big = rng.uniform(1.01, 10, size=(4, 8))
    with np.errstate(all="ignore"):
        unary = [
            ("abs", x, np.abs(x), EXACT), ("negate", x, -x, EXACT), ("sqrt", pos, np.sqrt(pos), EXACT),
            ("floor", x, np.floor(x), EXACT), ("ceil", x, np.ceil(x), EXACT),
            ("round-nearest-even", x, np.round(x), EXACT),
            ("exponential", x, np.exp(x), REL_F64), ("exponential-minus-one", x, np.expm1(x), REL_F64),
            ("log", pos, np.log(pos), REL_F64), ("log-plus-one", pos, np.log1p(pos), REL_F64),
            ("rsqrt", pos, 1 / np.sqrt(pos), REL_F64), ("cbrt", x, np.cbrt(x), REL_F64),
            ("tanh", x, np.tanh(x), REL_F64), ("logistic", x, 1 / (1 + np.exp(-x)), REL_F64),
            ("sine", x, np.sin(x), REL_F64), ("cosine", x, np.cos(x), REL_F64),
            ("tan", unit, np.tan(unit), REL_F64), ("atan", x, np.arctan(x), REL_F64),
            ("asin", unit, np.arcsin(unit), REL_F64), ("acos", unit, np.arccos(unit), REL_F64),
            ("asinh", x, np.arcsinh(x), REL_F64), ("acosh", big, np.arccosh(big), REL_F64),
            ("atanh", unit, np.arctanh(unit), REL_F64), ("erf", x, erf64(x), REL_F64),
        ]
    for op, a, e, tol in unary:
        body = params([a]) + f"\n  ROOT r = {sh(e)} {op}(p0)"
        out.append(Case(f"f64-{op}", module(body), [a], e, tol))
    a = x
    b = rng.uniform(-4, 4, size=(4, 8))
    b.reshape(-1)[-4:] = [np.nan, 0.0, -0.0, np.inf]
    pa = rng.uniform(0.1, 3, size=(4, 8))
    with np.errstate(all="ignore"):
        binary = [
            ("add", a, b, a + b, EXACT), ("subtract", a, b, a - b, EXACT), ("multiply", a, b, a * b, EXACT),
            ("divide", a, b, a / b, EXACT), ("maximum", a, b, np.maximum(a, b), EXACT),
            ("minimum", a, b, np.minimum(a, b), EXACT), ("remainder", a, b, np.fmod(a, b), EXACT),
            ("power", pa, b, np.power(pa, b), REL_F64), ("atan2", a, b, np.arctan2(a, b), REL_F64),
        ]
    for op, p, q, e, tol in binary:
        body = params([p, q]) + f"\n  ROOT r = {sh(e)} {op}(p0, p1)"
        out.append(Case(f"f64-{op}", module(body), [p, q], e, tol))
    # Sums of products in f64 (a dot), exact enough to compare with float64 numpy.
    m1, m2 = rng.uniform(-1, 1, size=(9, 33)), rng.uniform(-1, 1, size=(33, 7))
    e = m1 @ m2
    body = params([m1, m2]) + f"\n  ROOT r = {sh(e)} dot(p0, p1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"
    out.append(Case("f64-dot", module(body), [m1, m2], e, (64 * 2.0 ** -53, 1e-15)))
    return out


def complex_values(dtype, n=32, seed=7):
    rng = np.random.default_rng(seed)
    z = (rng.uniform(-3, 3, n) + 1j * rng.uniform(-3, 3, n)).astype(dtype)
    z[:4] = [0, 1, -1j, 2 + 0j]
    return z


def complex_cases():
    out = []
    for dtype, tol in [(np.complex64, CPLX_C64), (np.complex128, CPLX_C128)]:
        wide = np.complex128
        z, w = complex_values(dtype), complex_values(dtype, seed=8)
        w[:4] = [1, 2j, -3, 0.5 - 0.5j]  # no zero divisors
        zz = z.astype(wide)
        with np.errstate(all="ignore"):
            binary = [("add", z + w), ("subtract", z - w), ("multiply", zz * w.astype(wide)),
                      ("divide", zz / w.astype(wide))]
            unary = [("negate", -zz), ("exponential", np.exp(zz)), ("sqrt", np.sqrt(zz)),
                     ("sine", np.sin(zz)), ("cosine", np.cos(zz)), ("tanh", np.tanh(zz))]
        tname = NP_TO_HLO[np.dtype(dtype)]
        for op, e in binary:
            e = np.asarray(e).astype(dtype)
            body = params([z, w]) + f"\n  ROOT r = {sh(e)} {op}(p0, p1)"
            out.append(Case(f"{tname}-{op}", module(body), [z, w], e, tol))
        for op, e in unary:
            e = np.asarray(e).astype(dtype)
            body = params([z]) + f"\n  ROOT r = {sh(e)} {op}(p0)"
            out.append(Case(f"{tname}-{op}", module(body), [z], e, tol))
        nz = z.copy()
        nz[0] = 0.5 + 0.25j  # log(0) is -inf + 0j; keep the case finite
        e = np.log(nz.astype(wide)).astype(dtype)
        out.append(Case(f"{tname}-log", module(params([nz]) + f"\n  ROOT r = {sh(e)} log(p0)"), [nz], e, tol))
        real = np.float32 if dtype == np.complex64 else np.float64
        e = np.abs(zz).astype(real)
        out.append(Case(f"{tname}-abs", module(params([z]) + f"\n  ROOT r = {sh(e)} abs(p0)"), [z], e,
                        REL_F32 if real == np.float32 else REL_F64))
        for op, f in [("real", np.real), ("imag", np.imag)]:
            e = f(z).astype(real)
            out.append(Case(f"{tname}-{op}", module(params([z]) + f"\n  ROOT r = {sh(e)} {op}(p0)"), [z], e))
        re, im = z.real.astype(real), z.imag.astype(real)
        out.append(Case(f"{tname}-complex", module(params([re, im]) + f"\n  ROOT r = {sh(z)} complex(p0, p1)"),
                        [re, im], z))
    return out


def complex_near_zero(dtype, n=48):
    """Both parts from 1e-30 (1e-200 for c128) to 1e-2, all sign combinations, plus 0."""
    rng = np.random.default_rng(21)
    lo = -30 if dtype == np.complex64 else -200
    re = 10.0 ** rng.uniform(lo, -2, n) * np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    im = 10.0 ** rng.uniform(lo, -2, n) * np.where(np.arange(n) % 4 < 2, 1.0, -1.0)
    z = (re + 1j * im).astype(dtype)
    z[:4] = [0, 1e-7, 1e-7j, -2.547e-7 + 3e-9j]
    return z


def ld_expm1(z):
    """e^z - 1 in long double: expm1(x) cos y - 2 sin^2(y/2) + i e^x sin y."""
    x, y = z.real.astype(np.longdouble), z.imag.astype(np.longdouble)
    s = np.sin(y / 2)
    return np.expm1(x) * np.cos(y) - 2 * s * s, np.exp(x) * np.sin(y)


def ld_log1p(z):
    """ln(1 + z) for |z| < 1/2 in long double (x (2 + x) + y^2 is exact enough there)."""
    x, y = z.real.astype(np.longdouble), z.imag.astype(np.longdouble)
    return np.log1p(x * (2 + x) + y * y) / 2, np.arctan2(y, 1 + x)


def ld_logistic(z):
    """1 / (1 + e^-z) in long double."""
    x, y = z.real.astype(np.longdouble), z.imag.astype(np.longdouble)
    e = np.exp(-x)
    dr, di = 1 + e * np.cos(y), -e * np.sin(y)
    d2 = dr * dr + di * di
    return dr / d2, -di / d2


def complex_near_zero_cases():
    """expm1, log1p and logistic of small complex values, judged by relative
    error (normwise), and 0^0 = 1 (numpy and XLA; std::pow gives NaN)."""
    out = []
    for dtype, tol in [(np.complex64, CPLX_C64), (np.complex128, CPLX_C128)]:
        tname = NP_TO_HLO[np.dtype(dtype)]
        z = complex_near_zero(dtype)
        for op, f in [("exponential-minus-one", ld_expm1), ("log-plus-one", ld_log1p), ("logistic", ld_logistic)]:
            re, im = f(z)
            e = (re.astype(np.float64) + 1j * im.astype(np.float64)).astype(dtype)
            body = params([z]) + f"\n  ROOT r = {sh(e)} {op}(p0)"
            out.append(Case(f"{tname}-near-zero-{op}", module(body), [z], e, tol))
        a = np.array([0, 0, 0, 2 - 1j, 0, -0.0], dtype=dtype)
        b = np.array([0, 0.5, 2, 0, -0.0, 0], dtype=dtype)
        a[5] = complex(-0.0, -0.0)
        b[4] = complex(-0.0, 0.0)
        with np.errstate(all="ignore"):
            e = np.power(a.astype(np.complex128), b.astype(np.complex128)).astype(dtype)
        body = params([a, b]) + f"\n  ROOT r = {sh(e)} power(p0, p1)"
        out.append(Case(f"{tname}-power-of-zero", module(body), [a, b], e, tol))
    return out


# FFT results are compared norm-wise: error per element against the largest
# magnitude of the result, scaled by log2(n) as the error of a radix-2 FFT grows.
def fft_tol(n, dtype):
    eps = 2.0 ** -24 if dtype in (np.complex64, np.float32) else 2.0 ** -53
    return ("norm", 8 * eps * max(1.0, math.log2(n)))


def fft_cases():
    out = []
    rng = np.random.default_rng(11)
    for cdt, rdt in [(np.complex64, np.float32), (np.complex128, np.float64)]:
        t = NP_TO_HLO[np.dtype(cdt)]
        for dims, lengths in [((3, 16), (16,)), ((2, 12, 10), (12, 10)), ((4, 6, 8), (4, 6, 8)), ((2, 100), (100,))]:
            z = (rng.uniform(-1, 1, dims) + 1j * rng.uniform(-1, 1, dims)).astype(cdt)
            axes = tuple(range(len(dims) - len(lengths), len(dims)))
            n = int(np.prod(lengths))
            fl = ",".join(str(l) for l in lengths)
            tag = "x".join(str(l) for l in lengths)
            e = np.fft.fftn(z.astype(np.complex128), axes=axes).astype(cdt)
            body = params([z]) + f"\n  ROOT r = {sh(e)} fft(p0), fft_type=FFT, fft_length={{{fl}}}"
            out.append(Case(f"fft-{t}-{tag}", module(body), [z], e, fft_tol(n, cdt)))
            e = np.fft.ifftn(z.astype(np.complex128), axes=axes).astype(cdt)
            body = params([z]) + f"\n  ROOT r = {sh(e)} fft(p0), fft_type=IFFT, fft_length={{{fl}}}"
            out.append(Case(f"ifft-{t}-{tag}", module(body), [z], e, fft_tol(n, cdt)))
            x = rng.uniform(-1, 1, dims).astype(rdt)
            e = np.fft.rfftn(x.astype(np.float64), axes=axes).astype(cdt)
            body = params([x]) + f"\n  ROOT r = {sh(e)} fft(p0), fft_type=RFFT, fft_length={{{fl}}}"
            out.append(Case(f"rfft-{t}-{tag}", module(body), [x], e, fft_tol(n, cdt)))
            # irfft of the rfft of real data (a Hermitian input, as irfft assumes).
            spec = np.fft.rfftn(x.astype(np.float64), axes=axes).astype(cdt)
            e = np.fft.irfftn(spec.astype(np.complex128), s=lengths, axes=axes).astype(rdt)
            body = params([spec]) + f"\n  ROOT r = {sh(e)} fft(p0), fft_type=IRFFT, fft_length={{{fl}}}"
            out.append(Case(f"irfft-{t}-{tag}", module(body), [spec], e, fft_tol(n, cdt)))
    return out


def all_cases():
    return (unary_cases() + binary_cases() + compare_cases() + conversion_cases() + data_movement_cases()
            + reduction_cases() + linalg_cases() + gather_scatter_sort_cases() + control_flow_cases()
            + gather_scatter_extended_cases() + sort_extended_cases() + reduce_extended_cases()
            + control_flow_extended_cases() + collective_cases() + near_zero_cases() + f64_cases()
            + complex_cases() + complex_near_zero_cases() + fft_cases())


def compare(name, got, want, tol):
    if got.shape != want.shape:
        return f"{name}: shape {got.shape} != expected {want.shape}"
    if want.dtype == np.bool_ or want.dtype.kind in "iu":
        if got.dtype != want.dtype and not (want.dtype == np.bool_ and got.dtype == np.bool_):
            return f"{name}: dtype {got.dtype} != expected {want.dtype}"
        bad = np.nonzero(got.reshape(-1) != want.reshape(-1))[0]
        if len(bad):
            i = bad[0]
            return f"{name}: element {i}: got {got.reshape(-1)[i]}, expected {want.reshape(-1)[i]}"
        return None
    if got.dtype != want.dtype:
        return f"{name}: dtype {got.dtype} != expected {want.dtype}"
    if tol[0] == "norm":
        g, w = got.astype(np.complex128).reshape(-1), want.astype(np.complex128).reshape(-1)
        scale = np.max(np.abs(w)) if w.size else 0.0
        err = np.abs(g - w)
        bad = np.nonzero(~(err <= tol[1] * scale))[0]
        if len(bad):
            i = bad[0]
            return f"{name}: element {i}: got {g[i]!r}, expected {w[i]!r} (error {err[i]:.3g} > {tol[1]:.3g} x max |expected| {scale:.3g})"
        return None
    if want.dtype.kind == "c":
        g, w = got.astype(np.complex128).reshape(-1), want.astype(np.complex128).reshape(-1)
        rtol, atol = tol
        with np.errstate(all="ignore"):
            err = np.abs(g - w)
            close = (g == w) | (err <= atol + rtol * np.abs(w))
        bad = np.nonzero(~close)[0]
        if len(bad):
            i = bad[0]
            return f"{name}: element {i}: got {g[i]!r}, expected {w[i]!r} (relative error {err[i] / abs(w[i]) if w[i] else err[i]:.3g} > {rtol:.3g})"
        return None
    g, w = got.astype(np.float64).reshape(-1), want.astype(np.float64).reshape(-1)
    rtol, atol = tol
    nan_ok = np.isnan(g) == np.isnan(w)
    with np.errstate(all="ignore"):
        close = (g == w) | (np.abs(g - w) <= atol + rtol * np.abs(w)) | (np.isnan(g) & np.isnan(w))
    if tol == EXACT:
        # Exact ops: equal values, equal zero signs.
        close &= (np.signbit(g) == np.signbit(w)) | np.isnan(w)
    bad = np.nonzero(~(close & nan_ok))[0]
    if len(bad):
        i = bad[0]
        return f"{name}: element {i}: got {g[i]!r}, expected {w[i]!r} (rtol {rtol}, atol {atol})"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tool", default="tpu-run")
    ap.add_argument("--filter", default="", help="only cases whose name contains one of these (comma-separated)")
    ap.add_argument("--compiled", action="store_true",
                    help="compile and simulate (the default runs the interpreter, --interpret)")
    ap.add_argument("--keep", help="write cases into this folder and keep them")
    ap.add_argument("--dry-run", action="store_true", help="generate cases only")
    args = ap.parse_args()
    keys = args.filter.split(",")
    cases = [c for c in all_cases() if any(k in c.name for k in keys)]
    workdir = args.keep or tempfile.mkdtemp(prefix="tpu-oracle-")
    os.makedirs(workdir, exist_ok=True)
    failures = 0
    for c in cases:
        d = os.path.join(workdir, c.name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "module.hlo"), "w") as f:
            f.write(c.hlo)
        mode = [] if args.compiled else ["--interpret"]
        cmd = [args.tool] + mode + [os.path.join(d, "module.hlo")] + c.flags
        for i, a in enumerate(c.inputs):
            path = os.path.join(d, f"in{i}.npy")
            np.save(path, np.array(a, order="C"))
            cmd.append(f"--input=@{path}")
        outs = [os.path.join(d, f"out{i}.npy") for i in range(len(c.expected))]
        cmd += [f"--output=@{p}" for p in outs]
        for i, e in enumerate(c.expected):
            np.save(os.path.join(d, f"expected{i}.npy"), np.array(e, order="C"))
        if args.dry_run:
            continue
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL {c.name}: exit {r.returncode}: {r.stderr.strip()[:500]}")
            failures += 1
            continue
        msg = None
        for p, e in zip(outs, c.expected):
            msg = msg or compare(c.name, np.load(p), np.asarray(e), c.tol)
        if msg:
            print(f"FAIL {msg}")
            failures += 1
        else:
            print(f"ok   {c.name}")
    print(f"{len(cases) - failures} of {len(cases)} cases match numpy" if not args.dry_run
          else f"generated {len(cases)} cases in {workdir}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
