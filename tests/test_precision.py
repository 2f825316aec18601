"""Encoder precision: resolution of `auto`, the fingerprint, the mixing rule, and real bf16 output."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from click.testing import CliRunner

from xmine.cli import main
from xmine.encoders import (
    bf16_flag_in_cpuinfo,
    check_projection_encoder,
    check_same_encoder,
    load_encoder,
    resolve_precision,
)
from xmine.errors import EncoderError, EncoderMismatchError
from xmine.artefacts.records import EncoderFingerprint
from flores import SCRIPTS, flores_lines

# Slow tier (`pytest -m "not slow"` is the fast one): the real encoder at every precision.
pytestmark = pytest.mark.slow

ZEN4 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_vnni avx512_bf16 sha_ni\n"
SKYLAKE_X = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_vnni\n"
SAPPHIRE_RAPIDS = "flags\t\t: avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
GRAVITON3 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"


@pytest.fixture(scope="module")
def me5_fp32():
    return load_encoder("me5-small", device="cpu", precision="fp32", runtime="torch")


@pytest.fixture(scope="module")
def me5_bf16():
    return load_encoder("me5-small", device="cpu", precision="bf16", runtime="torch")


def _fp(d):
    return EncoderFingerprint.from_dict(d, where="test")


def test_cpuinfo_flags_decide_native_bf16():
    assert bf16_flag_in_cpuinfo(ZEN4, "x86_64") == "avx512_bf16"
    assert bf16_flag_in_cpuinfo(SAPPHIRE_RAPIDS, "x86_64") == "amx_bf16"
    assert bf16_flag_in_cpuinfo(SKYLAKE_X, "x86_64") is None  # AVX-512 without bf16: emulated, not chosen
    assert bf16_flag_in_cpuinfo(GRAVITON3, "aarch64") == "bf16"
    assert bf16_flag_in_cpuinfo("", "x86_64") is None


@pytest.mark.parametrize("flag, expected", [("avx512_bf16", "bf16"), ("amx_bf16", "bf16"), (None, "fp32")])
def test_auto_on_cpu_follows_the_bf16_flag(monkeypatch, flag, expected):
    import xmine.encoders.precision as enc

    monkeypatch.setattr(enc, "cpu_bf16_flag", lambda: flag)
    assert resolve_precision("auto", "cpu") == expected
    for explicit in ("fp32", "bf16", "fp16"):  # an explicit precision is never changed
        assert resolve_precision(explicit, "cpu") == explicit
    assert resolve_precision("auto", "mps") == "fp32"


def test_auto_on_cuda_is_bf16_or_fp16_and_bf16_is_never_downgraded_silently(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "an old GPU")
    assert resolve_precision("auto", "cuda") == "fp16"
    with pytest.raises(EncoderError, match="does not support bfloat16"):
        resolve_precision("bf16", "cuda:0")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert resolve_precision("auto", "cuda:1") == "bf16"


def test_unknown_precision_and_use_m3_in_bf16_are_refused():
    with pytest.raises(EncoderError, match="precision must be one of"):
        load_encoder("me5-small", precision="fp8")
    with pytest.raises(EncoderError, match="float32 only"):
        load_encoder("use-m3", precision="bf16")


def test_precision_is_in_the_fingerprint_and_old_fingerprints_read_as_fp32(me5_fp32, me5_bf16):
    from xmine.encoders.embed_cache import cache_path

    fp32, bf16 = me5_fp32.fingerprint(), me5_bf16.fingerprint()
    assert (fp32["precision"], bf16["precision"]) == ("fp32", "bf16")
    assert fp32["id"] != bf16["id"] and _fp(fp32).id.weights == _fp(bf16).id.weights == fp32["id"]
    # A fingerprint written before precisions existed: no key, fp32 id. It is this fp32 encoder.
    legacy = {k: v for k, v in fp32.items() if k != "precision"}
    assert _fp(legacy).run_precision == "fp32" and _fp(bf16).run_precision == "bf16"
    check_same_encoder(legacy, fp32, what="old store")
    assert cache_path(legacy) == cache_path(fp32) != cache_path(bf16)  # one cache per precision
    with pytest.raises(EncoderMismatchError, match="precision bf16.*--precision bf16") as e:
        check_same_encoder(bf16, fp32, what="store s/")
    assert "\n" not in str(e.value)
    # Another dimension under the same weights (a record edited by hand) is named as such, not
    # explained as a precision or runtime to switch.
    for other in ({**fp32, "dim": fp32["dim"] + 1}, {**bf16, "dim": bf16["dim"] + 1}):
        with pytest.raises(EncoderMismatchError, match=f"dim {fp32['dim']}.*dim {fp32['dim'] + 1}") as e:
            check_same_encoder(fp32, other, what="store s/")
        assert "never mixed" not in str(e.value)


def test_a_projection_takes_another_precision_of_the_same_weights_only(me5_fp32, me5_bf16, usem3, caplog):
    # (DEBUG: the notice is INFO once per machine, DEBUG after: xmine.encoders.base.note_once)
    with caplog.at_level(logging.DEBUG, logger="xmine.encoders"):
        check_projection_encoder(me5_fp32.fingerprint(), me5_bf16.fingerprint(), what="projection p/")
    assert any("projection p/ was trained on fp32" in r.getMessage() for r in caplog.records)
    # the agreement quoted is the precisions' own (was: 0.995, the int8 bar, for fp32 and bf16)
    assert any("cosine >= 0.999," in r.getMessage() for r in caplog.records), caplog.text
    check_projection_encoder(me5_bf16.fingerprint(), me5_bf16.fingerprint(), what="projection p/")
    with pytest.raises(EncoderMismatchError):
        check_projection_encoder(me5_fp32.fingerprint(), usem3.fingerprint(), what="projection p/")


def test_bf16_embeddings_agree_with_fp32(me5_fp32, me5_bf16, data_dir):
    sentences = [s for code in SCRIPTS for s in flores_lines(data_dir, code, 5, start=100)]
    assert len(sentences) == 40
    a, b = me5_fp32.encode(sentences), me5_bf16.encode(sentences)
    assert b.dtype == np.float32 and np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    cos = np.sum(a * b, axis=1)
    assert cos.min() >= 0.999, cos
    assert not np.array_equal(a, b)  # it really ran in another precision


def test_bad_precision_option_exits_2(tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo\n", encoding="utf-8")
    runner = CliRunner()
    for args in (["embed", str(tmp_path / "a.txt"), "--lang", "en", "-o", str(tmp_path / "s"), "--precision", "fp8"],
                 ["mine", str(tmp_path / "a.txt"), str(tmp_path / "a.txt"), "-o", str(tmp_path / "m.tsv"),
                  "--precision", "int4"]):
        res = runner.invoke(main, args)
        assert res.exit_code == 2 and "--precision" in res.output, res.output
    res = runner.invoke(main, ["embed", str(tmp_path / "a.txt"), "--lang", "en", "-o", str(tmp_path / "s"),
                               "--encoder", "use-m3", "--precision", "bf16"])
    assert res.exit_code == 2 and "float32 only" in res.output
    assert not (tmp_path / "s").exists()


def test_a_bf16_store_refuses_to_mine_against_an_fp32_store(tmp_path, data_dir, me5_fp32, me5_bf16):
    de, en = tmp_path / "de.txt", tmp_path / "en.txt"
    de.write_text("\n".join(flores_lines(data_dir, "deu_Latn", 12, start=100)) + "\n", encoding="utf-8")
    en.write_text("\n".join(flores_lines(data_dir, "eng_Latn", 12, start=100)) + "\n", encoding="utf-8")
    runner = CliRunner()
    for f, lang, precision in ((de, "de", "bf16"), (en, "en", "fp32")):
        res = runner.invoke(main, ["embed", str(f), "--lang", lang, "-o", str(tmp_path / lang), "-q",
                                   "--precision", precision])
        assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["mine", str(tmp_path / "de"), str(tmp_path / "en"), "-o", str(tmp_path / "m.tsv")])
    assert res.exit_code == 2, res.output
    err = [line for line in res.output.splitlines() if line.startswith("xmine: error")]
    assert len(err) == 1 and "precision bf16" in err[0] and "fp32" in err[0], res.output
    assert not (tmp_path / "m.tsv").exists()
    # Text mined against a store is encoded at the store's precision by default ...
    res = runner.invoke(main, ["mine", str(tmp_path / "de"), str(en), "-o", str(tmp_path / "ok.tsv")])
    assert res.exit_code == 0, res.output
    assert len((tmp_path / "ok.tsv").read_text(encoding="utf-8").splitlines()) == 12
    # ... and an explicit other precision is refused, not mixed.
    res = runner.invoke(main, ["mine", str(tmp_path / "de"), str(en), "-o", str(tmp_path / "no.tsv"),
                               "--precision", "fp32"])
    assert res.exit_code == 2 and "precision bf16" in res.output, res.output
