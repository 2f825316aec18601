"""xmine.artefacts.checkpoints.KeyedDir: the one keyed checkpoint folder of the resumable steps."""

import json

from xmine.artefacts.checkpoints import KeyedDir, declared_files


def _touch(path, text="x"):
    path.write_text(text)
    return path


def test_same_key_keeps_the_work_and_another_key_drops_only_the_steps_own_files(tmp_path):
    d = tmp_path / "ckpt"
    work = KeyedDir(d, "k1", owned=("tile_*.npz", "state.npz"))
    tile, state = _touch(work.path("tile_000.npz")), _touch(work.path("state.npz"))
    tmp_left = _touch(d / ".tile_001.abc123.tmp.npz")  # what a killed atomic writer leaves
    foreign = _touch(d / "notes.txt", "mine")
    assert json.loads((d / "key.json").read_text()) == {"key": "k1", "owned": ["tile_*.npz", "state.npz"]}

    KeyedDir(d, "k1", owned=("tile_*.npz", "state.npz"))
    assert tile.exists() and state.exists() and tmp_left.exists()

    KeyedDir(d, "k2", owned=("tile_*.npz", "state.npz"))
    assert not tile.exists() and not state.exists() and not tmp_left.exists()
    assert foreign.read_text() == "mine"
    assert json.loads((d / "key.json").read_text()) == {"key": "k2", "owned": ["tile_*.npz", "state.npz"]}


def test_an_unreadable_key_counts_as_another_key(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "key.json").write_text("{not json")
    tile = _touch(d / "tile_1.npz")
    work = KeyedDir(d, "k", owned=("tile_*.npz",))
    assert not tile.exists() and work.recorded_key() == "k"


def test_clear_keeps_the_key(tmp_path):
    work = KeyedDir(tmp_path / "c", "k", owned=("fwd_*.npz",))
    _touch(work.path("fwd_0_10.npz"))
    work.clear()
    assert work.own_files() == [] and work.recorded_key() == "k"


def test_the_key_file_declares_the_steps_files_to_whoever_clears_the_folder_later(tmp_path):
    d = tmp_path / "c"
    d.mkdir()
    (d / "key.json").write_text(json.dumps({"key": "k"}))  # written before the key file named them
    tile = _touch(d / "tile_1.npz")
    assert declared_files(d) == ()  # a key file naming no patterns owns nothing
    KeyedDir(d, "k", owned=("tile_*.npz",))  # the same key: the work stays, the key file now names them
    assert tile.exists()
    assert json.loads((d / "key.json").read_text()) == {"key": "k", "owned": ["tile_*.npz"]}
    assert declared_files(d) == ("key.json", "tile_*.npz", ".tile_*.*.tmp.npz")
    assert declared_files(tmp_path) == ()  # (no key file)
    (d / "key.json").write_text("[1, 2]")  # damaged: another key, not a traceback
    KeyedDir(d, "k", owned=("tile_*.npz",))
    assert not tile.exists() and declared_files(d) == ("key.json", "tile_*.npz", ".tile_*.*.tmp.npz")
