"""`xmine verify`: check an artefact completely, whatever its kind.

An embedding store against every sha256 its manifest records (`xmine.store.reader.verify_store`);
a directory of a feature package's kind through its registered reader
(`xmine.artefacts.directory.open_artefact`), which validates on open; a TSV output against its `OUT.json` summary (`verify_output_file`);
a result JSON by its `kind`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from xmine.errors import ArtefactError, ConfigError
from xmine.artefacts.fileio import MANIFEST, load_manifest, read_manifest
from xmine.artefacts.output_state import MARKER, changed_files, dir_kind, own_output_name, read_json, sidecar_of
from xmine.artefacts.directory import open_artefact
from xmine.store.reader import verify_store

#: Directory artefacts xmine makes whose manifests record no sha256 sums, nor have a reader: a
#: sentence-transformers export (xmine.disentangle.st_module), the converted encoder models of the
#: cache (xmine.encoders: e5_q4, ov_build), FMDA's sampled pairs (xmine.disentangle.fmda_data).
#: `verify` checks their manifest and lists their files; any other kind without a reader is refused.
UNCHECKED_KINDS = ("sentence-transformer-export", "encoder-model", "openvino-model", "fmda-sample-pairs")
#: The result files (JSON with a top-level `kind`) the benchmarks write (xmine.benchmarks).
RESULT_KINDS = ("xmine-benchmark-result", "bucc-result", "speed-benchmark-result")


def verify_artefact(path: str | Path) -> tuple[str, int, str]:
    """Check an artefact completely; return (kind, bytes checked, detail) or raise ArtefactError."""
    p = Path(path)
    if p.is_dir() and not (p / MANIFEST).is_file() and sidecar_of(p).is_file():  # a dataset folder output
        return verify_output_file(p)
    if not os.path.lexists(p):
        if sidecar_of(p).is_file():  # OUT of a result written beside it (Moses: OUT.src, OUT.tgt)
            return verify_output_file(p)
        raise ArtefactError(f"{p}: does not exist")
    if p.suffix in (".src", ".tgt") and not sidecar_of(p).is_file() and sidecar_of(p.with_suffix("")).is_file():
        return verify_output_file(p.with_suffix(""))  # one file of a Moses pair: the pair is checked
    if p.is_dir():
        if (p / MANIFEST).is_file():
            kind = load_manifest(p / MANIFEST).get("kind")  # an unparseable one says so, and where
            if not isinstance(kind, str):
                raise ArtefactError(f"{p / MANIFEST}: records no kind (field 'kind' is {kind!r}); not an xmine "
                                    "artefact")
        else:
            kind, _ = dir_kind(p)
            if kind is None:
                raise ArtefactError(f"{p}: not an xmine artefact (no {MANIFEST})")
            raise ArtefactError(f"{p}: an unfinished xmine {kind.replace('-', ' ')} (no {MANIFEST}); run the "
                                "command that made it again to finish it")
        if kind == "embedding-store":
            return (kind, *verify_store(p))
        if kind in UNCHECKED_KINDS:  # its manifest and files
            read_manifest(p, kind)
            files = [e for e in p.rglob("*") if e.is_file() and e.name != MARKER]
            return kind, sum(e.stat().st_size for e in files), f"{len(files)} files present (no sums recorded)"
        try:
            artefact = open_artefact(p, kind)  # the owning package's reader validates on open
        except ConfigError:
            raise ArtefactError(f"{p / MANIFEST}: kind {kind[:80]!r} is no kind of artefact this xmine makes or "
                                "reads; nothing in it can be checked") from None
        if hasattr(artefact, "verify"):
            return kind, int(artefact.verify()), "every recorded sha256 matches, every part loads"
        files = [e for e in p.rglob("*") if e.is_file()]
        return kind, sum(e.stat().st_size for e in files), "loads, and its reader's checks pass"
    if sidecar_of(p).is_file():
        return verify_output_file(p)
    if p.suffix == ".json":
        try:
            kind = json.loads(p.read_text(encoding="utf-8")).get("kind")
        except (OSError, ValueError, AttributeError) as e:
            raise ArtefactError(f"{p}: not an xmine artefact (unreadable JSON: {e})") from None
        if kind in RESULT_KINDS:
            return kind, p.stat().st_size, "readable JSON (results record no sums)"
        if kind:
            raise ArtefactError(f"{p}: kind {str(kind)[:80]!r} is no kind of result this xmine writes; nothing in it "
                                "can be checked")
    raise ArtefactError(f"{p}: not an xmine artefact (no {MANIFEST}, no {sidecar_of(p).name} summary)")


def verify_output_file(path: str | Path) -> tuple[str, int, str]:
    """Check a "tsv" output against its OUT.json summary: (kind, bytes, detail) or ArtefactError."""
    path = Path(path)
    side = read_json(sidecar_of(path))
    if side is None or "kind" not in side:
        raise ArtefactError(f"{sidecar_of(path)}: not an xmine summary (unreadable, or no kind)")
    if side.get("state") != "finished":
        raise ArtefactError(f"{path}: unfinished (its run was interrupted); run the same command again")
    if "replacing" in side:
        raise ArtefactError(f"{path}: its replacement was interrupted while the new files were moved in; "
                            "run the same command again with --overwrite")
    files = side.get("output_files") or {}
    if path.name not in files and not any(name.startswith(path.name + ".") for name in files):
        raise ArtefactError(f"{sidecar_of(path)}: records no sha256 of {path.name} (written by an older xmine)")
    foreign = next((name for name in files if not own_output_name(path, name)), None)
    if foreign is not None:
        raise ArtefactError(f"{sidecar_of(path)}: names the file {repr(foreign)[:80]}, which is not a file of "
                            f"the output {path.name}; refusing to read it")
    changed = changed_files(side, path)
    if changed:
        raise ArtefactError(f"{path.parent / changed[0]}: size or sha256 differs from {sidecar_of(path).name}: "
                            "changed or damaged since xmine wrote it")
    return side["kind"], sum(int(r["bytes"]) for r in files.values()), f"{len(files)} file(s) match their sha256"
