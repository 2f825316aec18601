"""The OpenVINO runtime: same embeddings as torch within the checked cosine, a cached model that is
checked and rebuilt when broken or stale, one clear line where openvino is missing, and runtimes
that never mix in a store. One converted model (the real cache's) is shared by the tests."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("openvino")

from xmine.cli import main  # noqa: E402
from xmine.encoders import (  # noqa: E402
    check_projection_encoder,
    check_same_encoder,
    load_encoder,
)
from xmine.errors import EncoderError, EncoderMismatchError  # noqa: E402
from xmine.artefacts.records import EncoderFingerprint  # noqa: E402
from flores import SCRIPTS, flores_lines  # noqa: E402

# Slow tier (`pytest -m "not slow"` is the fast one): OpenVINO model builds and int8 quantisation of the real encoder.
pytestmark = pytest.mark.slow



@pytest.fixture(scope="session")
def ov_bf16():
    """me5-small on OpenVINO in bf16 (converted and checked once, then read from the cache)."""
    return load_encoder("me5-small", device="cpu", precision="bf16", runtime="openvino")


@pytest.fixture(scope="session")
def torch_fp32():
    return load_encoder("me5-small", device="cpu", precision="fp32", runtime="torch")


def _fp(d):
    return EncoderFingerprint.from_dict(d, where="test")


def test_openvino_bf16_equals_torch_fp32_within_the_checked_cosine(ov_bf16, torch_fp32, data_dir):
    sentences = [s for code in SCRIPTS for s in flores_lines(data_dir, code, 6, start=100)]
    a, b = ov_bf16.encode(sentences), torch_fp32.encode(sentences)
    assert a.dtype == np.float32 and a.shape == (48, 384)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cos = np.sum(a * b, axis=1)
    assert cos.min() >= 0.999, dict(zip(np.repeat(SCRIPTS, 6), cos))
    assert not np.array_equal(a, b)  # it really is another runtime
    # input order is kept whatever the length-sorted passes were
    np.testing.assert_allclose(ov_bf16.encode(sentences[::-1])[::-1], a, atol=1e-6)
    fp = ov_bf16.fingerprint()
    assert (ov_bf16.runtime, fp["runtime"], _fp(fp).id.runtime) == ("openvino",) * 3
    assert _fp(fp).id.weights == _fp(torch_fp32.fingerprint()).id.weights == torch_fp32.fingerprint()["id"]


def test_bf16_compiled_as_f32_is_refused_not_labelled_bf16(ov_bf16, tmp_path):
    """OpenVINO's CPU plugin compiles a bf16 hint as f32 where the CPU has no native bf16: such an
    encoder would write fp32 vectors into a store labelled bf16, so it is refused in one line."""
    import openvino as ov

    from xmine.encoders.ov_build import check_compiled_precision
    from xmine.encoders.precision import cpu_bf16_flag

    compiled = ov_bf16.model.get_property("INFERENCE_PRECISION_HINT")
    # on this CPU the encoder runs what it is labelled with (the check passed when it was loaded)
    assert (compiled == ov.Type.bf16) == bool(cpu_bf16_flag())
    model = tmp_path / "model.xml"
    with pytest.raises(EncoderError) as e:
        check_compiled_precision("bf16", ov.Type.f32, model=model)
    assert str(e.value).startswith(f"{model}: ") and "--precision fp32" in str(e.value) and "\n" not in str(e.value)
    check_compiled_precision("bf16", ov.Type.bf16, model=model)
    check_compiled_precision("fp32", ov.Type.f32, model=model)


def test_token_states_come_from_openvino_too(ov_bf16, torch_fp32, data_dir):
    from xmine.encoders.tokens import encode_token_states

    sentences = [flores_lines(data_dir, c, 1)[0] for c in ("eng_Latn", "zho_Hans", "hin_Deva")]
    (w_ov,), (w_pt,) = list(encode_token_states(ov_bf16, sentences)), list(encode_token_states(torch_fp32, sentences))
    for t_ov, t_pt in zip(w_ov.tokens, w_pt.tokens):
        assert t_ov.shape == t_pt.shape and t_ov.dtype == np.float16
        cos = np.sum(t_ov.astype(np.float32) * t_pt, axis=1) / (
            np.linalg.norm(t_ov.astype(np.float32), axis=1) * np.linalg.norm(t_pt.astype(np.float32), axis=1))
        assert cos.min() >= 0.99
    pooled = w_ov.pooled / np.linalg.norm(w_ov.pooled, axis=1, keepdims=True)
    np.testing.assert_allclose(pooled, ov_bf16.encode(sentences), atol=1e-3)


def test_a_broken_or_stale_cached_model_is_detected_and_rebuilt(ov_bf16, tmp_path, monkeypatch, caplog):
    from xmine.encoders.e5_q4 import ensure_me5_model
    from xmine.encoders.ov_build import MANIFEST, problem_with

    real = ov_bf16.model_xml.parent
    source = json.loads((real / MANIFEST).read_text(encoding="utf-8"))["source"]
    assert problem_with(real, source) is None
    stale = dict(source, openvino="0.0")
    assert problem_with(real, stale).startswith("stale")
    # A private cache: the rebuilt me5-small linked in, a copy of the converted model, damaged.
    me5_dir, _ = ensure_me5_model()
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / me5_dir.name).symlink_to(me5_dir)
    copy = tmp_path / "models" / real.name
    shutil.copytree(real, copy)
    with open(copy / "model.bin", "r+b") as f:
        f.seek(1 << 20)
        f.write(b"\x00" * 64)
    assert problem_with(copy, source).startswith("broken: model.bin")
    # `verify` checks the sums its manifest records (was: "no sums recorded", exit 0)
    from tests.clitools import ok, refused, xm

    assert "2 files match their recorded size and sha256" in ok(xm("verify", real)).output
    refused(xm("verify", copy), f"{copy / 'model.bin'}: content differs from the manifest.json of the OpenVINO model")
    monkeypatch.setenv("XMINE_HOME", str(tmp_path))
    from xmine.encoders.ov_encoder import OpenVINOEncoder, load_me5_openvino

    compiled = []
    init = OpenVINOEncoder.__init__

    def counting_init(self, **kw):
        compiled.append(kw["model_xml"])
        init(self, **kw)

    monkeypatch.setattr(OpenVINOEncoder, "__init__", counting_init)
    with caplog.at_level(logging.WARNING, logger="xmine.encoders.ov_build"):
        rebuilt = load_me5_openvino(prefix="query: ", precision="bf16", threads=None)
    assert any("broken" in r.getMessage() and "rebuilding" in r.getMessage() for r in caplog.records)
    assert rebuilt.model_xml.parent == copy and problem_with(copy, source) is None
    # the encoder that passed the probe check is the one handed back: a rebuild compiles once
    assert len(compiled) == 1 and compiled[0].parent != copy and rebuilt.model_xml.is_file()
    steps = json.loads((copy / MANIFEST).read_text(encoding="utf-8"))["build_steps_seconds"]
    assert list(steps) == ["load_torch_fp32", "probe_torch_fp32", "convert", "save", "compile", "probe_openvino",
                           "hash"]
    sentences = ["Der Hund schläft.", "猫が寝ている。", "Собака спит."]
    assert np.sum(rebuilt.encode(sentences) * ov_bf16.encode(sentences), axis=1).min() >= 0.9999


def test_a_cached_model_openvino_cannot_read_is_one_line_naming_it(ov_bf16, tmp_path, monkeypatch):
    """A model.xml cut short, with its manifest's sums made to agree (so the cache's checks pass):
    one line naming the file and what to do (was: a 56-line traceback from OpenVINO's XML parser)."""
    import hashlib

    from manifests import rewrite_manifest
    from xmine.encoders.e5_q4 import ensure_me5_model
    from xmine.encoders.ov_build import MANIFEST
    from xmine.encoders.ov_encoder import load_me5_openvino

    real = ov_bf16.model_xml.parent
    me5_dir, _ = ensure_me5_model()
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / me5_dir.name).symlink_to(me5_dir)
    copy = tmp_path / "models" / real.name
    shutil.copytree(real, copy)
    xml = copy / "model.xml"
    xml.write_bytes(xml.read_bytes()[: xml.stat().st_size // 2])
    data = xml.read_bytes()
    rewrite_manifest(copy / MANIFEST, lambda m: m["files"]["model.xml"].update(
        size=len(data), sha256=hashlib.sha256(data).hexdigest()))
    monkeypatch.setenv("XMINE_HOME", str(tmp_path))
    with pytest.raises(EncoderError) as e:
        load_me5_openvino(prefix="query: ", precision="bf16", threads=None)
    assert str(e.value).startswith(f"{xml}: OpenVINO cannot read this converted model (") and "\n" not in str(e.value)
    assert f"it is damaged: remove {copy} and the next run converts the model again" in str(e.value)


_NO_OPENVINO = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "openvino" or name.startswith("openvino."):
            raise ImportError("No module named 'openvino' (blocked for this test)")
sys.meta_path.insert(0, Block())
from xmine.cli import main
sys.argv = ["xmine"] + sys.argv[1:]
main()
"""


@pytest.mark.parametrize("runtime", ["openvino", "auto"])
def test_without_openvino_explicit_is_one_line_exit_2_and_auto_falls_back(runtime, tmp_path, data_dir):
    text = tmp_path / "a.txt"
    text.write_text("\n".join(flores_lines(data_dir, "deu_Latn", 3)) + "\n", encoding="utf-8")
    res = subprocess.run([sys.executable, "-c", _NO_OPENVINO, "embed", str(text), "--lang", "de", "-q",
                          "-o", str(tmp_path / "s"), "--runtime", runtime], capture_output=True, text=True,
                         timeout=300)
    if runtime == "openvino":
        assert res.returncode == 2, res.stderr
        lines = [ln for ln in res.stderr.splitlines() if ln.startswith("xmine: error")]
        assert len(lines) == 1 and "openvino" in lines[0] and "--runtime torch" in lines[0], res.stderr
        assert "Traceback" not in res.stderr and not (tmp_path / "s").exists()
    else:
        assert res.returncode == 0, res.stderr
        said = [ln for ln in res.stderr.splitlines() if "not installed" in ln]
        assert len(said) == 1 and "torch" in said[0], res.stderr
        manifest = json.loads((tmp_path / "s" / "manifest.json").read_text(encoding="utf-8"))
        assert _fp(manifest["encoder"]).id.runtime == "torch"


def test_runtime_resolution_refuses_what_cannot_run():
    from xmine.encoders.runtime import encoder_runtime

    assert encoder_runtime("me5-small", "auto", "bf16", device="cpu") == "openvino"
    assert encoder_runtime("me5-small", "auto", "bf16", device="cuda") == "torch"
    assert encoder_runtime("me5-small", "auto", "fp16", device="cpu") == "torch"
    assert encoder_runtime("me5-small", "auto", "int8", device="cpu") == "openvino"
    assert encoder_runtime("use-m3", "auto", "fp32", device="cpu") == "torch"
    for name, runtime, precision, device in (("me5-small", "torch", "int8", "cpu"),
                                             ("me5-small", "openvino", "bf16", "cuda"),
                                             ("me5-small", "openvino", "fp16", "cpu"),
                                             ("use-m3", "openvino", "fp32", "cpu"),
                                             ("me5-small", "onnx", "fp32", "cpu")):
        with pytest.raises(EncoderError) as e:
            encoder_runtime(name, runtime, precision, device=device)
        assert "\n" not in str(e.value)


def test_the_converted_models_build_is_part_of_the_fingerprint(ov_bf16, monkeypatch):
    from xmine.encoders.embed_cache import cache_path
    from xmine.encoders import ov_build
    from xmine.encoders import LazyEncoder

    fp = EncoderFingerprint.from_dict(ov_bf16.fingerprint(), where="ov")
    key = ov_bf16.model_xml.parent.name.rsplit("-", 1)[-1]  # the cached model's folder: ...-openvino-bf16-<key>
    assert ov_bf16.fingerprint()["id"].endswith(f"|precision=bf16|runtime=openvino+{key}")
    assert (fp.run_precision, fp.id.runtime, fp.id.build) == ("bf16", "openvino", key)
    assert fp.id.weights == ov_bf16.fingerprint()["id"].split("|precision")[0]
    # Known without converting or loading anything, as `embed --ray` and the cache need it.
    assert LazyEncoder("me5-small", precision="bf16", runtime="openvino").fingerprint() == ov_bf16.fingerprint()
    # Another build (a new openvino, recipe or int8 draw) is another encoder: its embeddings are
    # cached apart and a store of the old build is not mixed with it.
    monkeypatch.setattr(ov_build, "OV_RECIPE", ov_build.OV_RECIPE + 1)
    other = LazyEncoder("me5-small", precision="bf16", runtime="openvino").fingerprint()
    assert other["id"] != str(fp.id) and EncoderFingerprint.from_dict(other, where="o").id.weights == fp.id.weights
    assert cache_path(other) != cache_path(ov_bf16.fingerprint())
    with pytest.raises(EncoderMismatchError):
        check_same_encoder(ov_bf16.fingerprint(), other, what="store s/")


def test_fingerprints_refuse_mixing_runtimes_in_a_store(ov_bf16, tmp_path, data_dir):
    torch_bf16 = load_encoder("me5-small", device="cpu", precision="bf16", runtime="torch")
    with pytest.raises(EncoderMismatchError, match="two runtimes are never mixed"):
        check_same_encoder(torch_bf16.fingerprint(), ov_bf16.fingerprint(), what="store s/")
    check_projection_encoder(torch_bf16.fingerprint(), ov_bf16.fingerprint(), what="projection p/")  # notice only

    de, en = tmp_path / "de.txt", tmp_path / "en.txt"
    de.write_text("\n".join(flores_lines(data_dir, "deu_Latn", 10)) + "\n", encoding="utf-8")
    en.write_text("\n".join(flores_lines(data_dir, "eng_Latn", 10)) + "\n", encoding="utf-8")
    runner = CliRunner()
    for f, lang, runtime in ((de, "de", "openvino"), (en, "en", "torch")):
        res = runner.invoke(main, ["embed", str(f), "--lang", lang, "-o", str(tmp_path / lang), "-q",
                                   "--precision", "bf16", "--runtime", runtime])
        assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["mine", str(tmp_path / "de"), str(tmp_path / "en"), "-o", str(tmp_path / "m.tsv")])
    assert res.exit_code == 2, res.output
    err = [line for line in res.output.splitlines() if line.startswith("xmine: error")]
    assert len(err) == 1 and "runtime" in err[0] and "openvino" in err[0] and "torch" in err[0], res.output
    assert not (tmp_path / "m.tsv").exists()
    # Text beside a store is encoded by the store's runtime by default, and an explicit other one is refused.
    res = runner.invoke(main, ["mine", str(tmp_path / "en"), str(de), "-o", str(tmp_path / "ok.tsv")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["mine", str(tmp_path / "en"), str(de), "-o", str(tmp_path / "no.tsv"),
                               "--runtime", "openvino"])
    assert res.exit_code == 2 and "runtime" in res.output, res.output
    assert not (tmp_path / "no.tsv").exists()


@pytest.mark.slow
def test_int8_agrees_with_torch_fp32_to_its_threshold(torch_fp32, data_dir):
    int8 = load_encoder("me5-small", device="cpu", precision="int8")
    assert (int8.precision, int8.runtime) == ("int8", "openvino")
    sentences = [s for code in SCRIPTS for s in flores_lines(data_dir, code, 6, start=200)]
    cos = np.sum(int8.encode(sentences) * torch_fp32.encode(sentences), axis=1)
    assert cos.min() >= 0.995, cos
    manifest = json.loads((int8.model_xml.parent / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["calibration"]["sentences"] == 320 and manifest["check"]["min_cos_to_torch_fp32"] >= 0.995
