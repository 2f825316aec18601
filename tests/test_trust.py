"""Trust nothing read from disk (issue #34): no code from a checkpoint, no file outside an
artefact, no OK for what cannot be checked, one line for a damaged projection. Every case runs
through the command line: exit status 2, one error line, no traceback, nothing run or read
outside the artefact, every file byte-identical afterwards.

Artefacts are small and made with the fast `use-m3` encoder on real FLORES-200 lines.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from clitools import ok, refused, tree, xm
from flores import flores_lines
from manifests import rewrite_manifest

N = 40  # lines a side


@pytest.fixture(scope="module")
def made(tmp_path_factory, data_dir):
    """FLORES de/en lines and one artefact of each kind, made once through the CLI."""
    d = tmp_path_factory.mktemp("made")
    for lang, code in (("de", "deu_Latn"), ("en", "eng_Latn")):
        text = "".join(f"{s}\n" for s in flores_lines(data_dir, code, N))
        (d / f"{lang}.txt").write_text(text, encoding="utf-8")
        (d / f"pairs.{lang}").write_text(text, encoding="utf-8")  # line-aligned translations, for train
    ok(xm("embed", d / "de.txt", "--lang", "de", "--encoder", "use-m3", "--shard-rows", 16, "-q", "-o", d / "store"))
    ok(xm("build-index", d / "en.txt", "--lang", "en", "--encoder", "use-m3", "--shard-rows", 16, "-o", d / "index"))
    ok(xm("train", "--method", "seed", "--pairs", f"{d / 'pairs.de'}:{d / 'pairs.en'}", "--encoder", "use-m3",
          "--max-epochs", 2, "--batch-size", 16, "-q", "-o", d / "proj"))
    return d


@pytest.fixture
def ws(made, tmp_path):
    """A workspace: copies of the inputs and artefacts, and an outside folder with a user's file
    and a planted FAISS index, which no manifest may make xmine read."""
    for name in ("de.txt", "en.txt", "pairs.de", "pairs.en", "store", "index", "proj"):
        src = made / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, tmp_path / name)
    outside = tmp_path / "user"
    outside.mkdir()
    shutil.copy2(made / "store" / "emb-00000.npy", outside / "victim.npy")  # a valid array: it would be mined
    shutil.copy2(made / "index" / "shard_00000.faiss", outside / "planted.faiss")  # a valid FAISS index
    return tmp_path


def _refused_everywhere(ws: Path, commands: list[list], *fragments: str) -> None:
    """Each command is refused in one line naming every fragment; nothing changes anywhere."""
    before = tree(ws)
    for args in commands:
        refused(xm(*args), *fragments)
    assert tree(ws) == before


# ------------------------------------------------------------------ 1. code from a checkpoint


def _plant_pickle(path: Path, marker: Path) -> None:
    """A torch.save file whose unpickling runs `touch marker` (the issue's exploit)."""
    code = f"""
import os, torch
class E:
    def __reduce__(self):
        return (os.system, ("touch {marker}",))
torch.save({{"signature": E()}}, {str(path)!r})
"""
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
@pytest.mark.parametrize("planted", ["checkpoint.pt", "checkpoint.safetensors"])
def test_a_planted_pickle_checkpoint_never_runs(ws, planted):
    """The issue's reproducer: a shared projection folder with a pickled checkpoint planted in
    `.work/`. Training into it must not run the pickle: as the old `checkpoint.pt` it is removed
    unread and the run goes on from the real checkpoint; as the checkpoint itself it is refused in
    one line (not a checkpoint xmine wrote)."""
    evil, pwned = ws / "evil", ws / "PWNED"
    train = ["train", "--method", "seed", "--pairs", f"{ws / 'pairs.de'}:{ws / 'pairs.en'}", "--encoder", "use-m3",
             "--batch-size", 16, "-q", "-o"]
    ok(xm(*train, ws / "ps", "--max-epochs", 2))
    shutil.copytree(ws / "ps", evil)
    _plant_pickle(evil / ".work" / planted, pwned)
    train.append(evil)
    if planted == "checkpoint.pt":
        res = xm(*train, "--max-epochs", 3, "--overwrite")
        assert not pwned.exists(), "the planted pickle ran"
        ok(res)  # resumed after epoch 2 from the safetensors checkpoint
        assert not (evil / ".work" / "checkpoint.pt").exists()
        assert [h["epoch"] for h in json.loads((evil / "config.json").read_text())["history"]] == [1, 2, 3]
        ok(xm("verify", evil))
        _plant_pickle(evil / ".work" / planted, pwned)
        refused(xm("verify", evil), "checkpoint.pt", "pickled", "never loads")
    else:
        before = tree(ws)
        refused(xm(*train, "--max-epochs", 3, "--overwrite"), "checkpoint.safetensors",
                "not a training checkpoint xmine wrote", "--restart")
        # what verify's user can do (was: "pass --restart to discard it", an option verify has not)
        refused(xm("verify", evil), "checkpoint.safetensors", "not a training checkpoint xmine wrote",
                f"it serves only to resume training: delete {evil / '.work'}, or train again with --restart")
        assert tree(ws) == before
    assert not pwned.exists()


def test_a_finished_projection_keeps_a_checkpoint_verify_checks(ws):
    work = ws / "proj" / ".work"
    assert sorted(p.name for p in work.iterdir() if not p.name.startswith(".")) == ["checkpoint.safetensors"]
    head = (work / "checkpoint.safetensors").read_bytes()
    ok(xm("verify", ws / "proj"))
    (work / "checkpoint.safetensors").write_bytes(head[:len(head) // 2])  # truncated: the tensors are cut
    refused(xm("verify", ws / "proj"), "checkpoint.safetensors", "damaged training checkpoint")


def _edit_a_weight(checkpoint: Path) -> None:
    """One float of the checkpoint's first model tensor changed in place: the file stays a valid
    safetensors file of the same size, its header untouched."""
    import struct

    data = bytearray(checkpoint.read_bytes())
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    name = min(k for k in header if k.startswith("model/"))
    start = 8 + size + header[name]["data_offsets"][0]
    value = struct.unpack("<f", data[start:start + 4])[0]
    data[start:start + 4] = struct.pack("<f", value + 0.5)
    checkpoint.write_bytes(bytes(data))


_TRAIN = ["train", "--method", "seed", "--encoder", "use-m3", "--batch-size", 16, "-q"]


def test_a_finished_projection_is_replaced_only_with_overwrite_and_never_by_a_longer_checkpoint(ws):
    """Its checkpoint stays in .work/ (a higher --max-epochs continues the run), but a rerun never
    replaces the finished projection without --overwrite, and a checkpoint trained beyond a lower
    --max-epochs is refused, not written as a run of that limit."""
    pairs = f"{ws / 'pairs.de'}:{ws / 'pairs.en'}"
    shutil.rmtree(ws / "proj")  # `made`'s, trained on the same lines at other paths: another run's data
    ok(xm(*_TRAIN, "--pairs", pairs, "--max-epochs", 2, "-o", ws / "proj"))
    before = tree(ws)
    refused(xm(*_TRAIN, "--pairs", pairs, "--max-epochs", 3, "-o", ws / "proj"), "proj: already exists",
            "--overwrite")
    refused(xm(*_TRAIN, "--pairs", pairs, "--max-epochs", 1, "--overwrite", "-o", ws / "proj"),
            "checkpoint.safetensors", "trained for 2 epochs, more than --max-epochs 1", "--restart")
    assert tree(ws) == before
    ok(xm(*_TRAIN, "--pairs", pairs, "--max-epochs", 3, "--overwrite", "-o", ws / "proj"))
    assert [h["epoch"] for h in json.loads((ws / "proj" / "config.json").read_text())["history"]] == [1, 2, 3]
    ok(xm(*_TRAIN, "--pairs", pairs, "--max-epochs", 1, "--overwrite", "--restart", "-o", ws / "proj"))
    config = json.loads((ws / "proj" / "config.json").read_text())
    assert [h["epoch"] for h in config["history"]] == [1] and config["best_epoch"] == 1


def test_an_edited_checkpoint_is_neither_resumed_nor_verified(ws):
    """One weight of the checkpoint changed, the file still valid safetensors: training refuses to
    resume from it (it would train on, and write, weights nobody trained) and verify refuses it."""
    shutil.rmtree(ws / "proj")
    ok(xm(*_TRAIN, "--pairs", f"{ws / 'pairs.de'}:{ws / 'pairs.en'}", "--max-epochs", 2, "-o", ws / "proj"))
    checkpoint = ws / "proj" / ".work" / "checkpoint.safetensors"
    _edit_a_weight(checkpoint)
    before = tree(ws)
    refused(xm(*_TRAIN, "--pairs", f"{ws / 'pairs.de'}:{ws / 'pairs.en'}", "--max-epochs", 3, "--overwrite",
               "-o", ws / "proj"), "checkpoint.safetensors", "differs from the checksum it was written with",
            "--restart")
    refused(xm("verify", ws / "proj"), "checkpoint.safetensors", "differs from the checksum it was written with")
    assert tree(ws) == before


# ------------------------------------------- 2, 3. manifests naming files outside the artefact

_OUT = {
    "../": lambda ws: "../user/victim.npy",
    "absolute": lambda ws: str(ws / "user" / "victim.npy"),
    "missing outside": lambda ws: "../../../../etc/no-such-file-xmine",
}


@pytest.mark.parametrize("where", list(_OUT))
def test_a_store_manifest_naming_a_file_outside_is_refused(ws, where):
    name = _OUT[where](ws)

    def change(m):
        victim = ws / "user" / "victim.npy"
        m["shards"][0]["file"] = name
        if victim.exists():  # the outside file's own size and sha256: only the name can tell
            m["shards"][0]["bytes"] = victim.stat().st_size
            m["shards"][0]["sha256"] = hashlib.sha256(victim.read_bytes()).hexdigest()
    rewrite_manifest(ws / "store" / "manifest.json", change)
    _refused_everywhere(ws, [["verify", ws / "store"], ["mine", ws / "store", ws / "en.txt", "-o", ws / "m.tsv"],
                             ["build-index", ws / "store", "-o", ws / "ix"]],
                        "manifest.json", "names the file", "not a file of an xmine embedding store")


@pytest.mark.parametrize("where", list(_OUT))
def test_a_store_files_entry_outside_is_refused(ws, where):
    rewrite_manifest(ws / "store" / "manifest.json",
                     lambda m: m["files"].update({_OUT[where](ws): m["files"]["hashes.npy"]}))
    _refused_everywhere(ws, [["verify", ws / "store"], ["mine", ws / "store", ws / "en.txt", "-o", ws / "m.tsv"]],
                        "names the file", "not a file of an xmine embedding store")


def test_a_store_file_that_is_a_symlink_out_is_refused(ws):
    shard = ws / "store" / "emb-00000.npy"
    shard.unlink()
    shard.symlink_to(ws / "user" / "victim.npy")  # byte-identical to the real shard: only the link can tell
    _refused_everywhere(ws, [["verify", ws / "store"], ["mine", ws / "store", ws / "en.txt", "-o", ws / "m.tsv"]],
                        "emb-00000.npy", "symbolic link out of the embedding store")


def test_an_interrupted_store_naming_a_file_outside_is_not_resumed(ws):
    """progress.json of an interrupted embed names the per-shard files finalise joins: one
    naming an outside text file would copy it into the store."""
    (ws / "user" / "secret.txt").write_text("".join(f"secret {i}\n" for i in range(16)))
    store = ws / "store"
    m = json.loads((store / "manifest.json").read_text())
    (store / "manifest.json").unlink()
    names = {"file": "emb-00000.npy", "lines_file": "lines-00000.npy", "text_file": "../user/secret.txt",
             "dim": m["dim"]}
    progress = {"identity": {k: m[k] for k in ("input", "encoder", "projection", "part", "dtype", "lang",
                                                 "max_chars")},
                "shards": [{**m["shards"][0], **names}], "more_shards": []}
    (store / "progress.json").write_text(json.dumps(progress))
    before = tree(ws)
    refused(xm("embed", ws / "de.txt", "--lang", "de", "--encoder", "use-m3", "--shard-rows", 16, "-q", "-o", store),
            "progress.json", "text_file", "names the file", "--overwrite")
    assert tree(ws) == before


@pytest.mark.parametrize("where", ["../", "absolute"])
def test_an_index_manifest_naming_a_file_outside_is_refused(ws, where):
    planted = ws / "user" / "planted.faiss"
    name = "../user/planted.faiss" if where == "../" else str(planted)

    def change(m):
        m["shards"][0]["file"] = name
        m["files"][name] = {"bytes": planted.stat().st_size, "sha256": hashlib.sha256(planted.read_bytes()).hexdigest()}
    rewrite_manifest(ws / "index" / "manifest.json", change)
    _refused_everywhere(ws, [["verify", ws / "index"], ["search", ws / "index", ws / "de.txt", "-o", ws / "h.tsv"]],
                        "manifest.json", "names the file", "not a file of an xmine index")


def test_an_index_shard_left_out_of_its_files_is_refused(ws):
    """A shard the manifest's sums do not cover would be parsed by FAISS unchecked."""
    rewrite_manifest(ws / "index" / "manifest.json", lambda m: m["files"].pop("shard_00001.faiss"))
    _refused_everywhere(ws, [["verify", ws / "index"], ["search", ws / "index", ws / "de.txt", "-o", ws / "h.tsv"]],
                        "manifest.json", "shard_00001.faiss is not recorded")


def test_an_index_shard_that_is_a_symlink_out_is_refused(ws):
    shard = ws / "index" / "shard_00000.faiss"
    shard.unlink()
    shard.symlink_to(ws / "user" / "planted.faiss")
    _refused_everywhere(ws, [["verify", ws / "index"], ["search", ws / "index", ws / "de.txt", "-o", ws / "h.tsv"]],
                        "shard_00000.faiss", "symbolic link out of the index")


@pytest.mark.parametrize("where", ["../", "absolute", "symlink"])
def test_a_projection_file_outside_is_refused(ws, where):
    proj = ws / "proj"
    outside = ws / "user" / "SHIPPED.json"
    outside.write_text(json.dumps({"default_thresholds": {"ratio": -5.0}}))
    record = {"bytes": outside.stat().st_size, "sha256": hashlib.sha256(outside.read_bytes()).hexdigest()}
    if where == "symlink":
        (proj / "SHIPPED.json").symlink_to(outside)
        rewrite_manifest(proj / "manifest.json",
                         lambda m: m.setdefault("files", {}).update({"SHIPPED.json": record}))
        fragments = ("SHIPPED.json", "symbolic link out of the projection")
    else:
        name = "../user/SHIPPED.json" if where == "../" else str(outside)
        rewrite_manifest(proj / "manifest.json", lambda m: m.setdefault("files", {}).update({name: record}))
        fragments = ("manifest.json", "names the file", "not a file of an xmine projection")
    _refused_everywhere(ws, [["verify", proj],
                             ["mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "--projection", proj,
                              "-o", ws / "m.tsv"]], *fragments)


def test_a_checkpoint_work_folder_that_is_a_symlink_out_is_refused(ws):
    outside = ws / "user" / "work"
    shutil.move(ws / "proj" / ".work", outside)
    (ws / "proj" / ".work").symlink_to(outside)
    _refused_everywhere(ws, [["verify", ws / "proj"],
                             ["train", "--method", "seed", "--pairs", f"{ws / 'pairs.de'}:{ws / 'pairs.en'}", "--encoder",
                              "use-m3", "--batch-size", 16, "--max-epochs", 3, "--overwrite", "-q", "-o",
                              ws / "proj"]],
                        ".work", "symbolic link")


@pytest.mark.parametrize("where", ["../", "absolute"])
def test_a_sidecar_naming_a_file_outside_is_refused(ws, where):
    """A text output's OUT.json records its files' sums by name: one outside the output's folder
    is never hashed (verify would tell whether it exists and what it holds)."""
    ok(xm("mine", ws / "store", ws / "en.txt", "-o", ws / "m.tsv"))
    victim = ws / "user" / "victim.npy"
    name = "../user/victim.npy" if where == "../" else str(victim)
    record = {"bytes": victim.stat().st_size, "sha256": hashlib.sha256(victim.read_bytes()).hexdigest()}
    rewrite_manifest(ws / "m.tsv.json", lambda summary: summary["output_files"].update({name: record}))
    _refused_everywhere(ws, [["verify", ws / "m.tsv"]], "m.tsv.json", "names the file", "not a file of the output")
    _refused_everywhere(ws, [["mine", ws / "store", ws / "en.txt", "-o", ws / "m.tsv", "--overwrite"]],
                        "m.tsv", "changed since xmine wrote it")


def test_a_summary_edited_where_it_stays_valid_json_is_refused_and_never_replaced(ws):
    """A text output's OUT.json is what `verify` checks the output against and what says how it was
    made, so it checks itself as a manifest does: its threshold edited by hand, still valid JSON,
    is refused by `verify`, and `mine --overwrite` leaves both files alone, as for an edited
    output file. One written before xmine recorded the checksum verifies as before."""
    ok(xm("mine", ws / "store", ws / "en.txt", "-o", ws / "m.tsv"))
    summary = ws / "m.tsv.json"
    text = summary.read_text(encoding="utf-8")
    assert '"manifest_sha256"' in text
    rewrite_manifest(summary, lambda s: None, sealed=False)
    # ... and `verify` says that the summary itself went unchecked (was: a plain "OK")
    assert "but its m.tsv.json records no checksum of its own" in ok(xm("verify", ws / "m.tsv")).output
    assert "but its m.tsv.json records no checksum of its own" in ok(xm("verify", summary)).output

    threshold = json.loads(text)["threshold"]["value"]
    edited = text.replace(f'"value": {threshold}', f'"value": {threshold + 0.5}', 1)
    assert edited != text
    summary.write_text(edited, encoding="utf-8")
    _refused_everywhere(ws, [["verify", ws / "m.tsv"]], "m.tsv.json", "checksum", "edited or damaged")
    _refused_everywhere(ws, [["mine", ws / "store", ws / "en.txt", "-o", ws / "m.tsv", "--overwrite"]],
                        "m.tsv.json", "checksum", "move both away first")


def test_a_benchmark_result_edited_where_it_stays_valid_json_is_refused(ws):
    """A result's numbers are what RESULTS.md shows and what the lab builds on (the ship gate, the
    calibration), so a result ends with the checksum of its own content as a manifest does: a
    number edited by hand, still valid JSON, is refused by `verify` and left out of `bench
    report`, which names it and why; the benchmark replaces it with --overwrite. One written
    before results recorded the checksum verifies as before, and says so."""
    results = ws / "results"
    out = results / "sts-use-m3.json"
    ok(xm("bench", "sts", "--encoder", "use-m3", "--tracks", "track5", "--out", out))
    text = out.read_text(encoding="utf-8")
    record = json.loads(text)
    assert list(record)[-1] == "manifest_sha256"
    assert "its content matches the checksum it was written with" in ok(xm("verify", out)).output

    pearson = record["details"]["raw"]["per_track"]["track5"]["pearson"]
    edited = text.replace(f'"pearson": {pearson}', f'"pearson": {round(pearson + 9.5, 4)}', 1)
    assert edited != text
    out.write_text(edited, encoding="utf-8")
    _refused_everywhere(ws, [["verify", out]], str(out), "checksum it was written with", "edited or damaged",
                        "run the benchmark that wrote it again")
    (results / "junk.json").write_text('{"x": 1}')  # JSON, but no result of xmine's (was: shown as one)
    (results / "other.json").write_text('{"kind": "manifest", "x": 1}')
    (results / "tatoeba.json").write_text(json.dumps(  # one result, so that the report is written
        {"kind": "xmine-benchmark-result", "task": "tatoeba", "table": {"columns": ["variant", "acc"], "rows": [["raw", 90]]}}))
    # a result (written before results were sealed) whose described fields are of other kinds (a helper:
    # a traceback, exit 1): left out, as bad JSON is
    base = {"kind": "xmine-benchmark-result", "task": "qe", "table": {"columns": ["a"], "rows": [[1]]}}
    for name, field in (("prov", {"provenance": None, "x": 1}), ("params", {"provenance": {"parameters": 3}}),
                        ("extra", {"extra_tables": 5}), ("projs", {"projections": "seed"})):
        (results / f"{name}.json").write_text(json.dumps({**base, **field}))
    ok(xm("bench", "report", "--results", results, "--out", ws / "RESULTS.md"))
    md = (ws / "RESULTS.md").read_text(encoding="utf-8")
    assert "- `params.json`: its field 'provenance.parameters' is int, not dict" in md
    assert "- `extra.json`: its field 'extra_tables' is int, not list" in md
    assert "- `projs.json`: its field 'projections' is str, not dict" in md
    assert "`prov.json`" not in md.split("## Files left out")[-1]  # (null: absent, described as such)
    assert "- `sts-use-m3.json`: edited or damaged since xmine wrote it" in md and "SemEval-2017 STS" not in md
    assert "- `junk.json`: no xmine result (it records no kind)" in md and "## junk" not in md
    assert "- `other.json`: no xmine result (its kind is 'manifest')" in md
    ok(xm("bench", "sts", "--encoder", "use-m3", "--tracks", "track5", "--out", out, "--overwrite"))
    ok(xm("verify", out))
    ok(xm("bench", "report", "--results", results, "--out", ws / "RESULTS.md", "--overwrite"))
    assert "SemEval-2017 STS" in (ws / "RESULTS.md").read_text(encoding="utf-8")

    del record["manifest_sha256"]
    out.write_text(json.dumps(record, indent=2), encoding="utf-8")
    assert "written before it recorded a checksum, so not checked" in ok(xm("verify", out)).output

    # its table damaged, its checksum made to agree (was: verify OK; the report showed a dump of the
    # JSON for a table null, and a row cut short as it was)
    from xmine.artefacts.fileio import atomic_write_manifest

    for damage, fragment in ((lambda r: r.update(table=None), "records no table (field 'table')"),
                             (lambda r: r["table"]["rows"][0].pop(), "row 1 of its table is not a list of"),
                             (lambda r: r["table"]["rows"][0].__setitem__(1, {"r": 1}), "row 1 of its table holds a "
                              "cell that is an object or a list")):
        damaged = json.loads(json.dumps(record))
        damage(damaged)
        atomic_write_manifest(out, damaged)
        refused(xm("verify", out), f"{out}: {fragment}", "run the benchmark that wrote it again")
        ok(xm("bench", "report", "--results", results, "--out", ws / "RESULTS.md", "--overwrite"))
        assert f"- `{out.name}`: {fragment}" in (ws / "RESULTS.md").read_text(encoding="utf-8")


def test_every_result_the_project_keeps_verifies():
    """`verify` knows the kind of every result in benchmarks/results (the threshold study's was
    refused as "no kind of result this xmine writes")."""
    from xmine.benchmarks.common import results_dir

    results = sorted(results_dir().glob("*.json"))
    assert len(results) > 40
    for path in results:
        assert ": OK, an xmine " in ok(xm("verify", path)).output


# ------------------------------------------------------ 6. verify says OK only to what it checked


def test_verify_refuses_an_unknown_kind(ws):
    foo = ws / "foo"
    foo.mkdir()
    (foo / "manifest.json").write_text('{"kind": "foo"}')
    (ws / "result.json").write_text('{"kind": "foo"}')
    refused(xm("verify", foo), "manifest.json", "'foo'", "nothing in it can be checked")
    refused(xm("verify", ws / "result.json"), "'foo'", "nothing in it can be checked")
    (ws / "list.json").write_text("[1, 2]")
    refused(xm("verify", ws / "list.json"), "list.json: a JSON list, not an xmine artefact")
    # a symbolic link that loops or names nothing is said to be one (was: "not an xmine artefact (no
    # manifest.json)", "does not exist")
    (ws / "loopA").symlink_to(ws / "loopB")
    (ws / "loopB").symlink_to(ws / "loopA")
    (ws / "dangling").symlink_to(ws / "nowhere")
    refused(xm("verify", ws / "loopA"), "loopA: a symbolic link that loops")
    refused(xm("verify", ws / "dangling"), f"dangling: a symbolic link to {ws / 'nowhere'}, which does not exist")
    refused(xm("embed", ws / "loopA", "--lang", "de", "-o", ws / "s"), "loopA: a symbolic link that loops")
    refused(xm("mine", ws / "store", ws / "dangling", "-o", ws / "m.tsv"), "dangling: a symbolic link to")
    # ... by every option naming an existing path too (was: click's "does not exist")
    refused(xm("mine", ws / "store", ws / "store", "-o", ws / "m.tsv", "--calibration", ws / "loopA"),
            "loopA: a symbolic link that loops")
    refused(xm("build-index", ws / "dangling", "-o", ws / "ix"), "dangling: a symbolic link to")
    refused(xm("search", ws / "loopA", ws / "store", "-o", ws / "hits.tsv"), "loopA: a symbolic link that loops")
    refused(xm("bench", "report", "--results", ws / "loopA", "--out", ws / "r.md"), "loopA: a symbolic link that loops")
    # ... as an output or a projection (a helper: a RuntimeError traceback from resolving the loop)
    same = ("mine", ws / "store", ws / "store", "--allow-same-input")
    for args in ((*same, "-o", ws / "loopA"), (*same, "-o", ws / "m.tsv", "--keep-filtered", ws / "loopA")):
        refused(xm(*args), "exists and is a symbolic link that loops", "refusing to replace it")
    refused(xm(*same, "-o", ws / "m.tsv", "--projection", ws / "loopA"), "loopA: a symbolic link that loops")
    refused(xm(*same, "-o", ws / "m.tsv", "--projection", ws / "dangling"), "no projection directory: a symbolic link to")
    refused(xm("bench", "sts", "--projection", ws / "loopA", "--projection", "default", "--out", ws / "r.json"),
            "loopA: a symbolic link that loops")  # (a helper: a traceback from resolving it)
    refused(xm("langid", "--projection", ws / "loopA", "-o", ws / "l.tsv", ws / "store" / "sentences.txt"),
            "loopA: a symbolic link that loops")
    # several paths: each is checked, a line for each, exit 2 if any failed (was: none after the first failure)
    res = xm("verify", ws / "list.json", ws / "store", foo)
    assert res.exit_code == 2 and "Traceback" not in res.output
    lines = res.output.splitlines()
    assert len(lines) == 3 and "list.json: a JSON list" in lines[0] and lines[2].startswith("xmine: error:")
    assert lines[1].startswith(f"{ws / 'store'}: OK, an xmine embedding store")



def test_verify_names_a_deleted_file_of_a_moses_output_as_missing(ws):
    """(was: "out.de: size or sha256 differs", for a file that is not there at all)"""
    ok(xm("mine", ws / "de.txt", ws / "en.txt", "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3",
          "--format", "moses", "-q", "-o", ws / "out"))
    (ws / "out.de").unlink()
    for given in ("out", "out.json", "out.en"):
        refused(xm("verify", ws / given), f"{ws / 'out.de'}: missing; out.json records it as a file of out")
    # both files damaged: both named, one line each (was: the first only)
    (ws / "out.de").write_text("Hallo\n", encoding="utf-8")
    (ws / "out.en").write_text((ws / "out.en").read_text(encoding="utf-8").upper(), encoding="utf-8")
    res = xm("verify", ws / "out")
    errors = [line for line in res.output.splitlines() if line.startswith("xmine: error:")]
    assert res.exit_code == 2 and len(errors) == 2, res.output
    assert {line.split(": ")[2] for line in errors} == {str(ws / "out.de"), str(ws / "out.en")}, errors
    (ws / "out.json").unlink()  # (was: "out: does not exist", nothing said of out.en beside it)
    refused(xm("verify", ws / "out"), f"{ws / 'out'}: does not exist (out.de, out.en beside it", "its summary out.json")


def test_verify_given_a_summary_checks_its_output_and_names_a_renamed_one(ws):
    """(was: `verify OUT.json` refused as "no kind of record this xmine writes", and an output
    renamed with its summary said to be "written by an older xmine")"""
    import shutil

    out = ws / "m.tsv"
    ok(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-q", "-o", out))
    said = ok(xm("verify", ws / "m.tsv.json")).output
    assert said.startswith(f"{ws / 'm.tsv.json'}: OK, an xmine mining result (the summary of m.tsv: 1 file matches")
    written = out.read_bytes()
    out.write_bytes(written + b"0.9\tx\ty\n")
    refused(xm("verify", ws / "m.tsv.json"), "m.tsv: size or sha256 differs from m.tsv.json")
    out.write_bytes(written)
    shutil.copy(out, ws / "kept.tsv")
    shutil.copy(ws / "m.tsv.json", ws / "kept.tsv.json")
    refused(xm("verify", ws / "kept.tsv"), "kept.tsv.json: records the files m.tsv, not kept.tsv: renamed")
    # a summary one flipped byte made invalid JSON is said to be, and where, as a manifest is (a helper:
    # "not an xmine summary (unreadable, or no kind)"); a store's manifest given, the store is named
    summary = (ws / "m.tsv.json").read_bytes()
    (ws / "m.tsv.json").write_bytes(summary.replace(b'"kind"', b'"kind\x01', 1))
    refused(xm("verify", out), "m.tsv.json: unparseable summary, not valid JSON (Invalid control character at: line")
    (ws / "m.tsv.json").write_bytes(summary)
    refused(xm("verify", ws / "store" / "manifest.json"),
            f"{ws / 'store' / 'manifest.json'}: the manifest of the embedding store {ws / 'store'}; verify the directory")

@pytest.mark.parametrize("artefact", ["store", "index", "proj"])
def test_a_manifest_edited_where_it_stays_valid_json_is_refused(ws, artefact):
    """A manifest is what its artefact's files are checked against, so its own content is checked
    first (its checksum): a provenance string edited by hand, still valid JSON, is refused by
    `verify` and by the command that reads the artefact; the command that made it replaces it
    only with --overwrite. One written before xmine recorded the checksum is read as before."""
    manifest = ws / artefact / "manifest.json"
    text = manifest.read_text(encoding="utf-8")
    unsealed = json.loads(text)
    unsealed.pop("manifest_sha256")
    manifest.write_text(json.dumps(unsealed, indent=2), encoding="utf-8")
    # ... and `verify` says that the manifest itself went unchecked (was: "every sha256 matches" alone)
    assert "manifest.json records no checksum of its own" in ok(xm("verify", ws / artefact)).output

    edited = text.replace('"xmine_version": "', '"xmine_version": "9', 1)
    assert edited != text
    manifest.write_text(edited, encoding="utf-8")
    reads = {"store": ["mine", ws / "store", ws / "en.txt", "-o", ws / "m.tsv"],
             "index": ["search", ws / "index", ws / "de.txt", "-o", ws / "hits.tsv"],
             "proj": ["mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "--projection", ws / "proj",
                      "-o", ws / "m.tsv"]}[artefact]
    _refused_everywhere(ws, [["verify", ws / artefact], reads], str(manifest), "checksum", "edited or damaged")
    makes = {"store": ["embed", ws / "de.txt", "--lang", "de", "--shard-rows", 16],
             "index": ["build-index", ws / "en.txt", "--lang", "en", "--shard-rows", 16],
             "proj": ["train", "--method", "seed", "--pairs", f"{ws / 'pairs.de'}:{ws / 'pairs.en'}",
                      "--max-epochs", 2, "--batch-size", 16]}[artefact]
    makes += ["--encoder", "use-m3", "-q", "-o", ws / artefact]
    _refused_everywhere(ws, [makes], "--overwrite")
    ok(xm(*makes, "--overwrite", *(["--restart"] if artefact == "proj" else [])))
    assert "no checksum of its own" not in ok(xm("verify", ws / artefact)).output
    assert "manifest_sha256" in json.loads(manifest.read_text(encoding="utf-8"))


def test_verify_checks_a_store_relabelled_by_its_kind(ws):
    for kind, fragment in (("faiss-index", "nothing in it can be checked"), ("index", "unknown field"),
                           ("projection", "not a file of an xmine projection")):
        rewrite_manifest(ws / "store" / "manifest.json", lambda m: m.update(kind=kind))
        refused(xm("verify", ws / "store"), fragment)


def _record(artefact: Path, name: str) -> None:
    """Record file `name`'s size and sha256 in the artefact's manifest, as its writer would."""
    data = (artefact / name).read_bytes()
    rewrite_manifest(artefact / "manifest.json", lambda m: m.setdefault("files", {}).update(
        {name: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}}))


def test_an_edited_shipped_json_is_refused_not_used(ws):
    """A projection's SHIPPED.json (its calibrated thresholds) must be recorded in its manifest: one
    added or edited by hand (a threshold of -5.0 keeps every pair) is refused by verify and mine."""
    proj = ws / "proj"
    mine = ["mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "--projection", proj]
    (proj / "SHIPPED.json").write_text(json.dumps({"default_thresholds": {"ratio": -5.0}}))
    _refused_everywhere(ws, [["verify", proj], [*mine, "-o", ws / "m.tsv"]], "SHIPPED.json", "not recorded")
    (proj / "SHIPPED.json").write_text(json.dumps({"default_thresholds": {"ratio": 1.2}}))
    _record(proj, "SHIPPED.json")  # as the shipping step records it
    ok(xm("verify", proj))
    ok(xm(*mine, "-o", ws / "ok.tsv"))
    assert json.loads((ws / "ok.tsv.json").read_text())["threshold"]["value"] == 1.2
    (proj / "SHIPPED.json").write_text(json.dumps({"default_thresholds": {"ratio": -5.0}}))
    _refused_everywhere(ws, [["verify", proj], [*mine, "-o", ws / "m.tsv"]], "SHIPPED.json",
                        "the manifest of the projection")
    (proj / "SHIPPED.json").write_text(json.dumps({"default_thresholds": {"ratio": 1.2}}))  # as recorded
    (proj / "config.json").write_text((proj / "config.json").read_text().replace('"method": "seed"', '"method": "x"'))
    _refused_everywhere(ws, [["verify", proj], [*mine, "-o", ws / "m.tsv"]], "config.json",
                        "the manifest of the projection")


def test_a_projection_without_recorded_sums_is_refused(ws):
    """A projection manifest of format 1 recorded no sums: nothing in it could be checked."""
    rewrite_manifest(ws / "proj" / "manifest.json", lambda m: (m.pop("files"), m.update(format_version=1)),
                     sealed=False)
    _refused_everywhere(ws, [["verify", ws / "proj"], ["langid", "--projection", ws / "proj", ws / "de.txt"]],
                        "made by an older xmine", "projection format 1")


# ----------------------------------------------------------- 8. damaged projection JSON: one line

_CONFIG_DAMAGE = {
    "no spec": (lambda c: c.pop("spec"), "field 'spec' is missing"),
    "no encoder": (lambda c: c.pop("encoder"), "field 'encoder' is missing"),
    "spec a string": (lambda c: c.update(spec="linear"), "field 'spec' is 'linear', not a JSON object"),
    "a list": (lambda c: [c], "a JSON list"),
}


@pytest.mark.parametrize("damage", list(_CONFIG_DAMAGE) + ["SHIPPED a list", "thresholds a string"])
def test_a_damaged_projection_json_is_one_line(ws, damage):
    """Damage that keeps the manifest's sums consistent (rewritten as a writer would): the
    content itself is checked."""
    proj = ws / "proj"
    config = json.loads((proj / "config.json").read_text())
    if damage in _CONFIG_DAMAGE:
        change, fragment = _CONFIG_DAMAGE[damage]
        result = change(config)
        (proj / "config.json").write_text(json.dumps(result if isinstance(result, list) else config))
        target = "config.json"
    else:
        info = [{"default_thresholds": {"ratio": 1.1}}] if damage == "SHIPPED a list" else {"default_thresholds": "1.1"}
        (proj / "SHIPPED.json").write_text(json.dumps(info))
        fragment = "a JSON list" if damage == "SHIPPED a list" else "default_thresholds"
        target = "SHIPPED.json"
    _record(proj, target)  # the sums of the damaged file: only its content can tell
    _refused_everywhere(ws, [["verify", proj], ["mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3",
                                                "--projection", proj, "-o", ws / "m.tsv"]], target, fragment)


# ------------------------------------------------------------------------- 12. unclear messages


def test_verify_names_an_unparseable_manifest_and_where(ws):
    (ws / "store" / "manifest.json").write_text('{"kind": "embedding-store",\n "count": }')
    err = refused(xm("verify", ws / "store"), "manifest.json", "not valid JSON", "line 2 column 11")
    assert "no manifest.json" not in err


def test_search_names_the_text_file_with_a_wrong_line_count(ws):
    """sentences.txt with lines added and the manifest's sums rewritten to match: its count is off."""
    text = ws / "index" / "sentences.txt"
    text.write_text(text.read_text(encoding="utf-8") + "one more\nand another\n", encoding="utf-8")
    rewrite_manifest(ws / "index" / "manifest.json", lambda m: m["files"]["sentences.txt"].update(
        bytes=text.stat().st_size, sha256=hashlib.sha256(text.read_bytes()).hexdigest()))
    refused(xm("search", ws / "index", ws / "de.txt", "-o", ws / "h.tsv"), str(text), "42 lines of text, expected 40")
    # verify reads it a line at a time, and says the same of it (was: every sentence read into a list)
    refused(xm("verify", ws / "index"), str(text), "42 lines, expected 40")
    text.write_bytes(b"\xff\xfe" + text.read_bytes())
    rewrite_manifest(ws / "index" / "manifest.json", lambda m: m["files"]["sentences.txt"].update(
        bytes=text.stat().st_size, sha256=hashlib.sha256(text.read_bytes()).hexdigest()))
    refused(xm("verify", ws / "index"), str(text), "not UTF-8", "the index is damaged, rebuild it")


def test_the_tree_unpickles_nothing():
    """No `weights_only=False`, no pickle loading anywhere in the package."""
    root = Path(__file__).resolve().parent.parent
    found = []
    for sub in ("xmine", "mining", "disentangle", "index", "benchmarks", "scripts"):
        for p in (root / sub).rglob("*.py"):
            text = p.read_text(encoding="utf-8")
            for bad in ("weights_only=False", "pickle.load", "import pickle", "torch.load("):
                if bad in text:
                    found.append(f"{p.relative_to(root)}: {bad}")
    assert not found, found


def test_a_damaged_token_store_is_refused_with_how_to_rebuild_it(tmp_path, me5):
    """FMDA's token-state store (real encoder states of three sentences): a manifest edited where it
    stays valid JSON fails its checksum, one that is no JSON, and a pooled file cut short, are each
    one error naming the store and the remedy, never read as states."""
    from xmine.encoders.tokens import MANIFEST, POOLED, TokenStore, build_token_store
    from xmine.errors import ArtefactError, DamagedManifestError

    store = build_token_store(me5, ["Ein Satz.", "Noch einer, etwas länger.", "Drei."], root=tmp_path)
    assert len(TokenStore(store.path)) == 3 and store.token_states(1).shape[0] == store.lengths()[1] > 0
    manifest = store.path / MANIFEST
    sealed = manifest.read_text(encoding="utf-8")

    manifest.write_text(sealed.replace('"sentences": 3', '"sentences": 2'), encoding="utf-8")
    assert manifest.read_text(encoding="utf-8") != sealed
    with pytest.raises(DamagedManifestError, match=f"delete {store.path} to rebuild the token store"):
        TokenStore(store.path)

    manifest.write_text(sealed[:-5], encoding="utf-8")
    with pytest.raises(ArtefactError, match="damaged token store .*not valid JSON.*delete this folder to rebuild"):
        TokenStore(store.path)

    manifest.write_text(sealed, encoding="utf-8")
    pooled = store.path / POOLED
    pooled.write_bytes(pooled.read_bytes()[:-8])
    with pytest.raises(ArtefactError, match="damaged token store"):
        TokenStore(store.path)


def _consistent(proj: Path, name: str) -> None:
    """The projection's manifest (and, for the weights, config.json's weights_sha256) made to agree
    with its file `name` as it now is: a malicious but self-consistent artefact."""
    if name == "model.safetensors":
        config = json.loads((proj / "config.json").read_text(encoding="utf-8"))
        config["weights_sha256"] = hashlib.sha256((proj / name).read_bytes()).hexdigest()
        (proj / "config.json").write_text(json.dumps(config), encoding="utf-8")
        _consistent(proj, "config.json")
    _resum(proj, name)


@pytest.mark.parametrize("damage, fragment", [
    ("header", "model.safetensors: not a readable safetensors file (Error while deserializing header"),
    ("pickle", "model.safetensors: not a readable safetensors file"),
    ("spec_dim", "config.json: its spec (dim 60000, layers 1) declares more than"),
    ("spec_layers", "config.json: its spec (dim 512, layers 10000000) declares more than"),
])
def test_a_self_consistent_damaged_projection_is_one_line_before_anything_is_allocated(ws, damage, fragment):
    """(was: a SafetensorError traceback once the sums agreed; a spec of dim 60,000 or 10^7 layers
    built, gigabytes allocated, before the weights were looked at)"""
    proj = ws / "proj"
    weights = proj / "model.safetensors"
    if damage == "header":
        data = weights.read_bytes()
        weights.write_bytes(struct.pack("<Q", 2**62) + data[8:])
        _consistent(proj, "model.safetensors")
    elif damage == "pickle":
        weights.write_bytes(pickle.dumps({"a": 1}))
        _consistent(proj, "model.safetensors")
    else:
        config = json.loads((proj / "config.json").read_text(encoding="utf-8"))
        config["spec"]["dim" if damage == "spec_dim" else "layers"] = 60000 if damage == "spec_dim" else 10**7
        (proj / "config.json").write_text(json.dumps(config), encoding="utf-8")
        _consistent(proj, "config.json")
    for command in (["verify", proj], ["langid", "--projection", proj, ws / "de.txt"]):
        refused(xm(*command), fragment)


@pytest.mark.parametrize("damage, fragment", [
    ("method", "config.json: field 'method' is \"x-method\", but manifest.json records"),
    ("encoder_dim", "config.json: field 'encoder.dim' is 768, but manifest.json records 512"),
    ("languages", "config.json: field 'languages' is [\"fra\", \"eng\"], but manifest.json records"),
    ("spec_dim", "config.json: field 'dim' is 512, but its spec says 256"),
    ("extra_weight", "model.safetensors: weights do not fit the model in config.json: Unexpected key(s) in "
                     "state_dict: \"extra.bias\""),
])
def test_a_projection_whose_config_says_otherwise_than_its_manifest_or_weights_is_one_line(ws, damage, fragment):
    """Sums made to agree (was, for each: verify OK; the edited method recorded in every output, the
    languages and the dimension unseen, an edited encoder dim refusing the right embeddings as
    another encoder's; weights of another model: torch's error on several lines)."""
    from safetensors.torch import load_file, save_file

    proj = ws / "proj"
    if damage == "extra_weight":
        state = load_file(str(proj / "model.safetensors"))
        save_file({**state, "extra.bias": state[next(iter(state))].flatten()[:4].clone()}, str(proj / "model.safetensors"))
        _consistent(proj, "model.safetensors")
    else:
        config = json.loads((proj / "config.json").read_text(encoding="utf-8"))
        if damage == "method":
            config["method"] = "x-method"
        elif damage == "encoder_dim":
            config["encoder"]["dim"] = 768
        elif damage == "languages":
            config["languages"] = ["fra", "eng"]
        else:
            config["spec"]["dim"] = 256
        (proj / "config.json").write_text(json.dumps(config), encoding="utf-8")
        _consistent(proj, "config.json")
    for command in (["verify", proj], ["mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "--projection",
                                         proj, "-q", "-o", ws / "m.tsv"]):
        refused(xm(*command), fragment)


@pytest.mark.parametrize("offset, fragment", [(10**15, "outside the file's"), (5, "out of order")])
def test_a_store_whose_offsets_point_outside_its_text_is_one_line(ws, offset, fragment):
    """A self-consistent store (its sums made to agree) whose offsets.npy is damaged: (was: a petabyte
    asked of pread, a MemoryError traceback; offsets out of order: "invalid argument", no file named)"""
    offsets = np.load(ws / "store" / "offsets.npy")
    offsets[10] = offset
    np.save(ws / "store" / "offsets.npy", offsets)

    def change(manifest):
        data = (ws / "store" / "offsets.npy").read_bytes()
        manifest["files"]["offsets.npy"] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    rewrite_manifest(ws / "store" / "manifest.json", change)
    refused(xm("mine", ws / "store", ws / "en.txt", "--encoder", "use-m3", "-q", "-o", ws / "m.tsv"),
            "store/sentences.txt: line", "by offsets.npy", fragment)


def test_index_shards_out_of_order_or_returning_ids_not_rows_are_one_line(ws):
    """Self-consistent indexes (sums made to agree): shards[0] starting at row 5, and a shard that is
    a FAISS id map whose ids are not its rows (was: verify OK, then an IndexError traceback in search)."""
    import faiss

    search = ["search", ws / "index", ws / "de.txt", "-k", 3, "-q", "-o", ws / "h.tsv"]
    original = (ws / "index" / "manifest.json").read_bytes()
    rewrite_manifest(ws / "index" / "manifest.json", lambda m: m["shards"][0].update(start=5))
    _refused_everywhere(ws, [["verify", ws / "index"], search], "manifest.json", "shards[0] starts at row 5")
    (ws / "index" / "manifest.json").write_bytes(original)
    shard = ws / "index" / "shard_00000.faiss"
    flat = faiss.read_index(str(shard))
    vectors = flat.reconstruct_n(0, flat.ntotal)
    mapped = faiss.IndexIDMap(faiss.IndexFlatIP(flat.d))
    mapped.add_with_ids(vectors, np.arange(flat.ntotal, dtype=np.int64) + 10**9)
    faiss.write_index(mapped, str(shard))
    data = shard.read_bytes()
    rewrite_manifest(ws / "index" / "manifest.json", lambda m: m["files"].update(
        {"shard_00000.faiss": {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}}))
    _refused_everywhere(ws, [["verify", ws / "index"], search], "shard_00000.faiss: a FAISS IndexIDMap, not the "
                        "IndexFlat the manifest's 'Flat' builds")  # (was: found only as it "returned row 1000000000")


def _resum(artefact: Path, name: str) -> None:
    """The manifest's record of `name` made to agree with the file as it now is."""
    data = (artefact / name).read_bytes()
    rewrite_manifest(artefact / "manifest.json", lambda m: m["files"].update(
        {name: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}}))


def test_self_consistent_artefacts_that_would_give_wrong_results_are_refused(ws):
    """Sums made to agree, contents wrong (was: exit 0 and a wrong result each, verify OK): a store's
    line number -5 written as a record number, a sentences.txt with a line more than its rows, an
    index's line numbers -1, an L2 shard whose distances were ranked as similarities."""
    import faiss

    shutil.copytree(ws / "store", ws / "store2")
    numbers = np.load(ws / "store" / "line_numbers.npy")
    numbers[0] = -5
    np.save(ws / "store" / "line_numbers.npy", numbers)
    _resum(ws / "store", "line_numbers.npy")
    refused(xm("mine", ws / "store", ws / "en.txt", "--encoder", "use-m3", "-q", "-o", ws / "m.tsv"),
            "line_numbers.npy: holds -5, where line numbers count from 1")
    with open(ws / "store2" / "sentences.txt", "a", encoding="utf-8") as f:
        f.write("one line more\n")
    _resum(ws / "store2", "sentences.txt")
    refused(xm("mine", ws / "store2", ws / "en.txt", "--encoder", "use-m3", "-q", "-o", ws / "m.tsv"),
            "sentences.txt:", "where offsets.npy ends its last line")
    index = ws / "index"
    numbers = np.load(index / "line_numbers.npy")
    np.save(index / "line_numbers.npy", numbers * 0 - 1)
    _resum(index, "line_numbers.npy")
    refused(xm("search", index, ws / "de.txt", "-q"), "line_numbers.npy: holds -1")
    np.save(index / "line_numbers.npy", numbers)
    _resum(index, "line_numbers.npy")
    shard = index / "shard_00000.faiss"
    flat = faiss.read_index(str(shard))
    l2 = faiss.IndexFlatL2(flat.d)
    l2.add(flat.reconstruct_n(0, flat.ntotal))
    faiss.write_index(l2, str(shard))
    _resum(index, "shard_00000.faiss")
    refused(xm("verify", index), "shard_00000.faiss: a FAISS index of another metric")
    # an IndexIDMap of the same vectors (was: `mine` aborted in FAISS's reconstruct, exit 134; with
    # ids of its own, `search` returned other rows), and a Flat shard of vectors not of unit length
    # (was: cosines above 1, another threshold); each with its sha256 recomputed
    vectors = flat.reconstruct_n(0, flat.ntotal)
    for ids in (np.arange(flat.ntotal), np.arange(flat.ntotal) - 1000):
        mapped = faiss.IndexIDMap(faiss.IndexFlatIP(flat.d))
        mapped.add_with_ids(vectors, ids.astype(np.int64))
        faiss.write_index(mapped, str(shard))
        _resum(index, "shard_00000.faiss")
        for command in (["verify", index], ["search", index, ws / "de.txt", "-q"],
                        ["mine", ws / "de.txt", index, "--encoder", "use-m3", "-q", "-o", ws / "m.tsv"]):
            refused(xm(*command), "shard_00000.faiss: a FAISS IndexIDMap, not the IndexFlat the manifest's 'Flat' "
                    "builds; the index is damaged, rebuild it")
    scaled = faiss.IndexFlatIP(flat.d)
    scaled.add(vectors * 3)
    faiss.write_index(scaled, str(shard))
    _resum(index, "shard_00000.faiss")
    refused(xm("search", index, ws / "de.txt", "-q"), "shard_00000.faiss: row ", "of the shard has length 3,",
            "where xmine stores unit vectors")
    faiss.write_index(flat, str(shard))
    _resum(index, "shard_00000.faiss")
    ok(xm("verify", index))


def test_json_records_nested_deep_or_with_huge_integers_are_one_error(ws, tmp_path):
    """(was: a traceback, exit 1: RecursionError for arrays nested 100,000 deep, ValueError for an
    integer of 5,000 digits, in a store's manifest or a calibration record)"""
    import shutil

    for name, text in (("deep", "[" * 100_000 + "]" * 100_000), ("bigint", '{"count": ' + "9" * 5000 + "}")):
        store = tmp_path / f"store.{name}"
        shutil.copytree(ws / "store", store)
        (store / "manifest.json").write_text(text)
        why = "RecursionError" if name == "deep" else "ValueError"
        refused(xm("verify", store), f"{store / 'manifest.json'}: not a manifest xmine writes ({why}")
        refused(xm("mine", store, ws / "en.txt", "-o", tmp_path / "m.tsv"), "not a manifest xmine writes")
        record = tmp_path / f"c.{name}.json"
        record.write_text(text)
        refused(xm("verify", record), str(record))
        refused(xm("mine", ws / "store", ws / "en.txt", "--calibration", record, "-o", tmp_path / "m.tsv"),
                f"{record}: unreadable calibration record")
    assert not (tmp_path / "m.tsv").exists()
