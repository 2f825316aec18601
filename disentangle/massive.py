"""MASSIVE 1.1 (FitzGerald et al. 2022): the one reader every command uses.

The release is a folder `data/` of `<locale>.jsonl` files (en-US, de-DE, ...), one JSON object a
line: `id`, `locale`, `partition` (train / dev / test), `scenario`, `intent`, `utt`, and, where the
slot annotation exists, `annot_utt` ("wake me up at [time : nine am] on [date : friday]").
Rows with the same `id` are translations of each other, in every locale, and belong to the same
partition. Benchmarks (`xmine bench massive`), training (`xmine train --pairs <massive folder>`)
and FMDA's template/residual targets all read the data through this module, so the checks live
in one place:

- every line is a JSON object with a string `id`, a known `partition`, a non-empty `utt`, and the
  file's own `locale`; ids are unique in a file;
- an `annot_utt` parses as text with `[slot_type : value]` spans, and removing the brackets gives
  back `utt` exactly (so slot spans are character offsets into `utt`);
- two locales joined by id must agree on each id's partition, and training rows are checked by
  id against the dev and test ids of both files (`train_rows`), so no evaluation row can enter
  training, whatever the files say.

A file is parsed once per process (keyed by path, size and mtime).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import re
from pathlib import Path
from typing import Iterable, Sequence

from xmine.errors import DataNotFoundError, InputError
from xmine.io.corpus import decode_line
from xmine.paths import resolve_data_dir

log = logging.getLogger(__name__)

PARTITIONS = ("train", "dev", "test")
#: the locale every other one is paired with (the release was translated from it)
PIVOT = "en-US"
NEEDS = "massive"
HOW_TO_GET = (
    "Download MASSIVE 1.1 (https://github.com/alexa/massive: amazon-massive-dataset-1.1.tar.gz) "
    "and unpack it so that massive/ holds data/<locale>.jsonl (or 1.1/data/<locale>.jsonl)."
)
_LOCALE_FILE = re.compile(r"^[a-z]{2,3}-[A-Z]{2}$")
_SLOT_TYPE = re.compile(r"^[a-z][a-z0-9_]*$")


# --- Slot annotations ----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Slot:
    """One annotated slot: its type, its value, and where the value sits in `utt` (characters)."""

    type: str
    value: str
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class Annotation:
    """A parsed `annot_utt`: the plain utterance and its slots, in order."""

    utt: str
    slots: tuple[Slot, ...]

    @property
    def template(self) -> str:
        """The utterance with each slot value replaced by `[type]`: "wake me up at [time] on [date]"."""
        return self.fill([f"[{s.type}]" for s in self.slots])

    def fill(self, values: Sequence[str]) -> str:
        """The utterance with slot i's value replaced by `values[i]` (the rest unchanged)."""
        if len(values) != len(self.slots):
            raise ValueError(f"{len(values)} values for {len(self.slots)} slots")
        out, pos = [], 0
        for slot, value in zip(self.slots, values):
            out += [self.utt[pos:slot.start], value]
            pos = slot.end
        out.append(self.utt[pos:])
        return "".join(out)


def parse_annotation(annot_utt: str) -> Annotation:
    """Parse MASSIVE's `[slot_type : value]` markup; ValueError saying what is wrong.

    The value is everything after the first " : " up to the closing bracket (it may itself hold a
    colon, "[time : 10:30]"). Brackets never nest in MASSIVE; an unmatched or nested bracket is an
    error rather than literal text, since no utterance of the release contains a bracket.
    """
    utt: list[str] = []
    slots: list[Slot] = []
    pos = 0
    while True:
        open_ = annot_utt.find("[", pos)
        close = annot_utt.find("]", pos)
        if open_ < 0:
            if close >= 0:
                raise ValueError(f"']' without '[' at character {close}")
            utt.append(annot_utt[pos:])
            break
        if close < 0 or close < open_:
            raise ValueError(f"'[' at character {open_} is not closed" if close < 0 else
                             f"']' without '[' at character {close}")
        inner = annot_utt[open_ + 1:close]
        if "[" in inner:
            raise ValueError(f"nested '[' in the slot at character {open_}")
        type_, sep, value = (part.strip() for part in inner.partition(" : "))
        if not sep or not _SLOT_TYPE.match(type_) or not value:
            raise ValueError(f"slot {annot_utt[open_:close + 1]!r} is not '[slot_type : value]'")
        utt.append(annot_utt[pos:open_])
        start = sum(map(len, utt))  # where the value begins in the plain utterance
        slots.append(Slot(type_, value, start, start + len(value)))
        utt.append(value)
        pos = close + 1
    return Annotation("".join(utt), tuple(slots))


