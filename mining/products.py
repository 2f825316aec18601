"""Block products that FIND candidates for the exact search, each with a proven error bound.

The exact kNN (`knn.py`) never keeps a product's value: it uses the product only to decide which
entries can be in a top-k, then scores those with `rescore.exact_dot` (c(x, y) = fl32(x . y), the
float32 nearest the exact dot product). For that decision it needs, for every entry, a bound
E(x, y) >= |a(x, y) - c(x, y)| on the product's accumulator value a. The proof, with x, y the
float32 rows and h_x, h_y what the kernel multiplies (h = x for fp32; the rounding of x to bf16 /
fp16, with subnormals flushed to 0 by us, otherwise), l_x = x - h_x (exact in float32):

  x.y - h_x.h_y = l_x.y + h_x.l_y                                   (expand x = h_x + l_x)
  |x.y - h_x.h_y| <= |l_x||y| + |h_x||l_y|                          (Cauchy-Schwarz)
  |a - h_x.h_y| <= gamma_d |h_x||h_y| + eta                          (fp32 accumulation of d
        exact products in any order, Higham eq. 3.5, gamma_d = d u / (1 - d u), u = 2^-24;
        eta = 2 d 2^-126 covers products and sums flushed to zero, as vdpbf16ps does)
  |c - x.y| <= u |x||y|                                              (c is x.y rounded to nearest)

  so |a - c| <= E(x, y) = |l_x||y| + |h_x||l_y| + gamma_d |h_x||h_y| + u |x||y| + eta.

Norms are float64 upper bounds (`rescore.norms_upper`). A block's output may be rounded again
(bf16 output): any monotone rounding keeps a >= t  =>  out(a) >= round_down(t), so entries are
screened against thresholds rounded down to the output format, and `upper`/`lower` bound a from
the output value (faithful rounding: |a - out| < 1 ulp of out).

Accumulation: torch's CPU bf16 mm runs oneDNN's matmul primitive (aten/src/ATen/native/mkldnn/
Matmul.cpp, when mkldnn is enabled and M*N*K > 16^3) whose default accumulation mode is `strict`:
f32 accumulators for floating-point data ("oneDNN uses wider accumulator datatypes (s32 for
integral computations, and f32 for floating-point computations)", oneDNN developer guide, Data
Types; dnnl::accumulation_mode::strict). numpy's float32 matmul (OpenBLAS sgemm, any kernel) and
cuBLAS with a float32 output and compute type accumulate in fp32 too. Smaller blocks, where torch
would not use oneDNN, go through the fp32 product.

Why bf16 and not int8 (torch._int_mm, exact int32 sums; on this project's Zen 4 machines about
1.9x bf16's rate at 1024 x 384 x 1536, `benchmarks/results/embed_speed.json`, matmul_ceiling):
bf16 rounds each component relatively (|l_x| <= 2^-8 |x|), while int8 with one scale per row errs by ~max|x_i| sqrt(d/12) / 127, several times more for unit vectors and far more with
the outlier dimensions of transformer embeddings; a wider band means more candidates to rescore.
torch 2.13 has no bf16 x bf16 -> fp32 mm on CPU (`out_dtype` is CUDA-only; the `bf16` fpmath mode
of fp32 matmuls did not engage on this Zen 4): the bf16 product's output is bf16, whose rounding
the screening above absorbs.
"""

from __future__ import annotations

import numpy as np

from xmine.errors import ConfigError
from xmine.mining.rescore import U32, gamma, norms_upper
from xmine.mining.screen import comparable_keys, keys_of

PRODUCTS = ("auto", "fp32", "bf16", "cuda")
_TINY32 = 2.0**-126  # smallest normal float32 (and bf16)
_MKLDNN_MIN_MNK = 16 * 16 * 16  # torch uses oneDNN for bf16 mm above this size (Matmul.cpp checksize)


