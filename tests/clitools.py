"""Running `xmine` in-process in tests: the invocation and the checks of its outcome."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from pathlib import Path

from click.testing import CliRunner

from xmine.artefacts.fileio import atomic_write_manifest
from xmine.calibration import CALIBRATION_KIND
from xmine.cli import main


def xm(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def ok(res):
    assert res.exit_code == 0, res.output
    return res


def refused(res, *fragments: str) -> str:
    """Exit 2, one error line holding every fragment, no traceback."""
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and "Usage:" not in res.output  # one line, not click's usage block
    errors = [line for line in res.output.splitlines() if line.startswith("xmine: error:")]
    assert len(errors) == 1, res.output
    for f in fragments:
        assert f in errors[0], errors[0]
    return errors[0]


def warned(caplog, message: str) -> bool:
    """Whether `message` was logged as a warning: what the command line prints to stderr as
    "xmine: ..." (in-process, `xm`'s output holds only what click echoes)."""
    return any(r.levelno == logging.WARNING and r.getMessage() == message for r in caplog.records)


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def tree(root: Path) -> dict[str, str]:
    """Every file (hidden ones too) under root -> sha256; every directory -> "dir"; every symbolic
    link -> its target text, not followed (a link out of root is compared as a link, never read)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            key = os.path.relpath(p, root)
            if os.path.islink(p):
                out[key] = "link:" + os.readlink(p)
            elif name in dirnames:
                out[key] = "dir"
            else:
                out[key] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


@contextlib.contextmanager
def untouched(root: Path):
    """Nothing under root is created, changed or deleted inside the block."""
    before = tree(root)
    yield
    after = tree(root)
    assert after == before, {k: (before.get(k), after.get(k)) for k in {*before, *after} if before.get(k) != after.get(k)}


def calibration_record(path, space: dict, *, encoder_id: str | None = None, k: int = 4) -> None:
    """A calibration record as `xmine calibrate` writes it (sealed), of the space `space`, measured
    with the encoder whose fingerprint's id is `encoder_id` (None: a record without one) and `k`
    neighbours."""
    fingerprint = {} if encoder_id is None else {"encoder_fingerprint": {"name": space["encoder"], "id": encoder_id}}
    atomic_write_manifest(path, {
        "kind": CALIBRATION_KIND, "format_version": 1, "space": space, **fingerprint, "default_margin": "ratio",
        "operating_points": {"balanced": {"ratio": 1.06}}, "score_max": {"ratio": 1.4},
        "data": {"source": "test", "src_lang": "de", "tgt_lang": "en", "k": k, "gold_pairs": 200}})

