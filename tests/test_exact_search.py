"""The exact search: canonical scores, the products' error bound, and identical output whatever
the product (fp32, bf16), block shape, worker count or band overflow; real me5 embeddings and
`xmine mine` on embedding stores included."""

from __future__ import annotations

import sys
from fractions import Fraction

import numpy as np
import pytest

import xmine.mining.knn_product as knn_module
from xmine.errors import ConfigError, NonFiniteRowError
from xmine.mining.knn import exact_knn_both
from xmine.mining.products import Bf16Product, Fp32Product, _bits_to_f32, pair_bounds, resolve_product
from xmine.mining.rescore import exact_dot

from flores import flores_lines

PRODUCTS = ("fp32", "bf16")


def _unit(a: np.ndarray) -> np.ndarray:
    return (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)


def _fraction_f32(x: np.ndarray, y: np.ndarray) -> np.float32:
    """The float32 nearest sum(x_i y_i), by rational arithmetic and a search among neighbours."""
    t = sum(Fraction(float(a)) * Fraction(float(b)) for a, b in zip(x, y))
    f = np.float32(float(t))
    cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - t), int(np.float32(c).view(np.int32)) & 1))
    return np.float32(best)


def brute_force(x: np.ndarray, y: np.ndarray, k: int):
    """Top-k both ways of the canonical scores of every pair: score descending, then index."""
    n, m = len(x), len(y)
    s = np.stack([exact_dot(np.repeat(x[i : i + 1], m, 0), y) for i in range(n)])

    def topk(a, kk):
        idx = np.lexsort((np.broadcast_to(np.arange(a.shape[1]), a.shape), -a), axis=1)[:, :kk]
        return np.take_along_axis(a, idx, 1), idx

    fs, fi = topk(s, min(k, m))
    bs, bi = topk(np.ascontiguousarray(s.T), min(k, n))
    return fs, fi, bs, bi


def _assert_same(a, b):
    for u, v in zip(a, b):
        assert u.dtype == v.dtype and u.shape == v.shape
        np.testing.assert_array_equal(u, v)


# ---------------------------------------------------------------- canonical scores
def test_exact_dot_is_the_correctly_rounded_float32():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 37)).astype(np.float32)
    y = rng.standard_normal((200, 37)).astype(np.float32)
    # Hard cases: an exact float32 midpoint (ties to even), heavy cancellation, subnormal results.
    x[0, :3], y[0, :3] = [1, 2.0**-24, 0], [1, 1, 0]
    x[0, 3:] = y[0, 3:] = 0
    x[1, :3], y[1, :3] = [1e8, 1, -1e8], [1, 3e-8, 1]
    x[1, 3:] = 0
    x[2] *= np.float32(1e-22)
    y[2] *= np.float32(1e-22)
    got = exact_dot(x, y)
    want = np.array([_fraction_f32(a, b) for a, b in zip(x, y)], dtype=np.float32)
    np.testing.assert_array_equal(got, want)
    assert got[0] == np.float32(1.0)  # 1 + 2^-24 is a tie: to even


