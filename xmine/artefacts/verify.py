"""`xmine verify`: check an artefact completely, whatever its kind.

An embedding store against every sha256 its manifest records (`xmine.store.reader.verify_store`);
a directory of a feature package's kind through its registered reader
(`xmine.artefacts.directory.open_artefact`), which validates on open; a sentence-transformers
export against the size and sha256 of every file its manifest records (`check_recorded_files`);
a TSV output against its `OUT.json` summary (`verify_output_file`; the summary named checks its output); a JSON record xmine writes on its own
(a benchmark result, a calibration record) by the checksum it ends with (`JSON_KINDS`).
"""

from __future__ import annotations

import glob
import json
import os
import re
from pathlib import Path

from xmine.calibration import CALIBRATION_DAMAGED_ADVICE, CALIBRATION_KIND, parse_defaults
from xmine.errors import ArtefactError, ConfigError
from xmine.artefacts.fileio import (MANIFEST, MARKER, SELF_CHECKSUM, inside, kind_label, load_manifest, manifest_kind,
                                    missing, read_json, read_manifest, sha256_file, unseal)
from xmine.artefacts.records import FileRecord, read_field
from xmine.artefacts.output_state import changed_files, dir_kind, own_output_name, sidecar_of, tree_changes
from xmine.artefacts.directory import open_artefact
from xmine.store.reader import verify_store

#: Directory artefacts xmine makes whose manifests record no sha256 sums, nor have a reader: FMDA's
#: sampled pairs (xmine.disentangle.fmda_data). `verify` checks their manifest and lists their
#: files; any other kind without a reader is refused.
UNCHECKED_KINDS = ("fmda-sample-pairs",)
#: Directory artefacts without a reader whose manifest records, from the format given on, the size
#: and sha256 of every file in them by its path relative to the directory (`files`): the
#: sentence-transformers exports of `xmine export-st` (xmine.disentangle.st_export, st_module) and
#: the OpenVINO models of the cache (xmine.encoders.ov_build; was: listed, "no sums recorded",
#: a flipped byte of model.bin passed) and the rebuilt me5-small of the cache (xmine.encoders.e5_q4;
#: was the same). `verify` checks every recorded file and that no other file was added; one made
#: before that format records no sums, and is only listed (as an unchecked kind is).
RECORDED_KINDS = {"sentence-transformer-portable": 2, "sentence-transformer-export": 2, "openvino-model": 1,
                  "encoder-model": 2}
#: the cache's models, whose manifests record a file's bytes as "size", and what they are called
_CACHED_MODELS = {"openvino-model": "OpenVINO model", "encoder-model": "rebuilt me5-small model"}
#: The result files (JSON with a top-level `kind`) the benchmarks and the lab write
#: (xmine.benchmarks, benchmarks/lab). From this version on each ends with the checksum of its own
#: content (`atomic_write_manifest`), which `verify`, `bench report` and the lab check on reading.
RESULT_KINDS = ("xmine-benchmark-result", "bucc-result", "speed-benchmark-result", "threshold-study")
#: What a damaged result's refusal advises (`verify`, `bench report`, the lab's readers).
RESULT_DAMAGED_ADVICE = "none of its numbers can be trusted; run the benchmark that wrote it again"
#: Every JSON record xmine writes on its own (a `kind` at the top, its checksum at the end), which
#: `verify` checks by that checksum: the results and the records of `xmine calibrate`, each with
#: what its refusal advises.
JSON_KINDS = {**dict.fromkeys(RESULT_KINDS, RESULT_DAMAGED_ADVICE), CALIBRATION_KIND: CALIBRATION_DAMAGED_ADVICE}
#: The names a store's or an index's writer gives its per-shard files (`xmine.store.layout.shard_names`,
#: `xmine.index.faiss_index.shard_name`): one such file its manifest does not record is never read,
#: but it says that two runs or copies were mixed, which `verify` reports.
SHARD_NAMES = {"embedding-store": re.compile(r"(emb|lines|text|ids|sent)-\d{5}\.(npy|txt)"),
               "index": re.compile(r"shard_\d{5}\.faiss")}