def _cpu_has_bf16() -> bool:
    """avx512_bf16 or AMX: a CPU on which a bf16 product runs faster than fp32."""
    try:
        import torch

        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except Exception:  # noqa: BLE001 - private torch API absent: ask the kernel
        try:
            with open("/proc/cpuinfo") as f:
                flags = f.read()
        except OSError:
            return False
        return "avx512_bf16" in flags or "amx_bf16" in flags


def _torch_bf16_usable() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled)


def resolve_product(name: str) -> str:
    """`auto` -> "cuda" when torch sees a GPU, else "bf16" on CPUs with avx512_bf16/AMX, else "fp32".
    An explicit choice that cannot run raises ConfigError (no silent fallback)."""
    if name not in PRODUCTS:
        raise ConfigError(f"product must be one of {', '.join(PRODUCTS)} (got {name!r})")
    if name == "auto":
        try:
            import torch

            if torch.cuda.is_available():
                return "cuda"
        except ImportError:
            return "fp32"
        return "bf16" if _cpu_has_bf16() and _torch_bf16_usable() else "fp32"
    if name == "bf16" and not _torch_bf16_usable():
        raise ConfigError("product 'bf16' needs torch with oneDNN (mkldnn) enabled; use --product fp32")
    if name == "cuda":
        try:
            import torch
        except ImportError:
            raise ConfigError("product 'cuda' needs torch with CUDA; torch is not installed") from None
        if not torch.cuda.is_available():
            raise ConfigError("product 'cuda' asked for, but torch sees no CUDA device "
                              f"(torch {torch.__version__}); use --product auto, bf16 or fp32")
    return name


def _round_down_f32(t: np.ndarray) -> np.ndarray:
    """The largest float32 <= t (float64 input)."""
    f = t.astype(np.float32)
    too_high = f.astype(np.float64) > t
    f[too_high] = np.nextafter(f[too_high], np.float32(-np.inf))
    return f


def _bf16_threshold_keys(t: np.ndarray) -> np.ndarray:
    """Keys (`screen.keys_of`) of thresholds t (float64) rounded down to bf16: of the bit patterns
    (int16) of the largest bf16 <= t."""
    b = _round_down_f32(t).view(np.uint32)
    hi = (b >> 16).astype(np.uint32)
    neg_inexact = ((b & 0x80000000) != 0) & ((b & 0xFFFF) != 0)
    hi[neg_inexact] += 1  # truncation rounds negatives up: one more unit of magnitude
    return keys_of(hi.astype(np.uint16).view(np.int16))


def _bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def _ulp_bound(v: np.ndarray, mantissa_bits: int) -> np.ndarray:
    """> |a - v| for v a faithful rounding of a to `mantissa_bits` explicit bits (float64)."""
    pow2 = (v.astype(np.float32).view(np.uint32) & 0x7F800000).view(np.float32).astype(np.float64)
    return np.where(np.isfinite(v), pow2 * 2.0**-mantissa_bits + _TINY32, 0.0)


def extract(s: np.ndarray, thr: np.ndarray, axis: int) -> np.ndarray:
    """Flat indices of the entries of s >= thr (thr per row if axis == 1, per column if axis == 0)."""
    best = s.max(axis=axis)
    hit = np.flatnonzero(best >= thr)
    w = s.shape[1]
    if len(hit) == 0:
        return np.zeros(0, np.int64)
    if len(hit) * (2 if axis == 1 else 8) > s.shape[1 - axis]:
        # Many hits: one full comparison is cheaper than gathering (numpy's column gather is slow).
        return np.flatnonzero(s >= (thr[:, None] if axis == 1 else thr[None, :]))
    if axis == 1:
        flat = np.flatnonzero(s[hit] >= thr[hit, None])
        return hit[flat // w] * w + flat % w
    flat = np.flatnonzero(np.take(s, hit, axis=1) >= thr[None, hit])
    return (flat // len(hit)) * w + hit[flat % len(hit)]


def group_floor(s: np.ndarray, k: int, axis: int, *, reduce_groups: bool = True) -> np.ndarray:
    """Per row (axis=1) or column (axis=0) of s, the least of the maxima of k disjoint groups of
    its entries: k distinct entries reach it, so it bounds the k-th largest from below. Two
    reductions instead of a partition: a third of the cost on a 1024 x 4096 block. With
    `reduce_groups=False`, the (k, ...) group maxima themselves."""
    g = s.shape[axis] // k
    if axis == 1:
        maxima = s[:, : g * k].reshape(len(s), k, g).max(axis=2).T
    else:
        maxima = s[: g * k].reshape(k, g, s.shape[1]).max(axis=1)
    return maxima.min(axis=0) if reduce_groups else maxima


def _split(s: np.ndarray, flat: np.ndarray, values) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    w = s.shape[1]
    return flat // w, flat % w, values(s.reshape(-1)[flat])


_EMPTY = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))


