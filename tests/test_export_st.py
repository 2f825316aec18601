"""`xmine export-st`: the shipped projection as standard sentence-transformers modules, loaded in
a process where xmine cannot be imported, gives xmine's meaning vectors; `xmine verify` checks
every file of the export against the size and sha256 its manifest records."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.clitools import calibration_record, ok, refused, untouched, xm
from tests.flores import flores_lines

LOAD = """
import json, sys
sys.modules["xmine"] = None  # any import of xmine now fails
from sentence_transformers import SentenceTransformer
model = SentenceTransformer(sys.argv[1], device="cpu")
texts = json.load(open(sys.argv[2]))
print(json.dumps({"modules": [type(m).__name__ for m in model], "vectors": model.encode(texts).tolist(),
                  "query": model.encode_query(texts).tolist(), "document": model.encode_document(texts).tolist()}))
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """One real export of the shipped projection (minutes of CPU), shared by this module's tests;
    a test that damages it puts it back."""
    out = tmp_path_factory.mktemp("export") / "st"
    ok(xm("export-st", "default", out))
    return out


@pytest.mark.slow
def test_export_st_loads_without_xmine_and_gives_the_meaning_vectors(exported, data_dir, tmp_path):
    import xmine

    out = exported
    texts = flores_lines(data_dir, "deu_Latn", 4) + flores_lines(data_dir, "jpn_Jpan", 4)
    (tmp_path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    run = subprocess.run([sys.executable, "-c", LOAD, str(out), str(tmp_path / "texts.json")], capture_output=True,
                         text=True, check=True)
    got = json.loads(run.stdout.splitlines()[-1])
    assert got["modules"] == ["Transformer", "Pooling", "Normalize", "Dense", "Normalize"]
    exported = np.asarray(got["vectors"], dtype=np.float32)
    ours = xmine.embed(texts, precision="fp32")
    cosines = (exported * ours).sum(axis=1) / np.linalg.norm(exported, axis=1) / np.linalg.norm(ours, axis=1)
    assert cosines.min() >= 0.9999, cosines
    # the card's usage (encode_query, encode_document) gives the same vectors (was: encode_document
    # applied e5's "document" prompt, "", cosine 0.96-0.997 to the vectors xmine compares)
    for role in ("query", "document"):
        assert np.abs(np.asarray(got[role], dtype=np.float32) - exported).max() < 1e-5, role
    card = (out / "README.md").read_text(encoding="utf-8")
    record = json.loads((out / "xmine_projection.json").read_text())
    assert "xmine export-st" in card and record["part"] == "meaning"
    # how it was trained and calibrated travels with it, as the card says (was: named, not carried)
    from xmine.encoders.projection import shipped_dir

    shipped = shipped_dir("me5-small")
    assert record["config"] == json.loads((shipped / "config.json").read_text())
    assert record["shipped"] == json.loads((shipped / "SHIPPED.json").read_text())
    assert "`xmine_projection.json`, which holds the projection's own `config.json`" in " ".join(card.split())
    refused(xm("export-st", "default", out), "already exists")


def _flip_byte(path, offset: int) -> bytes:
    """Flip one byte of `path` in place (same size); return the original byte."""
    with open(path, "r+b") as f:
        f.seek(offset)
        old = f.read(1)
        f.seek(offset)
        f.write(bytes([old[0] ^ 0xFF]))
    return old


@pytest.mark.slow
def test_verify_checks_every_file_of_the_export(exported):
    out = exported
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["kind"] == "sentence-transformer-portable" and manifest["format_version"] == 2
    # the weights written and their default prompt (was: only the projection's training encoder, bf16/openvino)
    written = manifest["provenance"]["parameters"]
    assert (written["precision"], written["runtime"], written["prompt"]) == ("fp32", "torch", "query: ")
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} - {"manifest.json"}
    assert set(manifest["files"]) == on_disk and "3_Dense/model.safetensors" in on_disk
    # shared like every other file of it (was: the weights 0600, written through mkstemp)
    from xmine.artefacts.fileio import FILE_MODE

    assert {(out / rel).stat().st_mode & 0o777 for rel in on_disk} == {FILE_MODE}
    res = ok(xm("verify", out))
    assert f"OK, an xmine portable sentence-transformers export ({len(on_disk)} files match" in res.output

    dense, encoder = out / "3_Dense" / "model.safetensors", out / "model.safetensors"
    size = dense.stat().st_size
    old = _flip_byte(dense, size // 2)  # a weight of the meaning layer
    try:
        with untouched(out):
            line = refused(xm("verify", out), str(dense), "sha256 mismatch")
        assert line.startswith(f"xmine: error: {dense}: ")
        # every problem gets its own line naming its file
        old_encoder = _flip_byte(encoder, encoder.stat().st_size - 7)
        (out / "extra.bin").write_bytes(b"x")
        try:
            res = xm("verify", out)
            lines = [ln for ln in res.output.splitlines() if ln.strip()]
            assert res.exit_code == 2 and len(lines) == 3 and "Traceback" not in res.output, res.output
            assert lines[0].startswith(f"xmine: error: {dense}: content differs"), lines[0]
            assert lines[1].startswith(f"xmine: error: {encoder}: content differs") and "sha256 mismatch" in lines[1]
            assert lines[2].startswith(f"xmine: error: {out / 'extra.bin'}: not recorded in the manifest.json")
        finally:
            (out / "extra.bin").unlink()
            with open(encoder, "r+b") as f:
                f.seek(encoder.stat().st_size - 7)
                f.write(old_encoder)
    finally:
        with open(dense, "r+b") as f:
            f.seek(size // 2)
            f.write(old)
    ok(xm("verify", out))


def test_verify_refuses_an_export_manifest_naming_a_file_outside(tmp_path):
    from xmine.artefacts.fileio import sha256_file

    outside = tmp_path / "secret.bin"
    outside.write_bytes(b"secret")
    out = tmp_path / "st"
    (out / "3_Dense").mkdir(parents=True)
    (out / "3_Dense" / "model.safetensors").write_bytes(b"weights")
    record = {"bytes": 7, "sha256": sha256_file(out / "3_Dense" / "model.safetensors")}
    for name in ("../secret.bin", str(outside), "3_Dense/../../secret.bin"):
        (out / "manifest.json").write_text(json.dumps(
            {"kind": "sentence-transformer-portable", "format_version": 2,
             "files": {"3_Dense/model.safetensors": record, name: {"bytes": 6, "sha256": sha256_file(outside)}}}))
        refused(xm("verify", out), "names the file", "which is not a file of an xmine sentence-transformers export")
    (out / "manifest.json").write_text(json.dumps(
        {"kind": "sentence-transformer-portable", "format_version": 2, "files": {"3_Dense/model.safetensors": record}}))
    assert "OK, an xmine portable sentence-transformers export (1 file matches" in ok(xm("verify", out)).output
    (out / "link.bin").symlink_to(outside)
    refused(xm("verify", out), f"{out / 'link.bin'}: not recorded")


@pytest.mark.slow
def test_a_projection_trained_with_a_prompt_is_exported_with_it(data_dir, tmp_path):
    """A projection trained with --prompt is exported with that prompt, which becomes the model's
    default prompt (was: refused, with no option to give it; then: refused unless the prompt was
    given again); another prompt is refused; the export gives xmine's vectors for that prompt.
    `xmine embed` and the Python API take the projection's prompt by default too."""
    from xmine.disentangle.projection import load_projection
    from xmine.encoders import load_encoder

    de, en = flores_lines(data_dir, "deu_Latn", 200), flores_lines(data_dir, "eng_Latn", 200)
    (tmp_path / "p.de").write_text("".join(t + "\n" for t in de), encoding="utf-8")
    (tmp_path / "p.en").write_text("".join(t + "\n" for t in en), encoding="utf-8")
    proj, out = tmp_path / "proj", tmp_path / "st"
    ok(xm("train", "--method", "dream", "--max-epochs", 1, "--pairs", f"{tmp_path / 'p.de'}:{tmp_path / 'p.en'}",
          "--prompt", "passage: ", "-q", "-o", proj))
    with untouched(tmp_path):
        refused(xm("export-st", proj, out, "--prompt", "query: "), "the prompt 'passage: '",
                "(--prompt 'passage: '; prompt='passage: ' in Python)")
    ok(xm("export-st", proj, out))
    assert json.loads((out / "config_sentence_transformers.json").read_text())["default_prompt_name"] == "passage"
    texts = de[:4]
    (tmp_path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    run = subprocess.run([sys.executable, "-c", LOAD, str(out), str(tmp_path / "texts.json")], capture_output=True,
                         text=True, check=True)
    exported = np.asarray(json.loads(run.stdout.splitlines()[-1])["vectors"], dtype=np.float32)
    encoder = load_encoder("me5-small", precision="fp32", runtime="torch", prefix="passage: ")
    ours = load_projection(proj).transform(np.asarray(encoder.encode(texts), dtype=np.float32), "meaning")
    cosines = (exported * ours).sum(axis=1) / np.linalg.norm(exported, axis=1) / np.linalg.norm(ours, axis=1)
    assert cosines.min() >= 0.9999, cosines
    # the Python API refuses the projection the default prompt's embeddings (was: applied without a
    # word, cosine 0.98 to the right vectors), and gives the right ones with the prompt
    import xmine
    from xmine.errors import EncoderMismatchError

    with pytest.raises(EncoderMismatchError, match="the prompt 'passage: '"):
        xmine.embed(texts, projection=proj, precision="fp32", prompt="query: ")
    api = xmine.embed(texts, projection=proj, precision="fp32")  # the projection's prompt by default
    assert np.allclose(api, ours / np.linalg.norm(ours, axis=1, keepdims=True), atol=1e-4)
    ok(xm("embed", tmp_path / "p.de", "--lang", "de", "--projection", proj, "-q", "-o", tmp_path / "store"))
    ok(xm("plot", "--projection", proj, "--rows", 20, "--data-dir", data_dir, "--out", tmp_path / "pca.png"))
    made = json.loads((tmp_path / "store" / "manifest.json").read_text())["encoder"]["id"]
    assert "prefix='passage: '" in made, made


@pytest.mark.slow
def test_an_export_used_as_the_encoder_mines_at_its_projections_defaults(exported, data_dir, tmp_path, caplog):
    """`mine --encoder EXPORT` is the shipped projection's space: its calibrated default, not the
    estimate of a space without one (was: the estimated threshold, 76 of 99 translations kept where
    the shipped projection keeps 99); an export changed since is not that space."""
    from xmine.encoders.projection import projection_defaults, shipped_dir

    de, en = flores_lines(data_dir, "deu_Latn", 60), flores_lines(data_dir, "eng_Latn", 120)
    (tmp_path / "de.txt").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en[60:] + en[:60]) + "\n", encoding="utf-8")  # 60 gold, 60 others
    common = ("--src-lang", "de", "--tgt-lang", "en", "--no-lang-filter", "-q")
    ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--encoder", exported, *common, "-o", tmp_path / "x.tsv"))
    t = json.loads((tmp_path / "x.tsv.json").read_text(encoding="utf-8"))["threshold"]
    shipped = projection_defaults(shipped_dir("me5-small"))
    assert t["rule"]["calibrated_value"] == shipped.threshold("ratio", "balanced") and t["margin"] == "ratio"
    assert f"{exported} (an xmine export-st of the projection" in t["margin_source"]
    assert "other_encoder" not in t and t["score_max"]["value"] == shipped.score_max["ratio"]
    pairs = [line.split("\t")[1:3] for line in (tmp_path / "x.tsv").read_text(encoding="utf-8").splitlines()]
    assert sum(en.index(e) == de.index(d) for d, e in pairs) >= 57, len(pairs)

    dense = exported / "3_Dense" / "model.safetensors"
    old = _flip_byte(dense, dense.stat().st_size // 2)
    try:
        with caplog.at_level("WARNING", logger="xmine"):
            ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--encoder", exported, *common,
                  "-o", tmp_path / "y.tsv"))
        assert any("changed since xmine exported it" in r.getMessage() for r in caplog.records)
        t = json.loads((tmp_path / "y.tsv.json").read_text(encoding="utf-8"))["threshold"]
        assert "no calibrated default for this space" in t["source"]
    finally:
        with open(dense, "r+b") as f:
            f.seek(dense.stat().st_size // 2)
            f.write(old)


@pytest.mark.slow
def test_a_calibration_record_of_the_projection_holds_for_its_export(exported, data_dir, tmp_path):
    """`xmine calibrate --projection P` measures P's meaning space, which `xmine export-st P` computes
    as an encoder: the record is used with `--encoder EXPORT` (was: refused as another space, a
    user's projection having no other calibration for its export); a record of raw embeddings is not."""
    from xmine.encoders.projection import read_projection_json, shipped_dir

    sha = read_projection_json(shipped_dir("me5-small"), "config.json")["weights_sha256"]
    projected, raw = tmp_path / "projected.json", tmp_path / "raw.json"
    calibration_record(projected, {"encoder": "me5-small", "projection": "/elsewhere/my-projection",
                           "projection_weights_sha256": sha})
    calibration_record(raw, {"encoder": "me5-small", "projection": None, "projection_weights_sha256": None})
    de, en = flores_lines(data_dir, "deu_Latn", 60), flores_lines(data_dir, "eng_Latn", 60)
    (tmp_path / "de.txt").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en) + "\n", encoding="utf-8")
    args = ("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--encoder", exported, "--src-lang", "de",
            "--tgt-lang", "en", "-q")
    ok(xm(*args, "--calibration", projected, "-o", tmp_path / "x.tsv"))
    t = json.loads((tmp_path / "x.tsv.json").read_text(encoding="utf-8"))["threshold"]
    assert t["value"] == 1.06 and str(projected) in t["source"], t
    assert "other_encoder" not in t  # (was: "measured with other embeddings", the projection's own weights)
    # the other way round: a record measured with the export as the encoder holds for the projection
    exported_record = tmp_path / "exported.json"
    calibration_record(exported_record, {"encoder": str(exported), "projection": None,
                                         "projection_weights_sha256": None})
    ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--projection", shipped_dir("me5-small"), "--src-lang",
          "de", "--tgt-lang", "en", "-q", "--calibration", exported_record, "-o", tmp_path / "r.tsv"))
    refused(xm(*args, "--calibration", raw, "-o", tmp_path / "y.tsv"), "raw.json", "calibrated for me5-small with raw")
    assert not (tmp_path / "y.tsv").exists() and not (tmp_path / "y.tsv.work").exists()