def _names_in(value) -> set[str]:
    """Every string in a manifest's values: the file names it records, wherever it records them."""
    if isinstance(value, dict):
        return set().union(*map(_names_in, value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*map(_names_in, value)) if value else set()
    return {value} if isinstance(value, str) else set()


def check_no_stray_shards(directory: Path, kind: str) -> None:
    """ArtefactError naming each file of `directory` (a store or an index) that bears a shard's name
    and is not recorded in its manifest (a shard copied in from another run)."""
    pattern = SHARD_NAMES.get(kind)
    if pattern is None:
        return
    recorded = _names_in(json.loads((directory / MANIFEST).read_text(encoding="utf-8")))
    stray = sorted(p.name for p in directory.iterdir() if pattern.fullmatch(p.name) and p.name not in recorded)
    if stray:
        raise ArtefactError("\n".join(
            f"{directory / name}: named as a shard of the {kind.replace('-', ' ')}, but not recorded in its "
            f"{MANIFEST}: never read, but a copy from another run or another artefact; remove it" for name in stray))


def verify_artefact(path: str | Path) -> tuple[str, int, str]:
    """Check an artefact completely; return (kind, bytes checked, detail) or raise ArtefactError.
    A directory whose manifest carries no checksum of its own is read as before (`unseal`), and
    the detail says that the manifest itself went unchecked (was: "every sha256 matches" for a
    manifest whose checksum had been removed and its language edited)."""
    if not str(path):  # (was: Path("") is ".", and a traceback from its empty name)
        raise ArtefactError(f"{str(path)!r}: an empty path names no artefact")
    kind, nbytes, detail = _verify(Path(path))
    # the record that vouches for the files: a directory's manifest, an output's summary OUT.json
    record = (Path(path) / MANIFEST if (Path(path) / MANIFEST).is_file() else
              Path(path) if detail.startswith("the summary of ") else sidecar_of(Path(path)))  # (OUT.json given)
    if record.is_file() and SELF_CHECKSUM not in (read_json(record) or {}):
        detail += (f"; but its {record.name} records no checksum of its own ({SELF_CHECKSUM}: written by hand, or "
                   f"by an xmine before it recorded one), so what {record.name} says is not checked")
    return kind, nbytes, detail


def _verify(p: Path) -> tuple[str, int, str]:
    if p.is_dir() and not (p / MANIFEST).is_file() and sidecar_of(p).is_file():  # a dataset folder output
        return verify_output_file(p)
    if not os.path.lexists(p):
        if sidecar_of(p).is_file():  # OUT of a result written beside it (Moses: OUT.src, OUT.tgt)
            return verify_output_file(p)
        beside = sorted(q.name for q in p.parent.glob(glob.escape(p.name) + ".*"))
        if beside:  # (was: "does not exist", though its files are there)
            which = "they are the files" if len(beside) > 1 else "it is a file"
            raise ArtefactError(f"{p}: does not exist ({', '.join(beside[:3])} beside it: if {which} of an xmine "
                                f"output, its summary {sidecar_of(p).name} is missing)")
        raise ArtefactError(f"{p}: does not exist")
    if (why := missing(p)) is not None:  # a symbolic link that loops or names nothing
        raise ArtefactError(f"{p}: {why}")
    base = p.with_suffix("") if p.suffix else p  # (`.` and `..` have no name to take a suffix from)
    if p.suffix and not sidecar_of(p).is_file() and sidecar_of(base).is_file() and p.name in (
            (read_json(sidecar_of(base)) or {}).get("output_files") or {}):
        return verify_output_file(base)  # one file of a Moses pair (OUT.src, OUT.de): the pair is checked
    if p.is_dir():
        if (p / MANIFEST).is_file():
            kind = manifest_kind(p)  # an unparseable manifest says so, and where
        else:
            kind, _ = dir_kind(p)
            if kind is None:
                raise ArtefactError(f"{p}: not an xmine artefact (no {MANIFEST})")
            if kind.endswith("-work"):  # (was: "an unfinished xmine mining result work" of a finished run's)
                raise ArtefactError(f"{p}: the work folder of an xmine {kind.removesuffix('-work').replace('-', ' ')} "
                                    f"(its checkpoints, kept by --keep-work or left by a run that stopped), not an "
                                    f"artefact: verify the output it belongs to ({p.with_suffix('')})")
            raise ArtefactError(f"{p}: an unfinished xmine {kind.replace('-', ' ')} (no {MANIFEST}); run the "
                                "command that made it again to finish it")
        if kind == "embedding-store":
            checked = verify_store(p)
            check_no_stray_shards(p, kind)  # (after its manifest and files are checked)
            return (kind, *checked)
        if kind in RECORDED_KINDS:
            manifest = read_manifest(p, kind)
            if manifest.get("format_version", 1) >= RECORDED_KINDS[kind]:
                what = "sentence-transformers export"
                if kind in _CACHED_MODELS:  # (ov_build and e5_q4 record a file's bytes as "size")
                    what, files = _CACHED_MODELS[kind], manifest.get("files")
                    if isinstance(files, dict):
                        manifest = {**manifest, "files": {name: {("bytes" if k == "size" else k): v for k, v in r.items()}
                                                          if isinstance(r, dict) else r for name, r in files.items()}}
                nbytes, count = check_recorded_files(p, manifest, what=what)
                return kind, nbytes, _match(count, "recorded size and sha256")
        if kind in UNCHECKED_KINDS or kind in RECORDED_KINDS:  # its manifest and files
            read_manifest(p, kind)
            files = [e for e in p.rglob("*") if e.is_file() and e.name != MARKER]
            older = (" (built by an older xmine; it is rebuilt on its next use)" if kind in _CACHED_MODELS else
                     " (written by an older xmine; export it again to record them)" if kind in RECORDED_KINDS else "")
            return kind, sum(e.stat().st_size for e in files), f"{_files(len(files))} present (no sums recorded{older})"
        try:
            artefact = open_artefact(p, kind)  # the owning package's reader validates on open
        except ConfigError:
            raise ArtefactError(f"{p / MANIFEST}: kind {kind[:80]!r} is no kind of artefact this xmine makes or "
                                "reads; nothing in it can be checked") from None
        if hasattr(artefact, "verify"):
            nbytes = int(artefact.verify())
            check_no_stray_shards(p, kind)
            return kind, nbytes, "every recorded sha256 matches, every part loads"
        files = [e for e in p.rglob("*") if e.is_file()]
        return kind, sum(e.stat().st_size for e in files), "loads, and its reader's checks pass"
    if sidecar_of(p).is_file():
        return verify_output_file(p)
    if p.suffix == ".json":
        try:
            record = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as e:
            raise ArtefactError(f"{p}: not an xmine artefact (unreadable JSON: {e})") from None
        if not isinstance(record, dict):
            raise ArtefactError(f"{p}: a JSON {type(record).__name__}, not an xmine artefact (a result is an object)")
        kind = record.get("kind")
        if kind in JSON_KINDS:
            sealed = unseal(record, p, advice=JSON_KINDS[kind])
            if kind == CALIBRATION_KIND:  # its values, as `mine --calibration` reads them (one line naming a field)
                parse_defaults(record, p, "", "")
            elif (why := result_table_problem(record)) is not None:
                raise ArtefactError(f"{p}: {why}; {RESULT_DAMAGED_ADVICE}")
            if sealed:
                return kind, p.stat().st_size, "its content matches the checksum it was written with"
            return kind, p.stat().st_size, "readable JSON, written before it recorded a checksum, so not checked"
        # OUT.json, the summary of an output: the output is checked (an unfinished run's summary
        # records no files yet: was "no kind of record this xmine writes")
        if kind and ("output_files" in record or record.get("state") == "unfinished"):
            kind, nbytes, detail = verify_output_file(Path(str(p)[:-len(".json")]))
            return kind, nbytes, f"the summary of {p.name[:-len('.json')]}: {detail}"
        if kind and p.name == MANIFEST and dir_kind(p.parent)[0] is not None:
            # (was: "no kind of record this xmine writes" of a store's own manifest)
            raise ArtefactError(f"{p}: the manifest of the {kind_label(str(kind))} {p.parent}; verify the directory")
        if kind:
            raise ArtefactError(f"{p}: kind {str(kind)[:80]!r} is no kind of record this xmine writes; nothing in it "
                                "can be checked")
    raise ArtefactError(f"{p}: not an xmine artefact (no {MANIFEST}, no {sidecar_of(p).name} summary)")


def result_table_problem(result: dict) -> str | None:
    """What makes a result's table no table `bench report` can show, or None: a task benchmark's
    result without one, a row that is no list of as many cells as there are columns, a cell that is
    an object or a list (was, its checksum made to agree: `table` null shown as a dump of the JSON,
    a row cut short shown as it was). A cell's text or number is not judged."""
    table = result.get("table")
    if table is None:
        return "records no table (field 'table')" if result.get("kind") == "xmine-benchmark-result" else None
    if not (isinstance(table, dict) and isinstance(table.get("columns"), list) and isinstance(table.get("rows"), list)):
        return "its table is no object of a list of columns and a list of rows"
    width = len(table["columns"])
    for i, row in enumerate(table["rows"]):
        if not isinstance(row, list) or len(row) != width:
            return f"row {i + 1} of its table is not a list of {width} cells, one a column"
        if any(isinstance(cell, (dict, list)) for cell in row):
            return f"row {i + 1} of its table holds a cell that is an object or a list, not a number or text"
    return None


def _files(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"


def _match(n: int, what: str) -> str:
    return f"1 file matches its {what}" if n == 1 else f"{n} files match their {what}"


def _recorded_name(name) -> bool:
    """A name an export's manifest may record: a relative path inside it, in plain components."""
    return (isinstance(name, str) and name != MANIFEST and not name.startswith("/") and "\\" not in name
            and all(part not in ("", ".", "..") for part in name.split("/")))


def check_recorded_files(directory: str | Path, manifest: dict, *, what: str) -> tuple[int, int]:
    """Check every file the manifest of the artefact `directory` records in `files` (path relative
    to it -> size, sha256), and that it holds no other file; return (bytes checked, files).

    Every problem is found before any is reported: ArtefactError with one line per problem, each
    naming its file (missing, not a file, another size, another sha256, not recorded). A name
    that is not a plain relative path inside the artefact is refused before any path is made of
    it, with the same line whether such a file exists or not; a file that is a symbolic link out
    of the artefact is refused unread (`inside`)."""
    directory = Path(directory)
    where = directory / MANIFEST
    files = read_field(manifest, "files", dict[str, FileRecord], where=str(where))
    bad = next((name for name in files if not _recorded_name(name)), None)
    if bad is not None:
        raise ArtefactError(f"{where}: files: names the file {repr(bad)[:80]}, which is not a file of an xmine {what}; "
                            "refusing to read it")
    problems: list[str] = []
    for name, rec in files.items():
        try:
            path = inside(directory, name, what=what)
        except ArtefactError as e:
            problems.append(str(e))
            continue
        if not os.path.lexists(path):
            problems.append(f"{path}: missing from the {what} (its {MANIFEST} records {rec.bytes} bytes)")
        elif not path.is_file():
            problems.append(f"{path}: not a file, but the {MANIFEST} of the {what} records one of {rec.bytes} bytes")
        elif path.stat().st_size != rec.bytes:
            problems.append(f"{path}: {path.stat().st_size} bytes, the {MANIFEST} of the {what} records {rec.bytes} "
                            "(damaged or replaced)")
        elif sha256_file(path) != rec.sha256:
            problems.append(f"{path}: content differs from the {MANIFEST} of the {what} (sha256 mismatch): changed or "
                            "damaged since xmine wrote it")
    for root, dirs, names in os.walk(directory):  # symbolic links to directories are not followed
        dirs.sort()
        links = [d for d in dirs if os.path.islink(os.path.join(root, d))]  # listed, never entered
        for name in sorted(names + links):
            rel = (Path(root) / name).relative_to(directory).as_posix()
            if rel not in files and rel not in (MANIFEST, MARKER):
                problems.append(f"{directory / rel}: not recorded in the {MANIFEST} of the {what} (added or "
                                "renamed since xmine wrote it)")
    if problems:
        raise ArtefactError("\n".join(problems))
    return sum(rec.bytes for rec in files.values()), len(files)


def verify_output_file(path: str | Path) -> tuple[str, int, str]:
    """Check a "tsv" output against its OUT.json summary: (kind, bytes, detail) or ArtefactError."""
    path = Path(path)
    # read as every record xmine seals is: where it is not valid JSON, line and column (was: "unreadable,
    # or no kind" for a summary one flipped byte had made invalid), and checked against its checksum
    side = load_manifest(sidecar_of(path), what="summary", advice="nothing it records of the output can be "
                         "trusted (move both away and run the command again)")
    if "kind" not in side:
        raise ArtefactError(f"{sidecar_of(path)}: not an xmine summary (no kind)")
    if side.get("state") != "finished":
        raise ArtefactError(f"{path}: unfinished (its run was interrupted); run the same command again")
    if "replacing" in side:
        raise ArtefactError(f"{path}: its replacement was interrupted while the new files were moved in; "
                            "run the same command again with --overwrite")
    files = side.get("output_files") or {}
    if path.name not in files and not any(name.startswith(path.name + ".") for name in files):
        if files:  # an output and its summary renamed: the summary still names what it was written as
            shown = ", ".join(sorted(str(n)[:80] for n in files)[:3])
            raise ArtefactError(f"{sidecar_of(path)}: records the files {shown}, not {path.name}: renamed since xmine "
                                "wrote them? Verify them under the names they were written with")
        raise ArtefactError(f"{sidecar_of(path)}: records no sha256 of {path.name} (written by an older xmine)")
    foreign = next((name for name in files if not own_output_name(path, name)), None)
    if foreign is not None:
        raise ArtefactError(f"{sidecar_of(path)}: names the file {repr(foreign)[:80]}, which is not a file of "
                            f"the output {path.name}; refusing to read it")
    problems = []  # every changed file, one line each (was: the first, so OUT.de's after OUT.en was repaired)
    for name in changed_files(side, path):
        changed = path.parent / name
        if not changed.exists():
            problems.append(f"{changed}: missing; {sidecar_of(path).name} records it as a file of {path.name} "
                            "(deleted or moved since xmine wrote it)")
            continue
        inside = tree_changes(changed, files.get(name) or {})  # (was: the folder named, not its file)
        what = f" ({', '.join(inside[:3])})" if inside else ""
        problems.append(f"{changed}: size or sha256 differs from {sidecar_of(path).name}{what}: "
                        "changed or damaged since xmine wrote it")
    if problems:
        raise ArtefactError("\n".join(problems))
    return side["kind"], sum(int(r["bytes"]) for r in files.values()), _match(len(files), "sha256")