class RowTerms:
    """Per-row float64 upper bounds: |x| (n), |h_x| (nh) and |l_x| (r); `tiny`: some component
    rounds below the smallest normal (to be flushed before the product)."""

    def __init__(self, n, nh, r, tiny: bool = False):
        self.n, self.nh, self.r, self.tiny = n, nh, r, tiny

    def max(self) -> tuple[float, float, float]:
        return float(self.n.max()), float(self.nh.max()), float(self.r.max())

    def __getitem__(self, rows) -> "RowTerms":
        return RowTerms(self.n[rows], self.nh[rows], self.r[rows], self.tiny)


class Fp32Product:
    """numpy float32 matmul (BLAS sgemm): h = x, output = accumulator. The other products extend
    it: a block they compute in fp32 is screened as its own."""

    name = "fp32"

    def __init__(self, dim: int):
        self.gamma = gamma(dim, U32)
        self.dim = dim

    def terms(self, rows: np.ndarray) -> RowTerms:
        n = norms_upper(rows)
        return RowTerms(n, n, np.zeros_like(n))

    def prepare(self, rows: np.ndarray, flush: bool = False):
        return rows

    def fits_prepared(self, rows: np.ndarray) -> bool:
        """Whether a prepared copy of all of `rows` (held in memory already) may be kept for the
        whole search: on the CPU its copy is at most as large as the rows themselves."""
        return True

    def max_workers(self, block_entries: int) -> int | None:
        """The most worker threads whose blocks of `block_entries` fit beside each other (None: no
        limit but the CPUs; the product runs in host memory)."""
        return None

    def buffer(self, size: int):
        return np.empty(size, dtype=np.float32)

    def scores(self, px, py, buf):
        s = buf[: len(px) * len(py)].reshape(len(px), len(py))
        np.matmul(px, py.T, out=s)
        return s

    def screen(self, s, t_rows, t_cols):
        """Two (rows, cols, values float32) triples: every entry whose accumulator may be >= its
        row's t (first) and its column's t (second). A threshold of +inf skips that side."""
        tr, tc = _round_down_f32(t_rows), _round_down_f32(t_cols)
        return (_split(s, extract(s, tr, 1), np.asarray) if tr.min(initial=np.inf) < np.inf else _EMPTY,
                _split(s, extract(s, tc, 0), np.asarray) if tc.min(initial=np.inf) < np.inf else _EMPTY)

    def keyed(self, s, t_rows, t_cols):
        """The block and its thresholds for `screen.screen_merge`: (block bit patterns, row threshold
        keys, column threshold keys, decode shift). It keeps the entries `screen` returns."""
        return (s.view(np.int32), keys_of(_round_down_f32(t_rows).view(np.int32)),
                keys_of(_round_down_f32(t_cols).view(np.int32)), 0)

    def kth_floor(self, s, k: int, axis: int) -> np.ndarray:
        """A product value that at least k entries of each row (axis=1) or column (axis=0) reach,
        float32: the least of the maxima of k disjoint groups (`group_floor`)."""
        return group_floor(s, k, axis)

    def lower(self, v):
        return np.asarray(v, dtype=np.float64)

    upper = lower