# --- Files ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Record:
    """One row of a locale file."""

    id: str
    partition: str
    utt: str
    #: the slot markup, None where the release (or this copy of it) has no annotation
    annot_utt: str | None
    #: 1-based line in the file, for error messages
    line: int

    @property
    def annotation(self) -> Annotation | None:
        return parse_annotation(self.annot_utt) if self.annot_utt is not None else None


@dataclasses.dataclass(frozen=True)
class LocaleData:
    """Every row of one locale file, in file order, with an index by id."""

    path: Path
    locale: str
    records: tuple[Record, ...]
    by_id: dict[str, Record]

    def partition(self, name: str) -> list[Record]:
        return [r for r in self.records if r.partition == name]

    def annotated(self, partition: str | None = None) -> list[Record]:
        """Rows with an `annot_utt` (of one partition, or all)."""
        return [r for r in self.records if r.annot_utt is not None and (partition is None or r.partition == partition)]


def locate(data_dir: str | Path | None, *, option: str = "pass --data-dir DIR or set XMINE_DATA") -> Path:
    """The folder holding `<locale>.jsonl`: accepts the data root, massive/, 1.1/ or data/
    (`option`: how the command names it, for the error when it is not there)."""
    base = resolve_data_dir(data_dir, needs=NEEDS, how_to_get=HOW_TO_GET, option=option)
    found = find_folder(base)
    if found is None:
        raise DataNotFoundError(f"{base}: no MASSIVE <locale>.jsonl files there or in data/ or 1.1/data/. {HOW_TO_GET}")
    return found


def find_folder(path: str | Path) -> Path | None:
    """`path`, `path/data` or `path/1.1/data` when it holds `<locale>.jsonl` files with en-US, else None."""
    base = Path(path)
    for c in (base, base / "data", base / "1.1" / "data"):
        if (c / f"{PIVOT}.jsonl").is_file() and len(available_locales(c)) >= 2:
            return c
    return None


def available_locales(folder: str | Path) -> list[str]:
    """Locales with a `<locale>.jsonl` file in `folder`, sorted."""
    return sorted(p.stem for p in Path(folder).glob("*.jsonl") if _LOCALE_FILE.match(p.stem))


