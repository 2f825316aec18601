"""Prompts of sentence-transformers models on xmine's fast path (xmine.encoders.prompts): a model
whose config sets `default_prompt_name` is encoded with that prompt, as `SentenceTransformer.encode`
does, on every runtime; `--prompt` / `--prompt-name` choose another, and the prompt is part of the
fingerprint. The model is a random-weights BERT the test builds (tests/tiny_models.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clitools import ok, refused, xm
from flores import flores_lines
from tiny_models import build_tiny_bert

PROMPTS = {"query": "query: ", "passage": "passage: "}
SCRIPTS = ("eng_Latn", "rus_Cyrl", "zho_Hans", "arb_Arab")


@pytest.fixture(scope="module")
def sentences(data_dir):
    """200 FLORES-200 devtest sentences, 50 in each of 4 scripts."""
    return [s for code in SCRIPTS for s in flores_lines(data_dir, code, 50)]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, sentences):
    return build_tiny_bert(tmp_path_factory.mktemp("st") / "tiny", sentences, prompts=PROMPTS,
                           default_prompt_name="query")


def _min_cos(a: np.ndarray, b: np.ndarray) -> float:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return float((a * b).sum(1).min())


@pytest.fixture(scope="module")
def reference(model_dir, sentences):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(model_dir), device="cpu")
    return {"default": st.encode(sentences), "passage": st.encode(sentences, prompt_name="passage"),
            "none": st.encode(sentences, prompt="")}


def _runtimes():
    from importlib.util import find_spec

    return ["torch"] + (["openvino"] if find_spec("openvino") is not None else [])


@pytest.mark.slow
@pytest.mark.parametrize("runtime", _runtimes())
def test_the_default_prompt_is_used_on_every_runtime(runtime, model_dir, sentences, reference, tmp_path,
                                                     monkeypatch):
    from xmine.encoders import load_encoder

    monkeypatch.setenv("XMINE_HOME", str(tmp_path))  # the converted OpenVINO model goes here
    # The prompt matters for this model: without it the embeddings are far from encode()'s.
    assert _min_cos(reference["default"], reference["none"]) < 0.99
    enc = load_encoder(str(model_dir), device="cpu", precision="fp32", runtime=runtime)
    assert (enc.runtime, enc.prefix) == (runtime, "query: ")
    assert type(enc).__name__ in ("TokenBatchedEncoder", "OpenVINOEncoder")  # the fast path
    assert _min_cos(enc.encode(sentences), reference["default"]) >= 0.999
    named = load_encoder(str(model_dir), device="cpu", precision="fp32", runtime=runtime, prompt_name="passage")
    assert _min_cos(named.encode(sentences), reference["passage"]) >= 0.999
    none = load_encoder(str(model_dir), device="cpu", precision="fp32", runtime=runtime, prefix="")
    assert _min_cos(none.encode(sentences), reference["none"]) >= 0.999
    assert len({e.fingerprint()["id"] for e in (enc, named, none)}) == 3


@pytest.mark.slow
def test_the_cli_prompt_options_reach_the_encoder_and_the_store(model_dir, sentences, reference, tmp_path):
    from xmine.store import EmbeddingStore

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    common = ("--encoder", model_dir, "--precision", "fp32", "--runtime", "torch", "--dtype", "float32", "-q")
    ok(xm("embed", corpus, "--lang", "en", "-o", tmp_path / "default", *common))
    ok(xm("embed", corpus, "--lang", "en", "-o", tmp_path / "passage", "--prompt-name", "passage", *common))
    ok(xm("embed", corpus, "--lang", "en", "-o", tmp_path / "text", "--prompt", "passage: ", *common))
    for store, want in (("default", "default"), ("passage", "passage"), ("text", "passage")):
        s = EmbeddingStore.open(tmp_path / store)
        assert _min_cos(s.rows()[:].astype(np.float32), reference[want]) >= 0.999, store
    ids = {store: json.loads((tmp_path / store / "manifest.json").read_text())["encoder"]["id"]
           for store in ("default", "passage", "text")}
    assert "prefix='query: '" in ids["default"] and ids["passage"] == ids["text"] != ids["default"]
    refused(xm("embed", corpus, "--lang", "en", "-o", tmp_path / "bad", "--prompt-name", "nope", *common),
            "no prompt named 'nope'", "'query'", "'passage'")
    res = xm("embed", corpus, "--lang", "en", "-o", tmp_path / "both", "--prompt", "x", "--prompt-name", "query",
             *common)
    assert res.exit_code == 2 and "not both" in res.output
    # Text mined beside a store of another prompt is refused, not mixed; of the same prompt, mined: the
    # prompt travels with the encoder's config (EncodingConfig -> EncoderConfig) to the text side.
    refused(xm("mine", tmp_path / "passage", corpus, "-o", tmp_path / "m.tsv", "--src-lang", "en", "--tgt-lang",
               "en", "--prompt-name", "query"), "and the prompt 'passage: ', but embeddings with the prompt 'query: '",
            "(--prompt 'passage: '; prompt='passage: ' in Python)")
    ok(xm("mine", tmp_path / "passage", corpus, "-o", tmp_path / "m.tsv", "--src-lang", "en", "--tgt-lang",
          "en", "--prompt-name", "passage", "-q"))
    # No prompt given: the text is encoded with the store's, as with its precision (was: refused, to be
    # given again)
    ok(xm("mine", tmp_path / "passage", corpus, "-o", tmp_path / "m2.tsv", "--src-lang", "en", "--tgt-lang", "en", "-q"))
    assert (tmp_path / "m2.tsv").read_bytes() == (tmp_path / "m.tsv").read_bytes()
    # A command's prompt is its own: nothing is left behind in the process for the next load.
    from xmine.encoders import load_encoder

    assert load_encoder(str(model_dir), device="cpu", precision="fp32", runtime="torch").prefix == "query: "


def test_use_m3_refuses_a_prompt(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("Hallo Welt.\n", encoding="utf-8")
    refused(xm("embed", corpus, "--lang", "de", "-o", tmp_path / "s", "--encoder", "use-m3", "--prompt", "q: "),
            "use-m3 takes no prompt")


def test_another_encoder_beside_a_store_is_named_not_the_store_s_precision(tmp_path, data_dir):
    """(was: a me5-small store at bf16 mined with --encoder use-m3 said "use-m3 runs in numpy float32
    only; precision bf16 is not available for it", a precision nobody gave)"""
    (tmp_path / "de.txt").write_text("\n".join(flores_lines(data_dir, "deu_Latn", 12)) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(flores_lines(data_dir, "eng_Latn", 12)) + "\n", encoding="utf-8")
    ok(xm("embed", tmp_path / "de.txt", "--lang", "de", "--projection", "none", "--precision", "bf16", "-q",
          "-o", tmp_path / "st"))
    refused(xm("mine", tmp_path / "st", tmp_path / "en.txt", "--tgt-lang", "en", "--encoder", "use-m3", "-q",
               "-o", tmp_path / "m.tsv"), "was made with encoder 'me5-small'", "but embeddings of 'use-m3'")