class Bf16Product(Fp32Product):
    """torch.mm on bf16 tensors (oneDNN, fp32 accumulation, bf16 output) on the CPU."""

    name = "bf16"

    def __init__(self, dim: int):
        import torch

        super().__init__(dim)
        self.torch = torch

    def _round(self, rows: np.ndarray, flush: bool):
        """bf16 tensor of rows, subnormals flushed to 0 if `flush` (oneDNN treats them as 0)."""
        t = self.torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32)).to(self.torch.bfloat16)
        if flush:
            t = self.torch.where(t.abs() < _TINY32, 0, t)
        return t

    def terms(self, rows: np.ndarray) -> RowTerms:
        rows = np.asarray(rows, dtype=np.float32)
        h = self._round(rows, False).float().numpy()
        small = np.abs(h) < _TINY32
        tiny = bool((small & (h != 0)).any())
        h[small] = 0
        with np.errstate(invalid="ignore"):  # (a non-finite row: refused in one line where it is found, no warning first)
            residual = rows.astype(np.float64) - h
        return RowTerms(norms_upper(rows), norms_upper(h), norms_upper(residual), tiny)

    def prepare(self, rows: np.ndarray, flush: bool = True):
        return self._round(rows, flush)

    def buffer(self, size: int):
        return self.torch.empty(size, dtype=self.torch.bfloat16)

    def scores(self, px, py, buf):
        if len(px) * len(py) * self.dim <= _MKLDNN_MIN_MNK:  # torch would not use oneDNN: fp32, as the bound assumes
            return np.matmul(px.float().numpy(), py.float().numpy().T)
        s = buf[: len(px) * len(py)].view(len(px), len(py))
        self.torch.mm(px, py.T, out=s)
        return s.view(self.torch.int16).numpy()

    def screen(self, s, t_rows, t_cols):
        if s.dtype == np.float32:  # small block, fp32
            return super().screen(s, t_rows, t_cols)
        kr, kc = _bf16_threshold_keys(t_rows), _bf16_threshold_keys(t_cols)
        keys, _ = comparable_keys(s, kr, kc)
        skip = _bf16_threshold_keys(np.array([np.inf]))[0]
        return tuple(_split(s, extract(keys, kt, axis), _bits_to_f32) if kt.min(initial=skip) < skip else _EMPTY
                     for kt, axis in ((kr, 1), (kc, 0)))

    def keyed(self, s, t_rows, t_cols):
        if s.dtype == np.float32:  # small block, fp32
            return super().keyed(s, t_rows, t_cols)
        return s, _bf16_threshold_keys(t_rows), _bf16_threshold_keys(t_cols), 16

    def kth_floor(self, s, k: int, axis: int) -> np.ndarray:
        if s.dtype == np.float32:
            return group_floor(s, k, axis)
        # Group maxima of the raw bit patterns: each is the pattern of an entry of its group (for
        # an all-negative group, not its largest one, so still a value some entry reaches).
        return _bits_to_f32(group_floor(s, k, axis, reduce_groups=False)).min(axis=0)

    def lower(self, v):
        v = np.asarray(v, dtype=np.float64)
        return v - _ulp_bound(v, 7)

    def upper(self, v):
        v = np.asarray(v, dtype=np.float64)
        return v + _ulp_bound(v, 7)