def read_locale(folder: str | Path, locale: str) -> LocaleData:
    """Read and check one locale file (parsed once per process while the file is unchanged)."""
    path = Path(folder) / f"{locale}.jsonl"
    if not path.is_file():
        have = " ".join(available_locales(folder)) or "none"
        raise InputError(path, f"missing MASSIVE file for locale {locale!r} (this folder has: {have})")
    st = path.stat()
    return _read_locale(str(path.resolve()), locale, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _read_locale(path_str: str, locale: str, _size: int, _mtime: int) -> LocaleData:
    path = Path(path_str)
    records: list[Record] = []
    by_id: dict[str, Record] = {}
    with path.open("rb") as f:
        for line_no, raw in enumerate(f, start=1):
            line = decode_line(raw, path, line_no)  # (was: a UnicodeDecodeError traceback)
            if not line.strip():
                continue
            rec = _parse_line(path, line_no, line, locale)
            if rec.id in by_id:
                raise InputError(path, f"duplicate id {rec.id!r} (first on line {by_id[rec.id].line})", line=line_no)
            by_id[rec.id] = rec
            records.append(rec)
    if not records:
        raise InputError(path, "no records")
    return LocaleData(path=path, locale=locale, records=tuple(records), by_id=by_id)


def _parse_line(path: Path, line_no: int, line: str, locale: str) -> Record:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise InputError(path, f"not a JSON object ({e.msg} at column {e.colno})", line=line_no) from None
    if not isinstance(obj, dict):
        raise InputError(path, "not a JSON object", line=line_no)
    missing = [k for k in ("id", "partition", "utt") if k not in obj]
    if missing:
        raise InputError(path, f"record lacks field(s) {', '.join(missing)}", line=line_no)
    if obj.get("locale", locale) != locale:
        raise InputError(path, f"record has locale {obj['locale']!r} in the file of {locale!r}", line=line_no)
    if obj["partition"] not in PARTITIONS:
        raise InputError(path, f"unknown partition {obj['partition']!r} (expected {', '.join(PARTITIONS)})", line=line_no)
    utt = obj["utt"]
    if not isinstance(utt, str) or not utt.strip():
        raise InputError(path, "empty or non-string utt", line=line_no)
    annot = obj.get("annot_utt")
    if annot is not None:
        if not isinstance(annot, str):
            raise InputError(path, "annot_utt is not a string", line=line_no)
        try:
            parsed = parse_annotation(annot)
        except ValueError as e:
            raise InputError(path, f"annot_utt: {e}", line=line_no) from None
        if parsed.utt != utt:
            raise InputError(path, f"annot_utt without its brackets is {parsed.utt!r}, not the utt {utt!r}", line=line_no)
    return Record(id=str(obj["id"]), partition=obj["partition"], utt=utt, annot_utt=annot, line=line_no)


def load_locale(folder: str | Path, locale: str, *, partition: str = "test") -> dict[str, str]:
    """{id: utt} of one locale's `partition` (InputError when it has no rows)."""
    data = read_locale(folder, locale)
    out = {r.id: r.utt for r in data.records if r.partition == partition}
    if not out:
        raise InputError(data.path, f"no utterances in partition {partition!r}")
    return out


# --- Joining locales by id -----------------------------------------------------------------------

def aligned(folder: str | Path, locales: Sequence[str], partition: str) -> tuple[list[str], dict[str, list[str]]]:
    """The ids of `partition` present in every locale (in the first locale's file order) and each
    locale's utterances for them. An id whose partition differs between the files is an error."""
    data = [read_locale(folder, loc) for loc in locales]
    first = data[0]
    ids = []
    for rec in first.partition(partition):
        others = [d.by_id.get(rec.id) for d in data[1:]]
        for d, o in zip(data[1:], others):
            if o is not None and o.partition != rec.partition:
                raise InputError(d.path, f"id {rec.id!r} is in partition {o.partition!r} here but "
                                         f"{rec.partition!r} in {first.path.name}", line=o.line)
        if all(o is not None for o in others):
            ids.append(rec.id)
    if not ids:
        raise InputError(first.path, f"no {partition} ids shared with {', '.join(d.path.name for d in data[1:])}")
    for d in data:  # MASSIVE has every id in every locale: one missing means a cut or damaged file
        extra = len(d.partition(partition)) - len(ids)
        if extra:  # (was: the set shrunk without a word, 2,503 test rows of 2,974 measured)
            log.warning(f"{d.path}: {extra} {partition} id(s) of it are not in "
                        f"{', '.join(o.path.name for o in data if o is not d)} (MASSIVE has every id in every "
                        f"locale: a cut or damaged file?); measured on the {len(ids)} shared")
    return ids, {d.locale: [d.by_id[i].utt for i in ids] for d in data}


def eval_ids(folder: str | Path, locales: Iterable[str]) -> set[str]:
    """Every id that is a dev or test row in any of `locales`' files."""
    return {r.id for loc in locales for r in read_locale(folder, loc).records if r.partition != "train"}


def train_rows(folder: str | Path, src: str, tgt: str = PIVOT) -> tuple[list[str], list[str], list[str]]:
    """(ids, src utterances, tgt utterances) of the train partition, joined by id.

    Checked twice, by partition and by id: every row is `train` in both files (`aligned`), and no
    returned id is a dev or test id of either file. Either failure raises InputError: training on
    an evaluation row would make every MASSIVE number after it wrong without a sign.
    """
    ids, utts = aligned(folder, [src, tgt], "train")
    leaked = sorted(set(ids) & eval_ids(folder, [src, tgt]),
                    key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0, k))  # numeric ids in order
    if leaked:
        raise InputError(Path(folder) / f"{src}.jsonl", f"{len(leaked)} train id(s) are dev/test ids too "
                                                         f"(first: {leaked[0]!r}); refusing to train on them")
    return ids, utts[src], utts[tgt]

