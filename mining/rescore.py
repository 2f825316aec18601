"""Canonical similarity scores: the float32 nearest to the EXACT dot product of two stored rows.

Every score the exact search returns comes from `exact_dot`, never from a block product, so a
pair's score does not depend on which product (fp32, bf16, GPU) found it, on block shapes, on
the BLAS kernel or on the summation order: rows are taken as float32 (float16 exactly, float64
rounded once), and the score is fl32(sum_i x_i y_i) with the sum taken exactly, rounded to
nearest-even.

How: every product x_i * y_i of two float32 values is exact in float64 (24 + 24 < 53 bits). Their
float64 sum d, in any order, is within eps = gamma_d(u64) * |x||y| of the exact sum t (Higham,
Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 3.5; u64 = 2^-53). Rounding to
nearest is monotone, so when fl32(d - eps) == fl32(d + eps) that value is fl32(t). Otherwise (about
one pair in a million) the sum is computed in integers and rounded by hand.
"""

from __future__ import annotations

import numpy as np

U32 = 2.0**-24  # unit roundoff of float32 (round to nearest)
U64 = 2.0**-53
# Rows per chunk of the rescoring (bounded memory: 2 * chunk * dim float64).
_CHUNK = 8192


def gamma(d: int, u: float) -> float:
    """gamma_d = d u / (1 - d u): the relative error bound of a d-term sum of products (Higham 3.5)."""
    if d * u >= 1:
        raise ValueError(f"dimension {d} too large for an error bound at unit roundoff {u}")
    return d * u / (1 - d * u)


def norms_upper(a: np.ndarray) -> np.ndarray:
    """Upper bounds (float64) of the Euclidean norms of the rows of `a` (float32 values).

    Squares of float32 values are exact in float64; their float64 sum is within gamma_d(u64) of
    the exact sum and the square root and this product add u64 each: 1 + 4 (d + 2) u64 covers all."""
    a = np.asarray(a)
    return np.sqrt(np.einsum("ij,ij->i", a, a, dtype=np.float64)) * (1 + 4 * (a.shape[1] + 2) * U64)


def _round_int_to_f32(num: int, exp: int) -> np.float32:
    """Correctly rounded float32 of num * 2^exp (round to nearest, ties to even)."""
    if num == 0:
        return np.float32(0.0)
    sign, mag = (-1, -num) if num < 0 else (1, num)
    # Keep 24 significant bits, or fewer in the subnormal range (ulp never below 2^-149).
    shift = max(mag.bit_length() - 24, -149 - exp)
    if shift > 0:
        q, r = divmod(mag, 1 << shift)
        half = 1 << (shift - 1)
        if r > half or (r == half and q & 1):
            q += 1
        mag, exp = q, exp + shift
    # mag <= 2^24 and exp >= -149: exactly representable in float64; float32 overflow -> inf.
    with np.errstate(over="ignore"):
        return np.float32(sign * float(np.ldexp(float(mag), exp)))


def _exact_dot_slow(x: np.ndarray, y: np.ndarray) -> np.float32:
    """fl32 of the exact dot product of two float32 vectors, in integer arithmetic."""
    mx, ex = np.frexp(x.astype(np.float64))
    my, ey = np.frexp(y.astype(np.float64))
    # float32 significands have 24 bits: mantissa * 2^24 is an exact integer.
    ix = (mx * 2.0**24).astype(np.int64)
    iy = (my * 2.0**24).astype(np.int64)
    e = (ex.astype(np.int64) + ey.astype(np.int64)) - 48
    nz = (ix != 0) & (iy != 0)
    if not nz.any():
        return np.float32(0.0)
    e0 = int(e[nz].min())
    total = sum(int(a) * int(b) << (int(k) - e0) for a, b, k in zip(ix[nz], iy[nz], e[nz]))
    return _round_int_to_f32(total, e0)


def exact_dot(x_rows: np.ndarray, y_rows: np.ndarray, nx: np.ndarray | None = None,
              ny: np.ndarray | None = None) -> np.ndarray:
    """Canonical scores fl32(x_rows[i] . y_rows[i]) (float32, shape (n,)) of row pairs.

    `nx`, `ny`: upper bounds of the rows' norms, if known (else computed)."""
    x_rows = np.asarray(x_rows, dtype=np.float32)
    y_rows = np.asarray(y_rows, dtype=np.float32)
    n, d = x_rows.shape
    out = np.empty(n, dtype=np.float32)
    if n == 0:
        return out
    g = gamma(d, U64)
    for s in range(0, n, _CHUNK):
        a, b = x_rows[s : s + _CHUNK], y_rows[s : s + _CHUNK]
        dots = np.einsum("ij,ij->i", a, b, dtype=np.float64)  # products and sums in float64
        na = norms_upper(a) if nx is None else np.asarray(nx[s : s + _CHUNK], dtype=np.float64)
        nb = norms_upper(b) if ny is None else np.asarray(ny[s : s + _CHUNK], dtype=np.float64)
        # 2x the bound and an absolute 2^-1000 cover the float64 rounding of eps and d +- eps.
        eps = 2 * g * na * nb + 2.0**-1000
        lo, hi = (dots - eps).astype(np.float32), (dots + eps).astype(np.float32)
        out[s : s + len(a)] = lo
        for i in np.flatnonzero(lo != hi):
            out[s + i] = _exact_dot_slow(x_rows[s + i], y_rows[s + i])
    return out