class CudaProduct(Fp32Product):
    """torch.mm on fp16 CUDA tensors with a float32 output (fp32 accumulation), screened on the GPU.

    Only the candidates' coordinates and values cross to the host. fp16 keeps 11 significant bits
    (|l_x| <= 2^-11 |x|); inputs beyond its range (|x_i| >= 65504) are refused, subnormals flushed
    by us. Reduced-precision split-K reductions are switched off for the run (`knn` does it)."""

    name = "cuda"

    def __init__(self, dim: int, device: str = "cuda"):
        import torch

        super().__init__(dim)
        self.torch = torch
        self.device = torch.device(device)

    def _round(self, rows: np.ndarray):
        rows = np.ascontiguousarray(rows, dtype=np.float32)
        if not np.isfinite(rows).all() or np.abs(rows).max(initial=0) >= 65504:
            raise ConfigError("the cuda product needs finite embeddings with |components| < 65504 (fp16); "
                              "use --product fp32")
        h = rows.astype(np.float16)
        h[np.abs(h) < 2.0**-14] = 0  # fp16 subnormals: flushed by us, so any kernel is covered
        return h

    def terms(self, rows: np.ndarray) -> RowTerms:
        rows = np.asarray(rows, dtype=np.float32)
        h = self._round(rows).astype(np.float64)
        return RowTerms(norms_upper(rows), norms_upper(h), norms_upper(rows.astype(np.float64) - h))

    def prepare(self, rows: np.ndarray, flush: bool = True):
        return self.torch.from_numpy(self._round(rows)).to(self.device, non_blocking=False)

    def fits_prepared(self, rows: np.ndarray) -> bool:
        """Whether `rows` in fp16 take at most a quarter of the GPU's free memory (then they are
        copied once, not once per row block)."""
        free, _ = self.torch.cuda.mem_get_info(self.device)
        return rows.size * 2 <= free // 4

    def max_workers(self, block_entries: int) -> int | None:
        """Workers whose blocks fit in three quarters of the GPU's free memory (a quarter is for the
        prepared other side): each holds its float32 block and the screen's masks and copies, under
        twice the block (measured: benchmarks/results/notes/gpu_check.md)."""
        free, _ = self.torch.cuda.mem_get_info(self.device)
        return max(1, (free * 3 // 4) // (2 * 4 * block_entries))

    def buffer(self, size: int):
        return None

    def scores(self, px, py, buf):
        return self.torch.mm(px, py.T, out_dtype=self.torch.float32)

    def screen(self, s, t_rows, t_cols):
        torch = self.torch
        out = []
        for t, shape in ((t_rows, (-1, 1)), (t_cols, (1, -1))):
            t = torch.from_numpy(_round_down_f32(t)).to(self.device).view(shape)
            rows, cols = (s >= t).nonzero(as_tuple=True)
            out.append((rows.cpu().numpy(), cols.cpu().numpy(), s[rows, cols].cpu().numpy()))
        return tuple(out)

    def keyed(self, s, t_rows, t_cols):
        return None  # screened on the GPU: only candidates cross to the host

    def kth_floor(self, s, k: int, axis: int) -> np.ndarray:
        return self.torch.topk(s, k, dim=axis).values.select(axis, k - 1).cpu().numpy()


def make_product(name: str, dim: int):
    """The block product for a resolved name (see `resolve_product`)."""
    return {"fp32": Fp32Product, "bf16": Bf16Product, "cuda": CudaProduct}[name](dim)


def eta(dim: int) -> float:
    """Absolute error allowance for underflow (flush-to-zero of products and sums)."""
    return 2 * dim * _TINY32 + 2.0**-149


def pair_bounds(a: RowTerms, b: RowTerms, product) -> np.ndarray:
    """E(x, y) for the pairs (a[i], b[i]) (float64, inflated by 2^-30 for its own rounding)."""
    e = a.r * b.n + a.nh * b.r + product.gamma * a.nh * b.nh + U32 * a.n * b.n
    return e * (1 + 2.0**-30) + eta(product.dim)


def row_bounds(a: RowTerms, b_max: tuple[float, float, float], product) -> np.ndarray:
    """E-bar per row of side a: the bound E(x, y) maximised over every row y of the other side,
    given the other side's maxima (n, nh, r): E is increasing in each of them."""
    return pair_bounds(a, RowTerms(*b_max), product)
