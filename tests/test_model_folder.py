"""A local model folder that does not load (`--encoder DIR`): one line naming the file and the
problem, exit 2, never a traceback or the libraries' own terms ("Should have a `model_type` key",
a bare JSONDecodeError, an IndexError in the forward pass)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from clitools import files_under, ok, refused, untouched, xm
from xmine.encoders import loader
from tiny_models import build_tiny_bert

SENTENCES = ["Ein kleiner Satz.", "A small sentence."]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return build_tiny_bert(tmp_path_factory.mktemp("tiny") / "bert", SENTENCES)


def _broken(model, tmp_path, how: str):
    folder = tmp_path / how
    shutil.copytree(model, folder)
    if how == "empty":
        shutil.rmtree(folder)
        folder.mkdir()
    elif how == "modules-json":
        (folder / "modules.json").write_text("[{", encoding="utf-8")
    elif how == "no-pooling":
        shutil.rmtree(folder / "1_Pooling")
    elif how == "truncated-weights":
        weights = folder / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:100])
    elif how == "no-config":
        (folder / "config.json").unlink()
    elif how == "no-weights":
        (folder / "model.safetensors").unlink()
    elif how == "no-pooler":  # as models saved without BERT's pooler, which sentence-transformers does not use
        from safetensors.numpy import load_file, save_file

        weights = load_file(folder / "model.safetensors")
        save_file({k: v for k, v in weights.items() if not k.startswith("pooler.")}, folder / "model.safetensors",
                  metadata={"format": "pt"})
    elif how == "missing-tensors":  # a valid file without one layer's output (a helper: loaded, random each time)
        from safetensors.numpy import load_file, save_file

        weights = load_file(folder / "model.safetensors")
        save_file({k: v for k, v in weights.items() if "layer.0.output.dense" not in k}, folder / "model.safetensors",
                  metadata={"format": "pt"})
    return folder


@pytest.mark.parametrize("how, fragment", [
    ("empty", "the folder holds no files"),
    ("modules-json", "modules.json: not valid JSON"),
    ("no-pooling", "1_Pooling: missing (modules.json names it as a module folder)"),
    ("truncated-weights", "model.safetensors: unreadable weights"),
    ("no-config", "config.json: missing"),
    ("no-weights", "no weights in it"),
    ("missing-tensors", "its weights lack 2 of the model's tensors (encoder.layer.0.output.dense.weight"),
])
def test_a_broken_model_folder_is_named_with_its_problem(model, tmp_path, monkeypatch, how, fragment):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = _broken(model, tmp_path, how)
    message = refused(xm("encoders", "--check", folder, "--runtime", "torch"), f"encoder '{folder}'", fragment)
    assert "HF_HUB_OFFLINE" not in message  # a local folder was given: where models download from is not the problem


@pytest.mark.parametrize("how", ["empty", "modules-json", "no-config", "no-weights", "missing-tensors", "a file"])
def test_a_model_folder_that_cannot_load_is_refused_before_any_output_is_claimed(model, tmp_path, how):
    """(a fuzz: `score PAIRS --encoder EMPTY_DIR` was refused after it had claimed OUT, leaving OUT.json
    and OUT.work/ with the staged sides behind; a file as the folder, likewise)"""
    if how == "a file":
        folder = tmp_path / "model.bin"
        folder.write_bytes(b"\0" * 16)
    else:
        folder = _broken(model, tmp_path, how)
    (tmp_path / "p.tsv").write_text("Ein Satz.\tA sentence.\nNoch einer.\tOne more.\n", encoding="utf-8")
    before = files_under(tmp_path)
    for command in (("score", tmp_path / "p.tsv", "-o", tmp_path / "s.tsv"),
                    ("embed", tmp_path / "p.tsv", "--lang", "de", "-o", tmp_path / "e")):
        refused(xm(*command, "--encoder", folder, "-q"), f"encoder '{folder}'")
    assert files_under(tmp_path) == before


def test_a_folder_that_loads_is_not_refused_for_what_it_need_not_hold(model, tmp_path):
    """(a helper: a check made before loading refused folders sentence-transformers loads: no
    2_Normalize/ folder, as hub models ship without the empty folder, and a .json file of its own
    that is no JSON, an evaluation's JSON Lines)"""
    folder = tmp_path / "hub-like"
    shutil.copytree(model, folder)
    shutil.rmtree(folder / "2_Normalize", ignore_errors=True)
    (folder / "eval").mkdir()
    (folder / "eval" / "results.json").write_text('{"a": 1}\n{"a": 2}\n', encoding="utf-8")
    (tmp_path / "c.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    ok(xm("embed", tmp_path / "c.txt", "--lang", "de", "--encoder", folder, "--projection", "none", "-q",
          "-o", tmp_path / "s"))