# ---------------------------------------------------------------- the bound itself
def _adversarial(rng, n: int, d: int) -> np.ndarray:
    a = rng.standard_normal((n, d)).astype(np.float32)
    # components whose bf16 rounding error is maximal: just below a half unit of bf16
    a[: n // 4] = (a[: n // 4].view(np.uint32) | np.uint32(0x7FFF)).view(np.float32)
    a[n // 4 : n // 2, 0] *= 200  # one huge component
    a[n // 2 : n // 2 + 10] = a[n // 2]  # duplicates: many equal scores
    a[n // 2 + 10 : n // 2 + 40] = a[n // 2 + 10] + 1e-4 * rng.standard_normal((30, d))  # near-equal scores
    a = _unit(a)
    a[-20:] *= np.float32(1e3)  # not normalised at all
    a[-40:-20] *= np.float32(1e-3)
    a[-45:-40, 1:] *= np.float32(1e-36)  # components that round to bf16 subnormals
    return a


@pytest.mark.parametrize("cls", [Fp32Product, Bf16Product])
def test_bound_holds_for_every_pair_of_adversarial_vectors(cls):
    rng = np.random.default_rng(1)
    d = 384
    x, y = _adversarial(rng, 300, d), _adversarial(rng, 260, d)
    prod = cls(d)
    tx, ty = prod.terms(x), prod.terms(y)
    s = prod.scores(prod.prepare(x, tx.tiny), prod.prepare(y, ty.tiny), prod.buffer(len(x) * len(y)))
    v = (s if s.dtype == np.float32 else _bits_to_f32(s)).astype(np.float64)  # bf16 output: bit patterns
    ii, jj = np.meshgrid(np.arange(len(x)), np.arange(len(y)), indexing="ij")
    ii, jj = ii.ravel(), jj.ravel()
    exact = exact_dot(x[ii], y[jj]).astype(np.float64)
    e = pair_bounds(tx[ii], ty[jj], prod)
    vv = v.ravel()
    assert (prod.lower(vv) - e <= exact).all() and (exact <= prod.upper(vv) + e).all()
    # Not vacuous: the worst pair uses a real share of its bound (fp32: sums of 384 rounded terms
    # err like sqrt(d) u, the bound says d u; bf16: the input rounding nearly reaches it).
    share = (np.abs(vv - exact) / (e + prod.upper(vv) - vv)).max()
    assert share > (0.02 if cls is Fp32Product else 0.2), share


# ---------------------------------------------------------------- identical output, any product
def _near_ties(rng, n: int, m: int, d: int):
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = rng.standard_normal((m, d)).astype(np.float32)
    a, b = m // 6, n // 6
    y[:a] = y[0]  # one vector many times: its neighbours tie exactly
    y[a : 2 * a] = y[a] + 1e-4 * rng.standard_normal((a, d))  # and near-ties far inside any band
    x[:b] = x[0]
    x[b : 2 * b] = y[2 * a] + 1e-3 * rng.standard_normal((b, d))
    x[2 * b : 3 * b] = -x[2 * b : 3 * b]
    return _unit(x), _unit(y)


@pytest.mark.parametrize("shape,blocks,k,workers", [
    ((61, 47), (7, 13), 3, 1), ((300, 250), (64, 100), 4, 2), ((200, 150), (1000, 1000), 50, 1),
    ((700, 650), (128, 256), 10, 3),
])
def test_every_product_gives_the_brute_force_result(shape, blocks, k, workers):
    rng = np.random.default_rng(sum(shape) + k)
    x, y = _near_ties(rng, *shape, 48)
    want = brute_force(x, y, k)
    for product in PRODUCTS:
        got = exact_knn_both(x, y, k, block_rows=blocks[0], block_cols=blocks[1], workers=workers, product=product)
        _assert_same(want, got)


def test_band_overflow_goes_through_the_exact_second_pass(monkeypatch):
    """With lists only k wide, every tie overflows them; the second pass must still find all."""
    rng = np.random.default_rng(4)
    x, y = _near_ties(rng, 400, 300, 48)
    want = brute_force(x, y, 4)
    calls = []
    monkeypatch.setattr(knn_module, "candidate_width", lambda k: k)
    real = knn_module.exact_dot
    # only the second pass's calls: the lists' own rescoring goes through exact_dot too
    monkeypatch.setattr(knn_module, "exact_dot", lambda *a: (sys._getframe(1).f_code.co_name == "_second_pass"
                                                             and calls.append(len(a[0]))) or real(*a))
    for product in PRODUCTS:
        _assert_same(want, exact_knn_both(x, y, 4, block_rows=64, block_cols=50, workers=2, product=product))
    assert calls, "no row or column overflowed: the test does not reach the second pass"


def test_float16_memmap_inputs(tmp_path):
    rng = np.random.default_rng(5)
    x, y = _near_ties(rng, 300, 260, 32)
    xm = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype=np.float16, shape=x.shape)
    xm[:] = x
    ym = np.lib.format.open_memmap(tmp_path / "y.npy", mode="w+", dtype=np.float16, shape=y.shape)
    ym[:] = y
    want = brute_force(xm.astype(np.float32), ym.astype(np.float32), 4)
    for product in PRODUCTS:
        _assert_same(want, exact_knn_both(np.load(tmp_path / "x.npy", mmap_mode="r"),
                                          np.load(tmp_path / "y.npy", mmap_mode="r"), 4, block_rows=64,
                                          block_cols=100, product=product))


def test_non_finite_rows_are_refused():
    x = np.ones((5, 8), np.float32)
    x[3, 2] = np.nan
    with pytest.raises(NonFiniteRowError, match="src embedding row 3 "):
        exact_knn_both(x, np.ones((4, 8), np.float32), 2, product="fp32")


def test_cuda_without_a_gpu_is_a_clear_error():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ConfigError, match="no CUDA device"):
        resolve_product("cuda")
    with pytest.raises(ConfigError, match="product must be one of"):
        resolve_product("int8")
    assert resolve_product("auto") in ("bf16", "fp32")


def test_blocks_default_to_the_products():
    """No block sizes given: the product's (cache-sized on the CPU, 16 times larger for cuda, whose
    host work per block dominated with the CPU's blocks: benchmarks/results/notes/gpu_check.md).
    Asking for cuda without a GPU stays a one-line error, now raised when the blocks are chosen."""
    torch = pytest.importorskip("torch")
    from xmine.mining.knn_product import CUDA_BLOCK_COLS, CUDA_BLOCK_ROWS, DEFAULT_BLOCK_COLS, DEFAULT_BLOCK_ROWS
    from xmine.mining.knn_product import default_blocks

    assert default_blocks("fp32") == default_blocks("bf16") == (DEFAULT_BLOCK_ROWS, DEFAULT_BLOCK_COLS)
    x, y = np.eye(3, 8, dtype=np.float32), np.eye(5, 8, dtype=np.float32)
    if torch.cuda.is_available():
        assert default_blocks("auto") == (CUDA_BLOCK_ROWS, CUDA_BLOCK_COLS)
        return
    assert default_blocks("auto") == (DEFAULT_BLOCK_ROWS, DEFAULT_BLOCK_COLS)
    with pytest.raises(ConfigError, match="no CUDA device"):
        exact_knn_both(x, y, 2, product="cuda")
    with pytest.raises(ConfigError, match="no CUDA device"):  # explicit blocks: the product is still refused
        exact_knn_both(x, y, 2, product="cuda", block_rows=2, block_cols=2)


def test_blocks_larger_than_half_the_memory_are_refused(monkeypatch):
    """(a helper: `--block-rows 10**12 --block-cols 10**12` was taken, a block as large as the sides:
    on 200k x 20k rows about 16 GB, without a word) Blocks whose scores would take more than half
    the machine's memory are a one-line error; the product's own sizes are not (here, a machine
    of 64 MB: 3,000 x 3,000 sides)."""
    from xmine.index import choose

    monkeypatch.setattr(choose, "total_memory_bytes", lambda: 64 << 20)
    rng = np.random.default_rng(0)
    x, y = (v / np.linalg.norm(v, axis=1, keepdims=True) for v in rng.standard_normal((2, 3000, 4)).astype(np.float32))
    with pytest.raises(ConfigError, match=r"^--block-rows/--block-cols with --workers 2: 2 block\(s\) of 3,000 x 3,000 "
                                          r"scores take "):  # (was: --workers, a factor, unnamed)
        exact_knn_both(x, y, 4, block_rows=10**12, block_cols=10**12, workers=2, product="fp32")
    fwd_s, fwd_i, _, _ = exact_knn_both(x, y, 4, workers=2, product="fp32")  # 1,024 x 3,000 blocks: 23 MB
    assert fwd_i.shape == (3000, 4)


def test_gpu_check_reads_the_encoding_rate_embed_reports(tmp_path):
    """The encoder check's rate is embed's own (encoding alone): its wall times held the process
    start and the model load, the first also the model's rebuild (benchmarks/results/notes/gpu_check.md)."""
    from labscripts import lab_module

    gpu_check = lab_module("gpu_check")
    (tmp_path / "de.txt").write_text("Guten Morgen.\nWie geht es dir?\nDas Wetter ist schön.\n", encoding="utf-8")
    wall, printed = gpu_check._run_output("embed", tmp_path / "de.txt", "--lang", "de", "--encoder", "use-m3", "-q",
                                          "-o", tmp_path / "store")
    rate = gpu_check._encoding_rate(printed)
    assert rate is not None and rate > 3 / wall, printed  # faster than the whole command's 3 sentences / wall


def test_gpu_check_chooses_its_checks_and_refuses_without_a_gpu():
    """`run.py gpu-check --checks` names an unknown check; without a GPU it refuses in one line (no
    CPU fallback), and it no longer needs faiss when the faiss checks are left out."""
    import subprocess
    import sys

    from labscripts import RUN

    torch = pytest.importorskip("torch")

    def lab(*args):
        return subprocess.run([sys.executable, str(RUN), "gpu-check", *args], capture_output=True, text=True)

    bad = lab("--checks", "product,faiss-hnsw")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr  # (was: a usage block)
    assert bad.stderr.startswith("lab: error: ") and "faiss-hnsw: choose from encoder, product, faiss-flat" in bad.stderr
    if torch.cuda.is_available():
        return
    for checks in ("product", "faiss-flat"):
        proc = lab("--checks", checks)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().splitlines() == ["lab: error: no CUDA GPU is visible to torch: the GPU paths "
                                                    "cannot be checked on this machine"]


# ---------------------------------------------------------------- real embeddings
def _flores(data_dir, lang: str, n: int) -> list[str]:
    return flores_lines(data_dir, lang, n)


@pytest.fixture(scope="module")
def real(data_dir, me5):
    from xmine.encoders.embed_cache import cached_encode

    # The sentences test_mining embeds too (the embedding cache holds them).
    de, en = _flores(data_dir, "deu_Latn", 300), _flores(data_dir, "eng_Latn", 800)
    en = en[:300] + en[600:700]
    return cached_encode(me5, de, show_progress=False), cached_encode(me5, en, show_progress=False), de, en


def test_real_me5_embeddings_with_near_ties(real):
    x, y, _, _ = real
    rng = np.random.default_rng(6)
    # Near-duplicates of real sentences: rows repeated and perturbed far below the bf16 bound.
    x = np.concatenate([x, x[:20], _unit(x[20:40] + 2e-4 * rng.standard_normal((20, x.shape[1])))])
    y = np.concatenate([y, y[:10], y[:10], _unit(y[10:30] + 1e-4 * rng.standard_normal((20, y.shape[1])))])
    want = brute_force(x.astype(np.float32), y.astype(np.float32), 4)
    for product in PRODUCTS:
        for blocks in ((64, 96), (1024, 4096)):
            _assert_same(want, exact_knn_both(x, y, 4, block_rows=blocks[0], block_cols=blocks[1], product=product))


@pytest.mark.slow
def test_mine_on_stores_writes_the_same_bytes_with_either_product(tmp_path, real, me5):
    from click.testing import CliRunner

    from xmine.cli import main
    from xmine.store import embed_corpus

    _, _, de, en = real
    (tmp_path / "de.txt").write_text("\n".join(de[:100] + de[:5]) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en[:130]) + "\n", encoding="utf-8")
    for lang in ("de", "en"):
        embed_corpus(tmp_path / f"{lang}.txt", tmp_path / f"store-{lang}", encoder=me5, lang=lang, show_progress=False)
    outs = {}
    for product in PRODUCTS:
        out = tmp_path / f"mined-{product}.tsv"
        result = CliRunner().invoke(main, ["mine", str(tmp_path / "store-de"), str(tmp_path / "store-en"), "-o",
                                           str(out), "--product", product, "--meta", "--block-rows", "64",
                                           "--block-cols", "96"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        outs[product] = (out.read_bytes(), (tmp_path / f"mined-{product}.tsv.meta").read_bytes())
    assert outs["fp32"] == outs["bf16"]
    rows = outs["bf16"][0].decode().splitlines()
    assert len(rows) >= 95  # 100 German sentences (5 repeated), 130 English: most are translations


# ---------------------------------------------------------------- the compiled screening pass
def _random_block(rng, product, rows, cols):
    """A block as the product returns it, with repeated values (ties) and both signs."""
    s = np.round(rng.standard_normal((rows, cols)) * 8) / 64  # few distinct values: many ties
    if product.name == "fp32":
        return np.ascontiguousarray(s, dtype=np.float32)
    return product.torch.from_numpy(s.astype(np.float32)).to(product.torch.bfloat16).view(product.torch.int16).numpy()


@pytest.mark.parametrize("cls", [Fp32Product, Bf16Product])
def test_compiled_screen_merges_what_numpys_passes_merge(cls, monkeypatch):
    """Random blocks and thresholds (negative, -inf, +inf, on tie values) into half-filled lists:
    the kernel's lists hold the same values as numpy's, and each listed index is an entry of the
    block with that value (which of several equal values at a list's end is kept may differ)."""
    if knn_module.screen_merge is None:
        pytest.skip("numba is not installed: knn.py runs numpy's passes only")
    rng = np.random.default_rng(11)
    product = cls(48)
    for trial in range(40):
        rows, cols = rng.integers(1, 90), rng.integers(1, 300)
        s = _random_block(rng, product, rows, cols)
        t_rows = rng.choice([-np.inf, np.inf, -0.2, 0.0, 0.125, 0.25, 0.3], rows) + (trial % 2) * 1e-9
        t_cols = rng.choice([-np.inf, np.inf, -0.1, 0.0, 0.125, 0.2], cols)
        lists = []
        for fused in (True, False):
            if not fused:
                monkeypatch.setattr(knn_module, "screen_merge", None)
            run_p = np.full((rows, 6), -np.inf, np.float32)
            run_p[:, :3] = [0.5, 0.25, 0.125]
            run_i = np.where(np.isfinite(run_p), 10**6, -1).astype(np.int64)
            cp = np.full((cols, 5), -np.inf, np.float32)
            ci = np.full((cols, 5), -1, np.int64)
            knn_module.screen_into(product, s, t_rows, t_cols, run_p, run_i, 1000, cp, ci, 7)
            lists.append((run_p, run_i, cp, ci))
            monkeypatch.undo()
        (fp, fi, fcp, fci), (npp, npi, ncp, nci) = lists
        np.testing.assert_array_equal(fp, npp)
        np.testing.assert_array_equal(fcp, ncp)
        values = s if s.dtype == np.float32 else _bits_to_f32(s)
        for vals, idx, offset, by_row in ((fp, fi, 1000, True), (fcp, fci, 7, False)):
            for r, c in zip(*np.nonzero((idx >= 0) & (idx < 10**6))):
                i, j = (r, idx[r, c] - offset) if by_row else (idx[r, c] - offset, r)
                assert values[i, j] == vals[r, c]


def test_numpys_passes_still_give_the_brute_force_result(monkeypatch):
    """Where numba cannot be installed, knn.py screens with numpy: the same exact result."""
    rng = np.random.default_rng(12)
    x, y = _near_ties(rng, 300, 250, 48)
    want = brute_force(x, y, 4)
    monkeypatch.setattr(knn_module, "screen_merge", None)
    for product in PRODUCTS:
        _assert_same(want, exact_knn_both(x, y, 4, block_rows=64, block_cols=100, workers=2, product=product))


def test_all_negative_scores_take_the_keyed_path(monkeypatch):
    """Rows opposite every target: their thresholds are negative, so the compiled pass compares
    keys (negative patterns reordered), not raw bit patterns; the result is still the brute force."""
    if knn_module.screen_merge is None:
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(13)
    c = rng.standard_normal(48)
    y = _unit(c + 0.3 * rng.standard_normal((200, 48)))
    x = _unit(-c + 0.3 * rng.standard_normal((150, 48)))
    keyed = []
    real = knn_module.screen_merge
    monkeypatch.setattr(knn_module, "screen_merge",
                        lambda bits, sh, tr, tc, *a: keyed.append(min(tr.min(), tc.min()) < 1) or real(bits, sh, tr, tc, *a))
    want = brute_force(x, y, 4)
    for product in PRODUCTS:
        _assert_same(want, exact_knn_both(x, y, 4, block_rows=32, block_cols=64, workers=1, product=product))
    assert any(keyed), "no block had a negative threshold: the test does not reach the keyed path"
