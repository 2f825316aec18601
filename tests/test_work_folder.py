"""What a command removes from its own folders: xmine.mining.work (OUT.work/), xmine.artefacts.directory (a directory artefact replaced)."""

import json
import os
from pathlib import Path

from xmine.artefacts.checkpoints import KeyedDir
from xmine.mining.work import remove_work
from xmine.store.directory import store_file  # (its import registers a store's files, as a run that writes stores does)


def _touch(path, text="x"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_only_the_files_xmine_wrote_go_and_a_folder_left_empty_with_them(tmp_path):
    work = tmp_path / "m.tsv.work"
    _touch(work / ".xmine-output.json", json.dumps({"kind": "mining-result-work"}))
    store = work / "src" / "store"
    _touch(store / ".xmine-output.json", json.dumps({"kind": "embedding-store"}))
    for name in ("emb-00000.npy", "manifest.json", "sentences.txt", ".lock"):
        assert store_file(name)
        _touch(store / name)
    knn = KeyedDir(work / "knn", "k", owned=("tile_*.npz",)).dir
    for i in range(3):
        _touch(knn / f"tile_{i}.npz")
    _touch(work / "fields-ab12cd34" / "kept-fields-x1.jsonl")
    _touch(work / "sides" / "src.txt")
    theirs = [_touch(store / "notes.txt"), _touch(knn / "mine.npz"), _touch(work / "other" / "src.txt"),
              _touch(work / "sides" / "notes.txt"), _touch(tmp_path / "elsewhere.npz")]
    os.symlink(tmp_path / "elsewhere.npz", knn / "tile_9.npz")  # a link of theirs, named as a tile
    kept = remove_work(work)
    assert sorted(p.relative_to(work).as_posix() for p in kept) == [
        "knn/mine.npz", "knn/tile_9.npz", "other/src.txt", "sides/notes.txt", "src/store/notes.txt"]
    assert all(p.exists() for p in theirs) and (knn / "tile_9.npz").is_symlink()
    left = sorted(p.relative_to(work).as_posix() for p in work.rglob("*") if not p.is_dir())
    assert left == [".xmine-output.json", "knn/mine.npz", "knn/tile_9.npz", "other/src.txt", "sides/notes.txt",
                    "src/store/notes.txt"]
    assert not (work / "fields-ab12cd34").exists()
    # theirs moved away: the folder goes whole
    for p in kept:
        p.unlink()
    assert remove_work(work) == [] and not work.exists()


def test_only_limits_the_removal_to_the_entries_it_names(tmp_path):
    work = tmp_path / "w"
    _touch(work / ".xmine-output.json", json.dumps({"kind": "scored-pairs-work"}))
    _touch(work / "fields-1" / "kept-fields-a.jsonl")
    _touch(work / "sides" / "src.txt")
    assert remove_work(work, only="fields-*") == []
    assert not (work / "fields-1").exists() and (work / "sides" / "src.txt").exists()
    assert (work / ".xmine-output.json").exists()


def test_a_directory_artefacts_foreign_files_are_found_at_any_depth(tmp_path):
    """(a helper: by top-level name, so `export-st --overwrite` deleted a user's file put into the
    export's recorded subfolder `3_Dense/`)"""
    from xmine.artefacts.directory import foreign_entries

    art = tmp_path / "st"
    recorded = ["1_Pooling/config.json", "3_Dense/model.safetensors", "README.md"]
    for name in recorded:
        _touch(art / name)
    _touch(art / "manifest.json", json.dumps({"kind": "x", "files": {n: {} for n in recorded}}))
    assert foreign_entries(art) == []
    _touch(art / "3_Dense" / "notes.txt")
    _touch(art / "1_Pooling" / "mydir" / "a.txt")
    _touch(art / "top.txt")
    assert foreign_entries(art) == ["1_Pooling/mydir/a.txt", "3_Dense/notes.txt", "top.txt"]
    # the new artefact's own names (checked again at the swap) count as its own
    assert foreign_entries(art, {"top.txt", "3_Dense/notes.txt"}) == ["1_Pooling/mydir/a.txt"]


def test_a_users_json_named_as_an_artefacts_record_is_kept_not_a_traceback(tmp_path):
    """(review: the clean-up asked dir_kind of every folder, which took a JSON list for an object)"""
    work = tmp_path / "w"
    _touch(work / ".xmine-output.json", json.dumps({"kind": "scored-pairs-work"}))
    _touch(work / "mine" / "manifest.json", "[1, 2]")
    _touch(work / "mine" / ".xmine-output.json", '"a string"')
    assert sorted(p.relative_to(work).as_posix() for p in remove_work(work)) == [
        "mine/.xmine-output.json", "mine/manifest.json"]


def test_both_clean_ups_ask_one_question_and_it_reads_where_a_file_lies(tmp_path):
    """`xmine.artefacts.ownership`: a name a writer registered is xmine's only in a folder that writer
    makes; inside a killed writer's private hidden temporary, private files and scaffolding are too
    (was: two predicates, the work folder's and the leftovers', each with rules of its own)."""
    import importlib
    import tempfile

    from xmine.artefacts.ownership import own_files, temporary_folder

    for writer in ("xmine.index.faiss_index", "xmine.mining.writers"):  # each registers its files on import
        importlib.import_module(writer)

    work = tmp_path / "m.tsv.work"
    _touch(work / ".xmine-output.json", json.dumps({"kind": "mining-result-work"}))
    sides = work / "sides"
    names = ("README.md", "shard_00000.faiss", "state.json", "manifest.json", ".lock", "src.txt")
    for name in names:
        _touch(sides / name)
    own = own_files(sides)
    assert [n for n in names if own(sides / n)] == ["src.txt"]  # theirs, though writers elsewhere use the names
    # a killed writer's temporary in the work folder (tempfile's, private): its files are xmine's
    tmp = Path(tempfile.mkdtemp(dir=work, prefix=".idx.", suffix=".tmp"))
    nested = tmp / "part"
    for name in names:
        _touch(tmp / name)
    _touch(nested / "partial.bin")
    os.chmod(nested / "partial.bin", 0o600)
    _touch(nested / "theirs.txt")
    os.chmod(nested / "theirs.txt", 0o644)
    assert temporary_folder(tmp) and temporary_folder(nested) and not temporary_folder(sides)
    own = own_files(tmp)
    assert [n for n in names if own(tmp / n)] == ["README.md", "shard_00000.faiss", "state.json", "manifest.json",
                                                  ".lock"]
    assert own_files(nested)(nested / "partial.bin") and not own_files(nested)(nested / "theirs.txt")
    # a folder of that name that is not private (not tempfile's) is not a temporary
    public = work / ".idx.abcdefgh.tmp"
    public.mkdir(mode=0o755)
    os.chmod(public, 0o755)
    assert not temporary_folder(public)
    # the work folder's clean-up asks the same question
    kept = sorted(p.relative_to(work).as_posix() for p in remove_work(work))
    assert kept == [f"{tmp.name}/part/theirs.txt", f"{tmp.name}/src.txt"] + [
        f"sides/{n}" for n in sorted(set(names) - {"src.txt"})]  # (src.txt: written by another hand, not private)