def test_a_folder_without_the_pooler_is_one_encoder_on_every_load(model, tmp_path):
    """(a helper: its stores had another encoder id on every load, the pooler's random values in
    it, so the two sides of a corpus embedded apart refused each other)"""
    from xmine.artefacts.fileio import load_manifest

    folder = _broken(model, tmp_path, "no-pooler")
    (tmp_path / "c.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    for store in ("a", "b"):  # (each in a process of its own: one process loads a folder once)
        subprocess.run([sys.executable, "-m", "xmine.cli", "embed", str(tmp_path / "c.txt"), "--lang", "de", "--encoder",
                        str(folder), "--projection", "none", "--runtime", "torch", "-q", "-o", str(tmp_path / store)],
                       check=True, timeout=300)
    ids = [load_manifest(tmp_path / store / "manifest.json")["encoder"]["id"] for store in ("a", "b")]
    assert ids[0] == ids[1] and ids[0].startswith("st:"), ids


def test_a_tokenizer_of_another_model_is_refused_before_anything_is_encoded(tmp_path):
    """(was: an IndexError traceback from the embedding layer, exit 1)"""
    folder = build_tiny_bert(tmp_path / "small-vocab", SENTENCES, vocab_size=3)  # ([SEP] is 3)
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    refused(xm("embed", corpus, "--lang", "de", "--encoder", folder, "--runtime", "torch", "-q", "-o", tmp_path / "s"),
            "its tokenizer has", "tokens but the model embeds 3 (vocab_size)")
    assert not (tmp_path / "s").exists()


def test_a_folder_without_a_tokenizer_or_with_a_bad_max_seq_length_is_refused(model, tmp_path):
    """(were: no tokenizer: every word [UNK], every sentence embedded alike, exit 0; max_seq_length
    "x": a ValueError traceback, exit 1)"""
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    no_tok = tmp_path / "no-tokenizer"
    shutil.copytree(model, no_tok)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        (no_tok / name).unlink(missing_ok=True)
    bad_len = tmp_path / "bad-length"
    shutil.copytree(model, bad_len)
    (bad_len / "sentence_bert_config.json").write_text('{"max_seq_length": "x"}', encoding="utf-8")
    for folder, fragment in ((no_tok, "no tokenizer in it"),
                             (bad_len, "max_seq_length 'x' (its sentence_bert_config.json) is not a positive")):
        refused(xm("embed", corpus, "--lang", "de", "--encoder", folder, "--runtime", "torch", "-q",
                   "-o", tmp_path / "s"), f"encoder '{folder}'", fragment)
        assert not (tmp_path / "s").exists()


def test_an_encoder_returning_nan_writes_no_store(model, tmp_path):
    """(was: damaged weights gave a store of NaN rows, "embedded 2 sentences", exit 0; mining
    refused it later)"""
    from safetensors.torch import load_file, save_file

    nan = tmp_path / "nan"
    shutil.copytree(model, nan)
    weights = next(nan.rglob("model.safetensors"))
    tensors = load_file(weights)
    key = next(k for k in tensors if "word_embeddings" in k)
    tensors[key][:] = float("nan")
    save_file(tensors, weights)
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n\n".join(SENTENCES) + "\n", encoding="utf-8")
    refused(xm("embed", corpus, "--lang", "de", "--encoder", nan, "--runtime", "torch", "-q", "-o", tmp_path / "s"),
            f"{nan}: the encoder returned a vector that is not finite (NaN or inf) for line 1 (2 of 2 in its batch)")
    assert not any(tmp_path.joinpath("s").glob("emb-*.npy"))
    # on OpenVINO, the torch fp32 probe it is checked against says so (was: "agrees only to cosine nan: use
    # --runtime torch", which wrote the NaN store)
    refused(xm("encoders", "--check", nan, "--runtime", "openvino", "--precision", "fp32"),
            "the encoder returned a vector that is not finite (NaN or inf) for probe sentence")
    # the Python API alike (a helper: xmine.embed returned the NaN rows)
    import xmine
    from xmine.errors import EncoderError

    with pytest.raises(EncoderError, match=r"not finite \(NaN or inf\) for texts\[0\] 'Ein kleiner Satz.'"):
        xmine.embed(SENTENCES, encoder=str(nan), runtime="torch", projection="none")


def test_a_store_records_its_model_folder_wherever_it_is_read_from(tmp_path, monkeypatch):
    """(was: `embed --encoder ./enc` recorded './enc'; read from another folder holding another ./enc,
    text was encoded with that model, then refused, leaving OUT.json unfinished and OUT.work/.) The
    folder is recorded by its absolute path; where the folder itself changed since, the model it now
    holds is refused before anything is encoded."""
    made, other = tmp_path / "made", tmp_path / "other"
    build_tiny_bert(made / "enc", SENTENCES, seed=0)
    build_tiny_bert(other / "enc", SENTENCES, seed=1)
    (tmp_path / "de.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("Ein Satz.\nA sentence.\n", encoding="utf-8")
    monkeypatch.chdir(made)
    common = ("--runtime", "torch", "-q")
    ok(xm("embed", tmp_path / "de.txt", "--lang", "de", "--encoder", "./enc", *common, "-o", tmp_path / "store"))
    manifest = json.loads((tmp_path / "store" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["encoder"]["name"] == str(made / "enc")
    monkeypatch.chdir(other)  # its ./enc is another model: the store's own is found
    ok(xm("mine", tmp_path / "store", tmp_path / "en.txt", *common, "--threshold", "none", "-o", tmp_path / "m.tsv"))
    shutil.rmtree(made / "enc")
    shutil.copytree(other / "enc", made / "enc")  # the folder changed since
    monkeypatch.setattr(loader, "_LOADED", {})  # (a new process: this one keeps the model it loaded)
    with untouched(tmp_path):
        refused(xm("mine", tmp_path / "store", tmp_path / "en.txt", *common, "--threshold", "none",
                   "-o", tmp_path / "m2.tsv"),
                f"{tmp_path / 'store'} was made with encoder '{made / 'enc'}'", "but that name loads another model here")


def test_a_store_whose_model_folder_moved_says_so_and_takes_it_where_it_is(tmp_path):
    """(was: "encoder '/x/enc': not a known xmine encoder (me5-small, use-m3), and no such model folder
    exists", naming neither the store nor the remedy)"""
    build_tiny_bert(tmp_path / "enc", SENTENCES, seed=0)
    (tmp_path / "de.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("Ein Satz.\nA sentence.\n", encoding="utf-8")
    common = ("--runtime", "torch", "-q", "--threshold", "none")
    ok(xm("embed", tmp_path / "de.txt", "--lang", "de", "--encoder", tmp_path / "enc", "--runtime", "torch", "-q",
          "-o", tmp_path / "store"))
    (tmp_path / "enc").rename(tmp_path / "moved")
    refused(xm("mine", tmp_path / "store", tmp_path / "en.txt", *common, "-o", tmp_path / "m.tsv"),
            f"{tmp_path / 'store'} was made with the model folder {tmp_path / 'enc'}, which is not there any more",
            "give --encoder with that model's folder where it is now")
    ok(xm("mine", tmp_path / "store", tmp_path / "en.txt", *common, "--encoder", tmp_path / "moved",
          "-o", tmp_path / "m.tsv"))


def test_an_encoder_that_is_not_there_is_the_only_line(tmp_path, caplog):
    """(was: "no shipped projection for encoder './missing': using raw embeddings" before the error)"""
    (tmp_path / "de.txt").write_text("Ein Satz.\n", encoding="utf-8")
    for command in (["mine", tmp_path / "de.txt", tmp_path / "de.txt", "--allow-same-input", "-o", tmp_path / "m.tsv"],
                    ["build-index", tmp_path / "de.txt", "-o", tmp_path / "index"]):
        caplog.clear()
        with untouched(tmp_path), caplog.at_level("INFO", logger="xmine"):
            refused(xm(*command, "--encoder", tmp_path / "missing"), "no such model folder exists")
        assert not caplog.records, caplog.text
    # a folder of other files (a helper gave demo/): its problem alone, before the projection's notice
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "de.txt").write_text("Ein Satz.\n", encoding="utf-8")
    caplog.clear()
    with untouched(tmp_path), caplog.at_level("INFO", logger="xmine"):
        refused(xm("mine", tmp_path / "de.txt", tmp_path / "de.txt", "--allow-same-input", "-o", tmp_path / "m.tsv",
                   "--encoder", tmp_path / "texts"), "texts/config.json: missing (the transformer's configuration)")
    assert not caplog.records, caplog.text


def test_a_model_folder_whose_tokenizer_changed_is_another_encoder(model, tmp_path, monkeypatch):
    """An encoder's id covers its tokenizer and modules, not its weights alone (was: after the folder's
    tokenizer changed, `embed` said "already finished; nothing to do" and kept the vectors of the old
    tokens, and `mine` took the store for this model's). A copy of the folder elsewhere is the same
    encoder: the id holds no path."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder, copy = tmp_path / "byo", tmp_path / "elsewhere" / "byo-copy"
    shutil.copytree(model, folder)
    shutil.copytree(model, copy)
    (tmp_path / "en.txt").write_text("A Small sentence.\nAn other one.\n", encoding="utf-8")
    embed = ("embed", tmp_path / "en.txt", "--lang", "en", "--runtime", "torch", "-q", "-o", tmp_path / "store")
    ok(xm(*embed, "--encoder", folder))
    made = json.loads((tmp_path / "store" / "manifest.json").read_text(encoding="utf-8"))["encoder"]["id"]
    assert loader.load_encoder(str(copy), runtime="torch", check=False).fingerprint()["id"] == made

    config = folder / "tokenizer_config.json"
    settings = json.loads(config.read_text(encoding="utf-8"))
    assert settings["do_lower_case"] is False
    config.write_text(json.dumps({**settings, "do_lower_case": True}), encoding="utf-8")  # "A Small" -> "a small"
    monkeypatch.setattr(loader, "_LOADED", {})  # (a new process: this one keeps the model it loaded)
    with untouched(tmp_path / "store"):
        refused(xm(*embed, "--encoder", folder), f"it was made with encoder '{folder}' as it was then",
                "its weights, tokenizer or modules changed since, or it was made by an earlier xmine, which "
                "identified a model folder by its weights alone: rebuild it (--overwrite)")
        refused(xm("mine", tmp_path / "store", tmp_path / "en.txt", "--allow-same-input", "--runtime", "torch",
                   "--threshold", "none", "-o", tmp_path / "m.tsv"), "but that name loads another model here",
                "or it was made by an earlier xmine, which identified a model folder by its weights alone")
    ok(xm(*embed, "--encoder", folder, "--overwrite"))
    now = json.loads((tmp_path / "store" / "manifest.json").read_text(encoding="utf-8"))["encoder"]["id"]
    assert now != made and now.split("|")[1:] == made.split("|")[1:]  # another model; the same pooling and prompt


def test_the_note_on_earlier_folder_ids_is_a_model_folders_only():
    """The refusal of a changed encoder adds the note on the weights-only ids of earlier xmines for
    a model folder's id ("st:") alone, never for a shipped encoder's."""
    from xmine.artefacts.records import EncoderId, legacy_folder_note

    assert "identified a model folder by its weights alone" in legacy_folder_note(
        EncoderId.parse("st:61d55073f9e40eaa|pool=mean|max_len=128|prefix=''|precision=bf16"))
    assert legacy_folder_note(EncoderId.parse("me5-small-q4:f2552a6b596b7170|pool=mean|max_len=512|prefix='query: '")) == ""
