"""Training pairs: find line-aligned parallel files (`discover_pairs`); `sample.py` samples them.

Pair discovery (`discover_pairs`), for each `--pairs` argument:

- `A:B` (two files): the languages are the files' last suffixes (`x.de:x.en` -> de, en), or
  given explicitly as `deu=A:eng=B`.
- a MASSIVE folder (`<locale>.jsonl` with en-US, or a folder holding it in data/ or 1.1/data/):
  every locale paired with en-US by `id`, from the train partition only; no dev or test row can
  enter (checked by id and by partition, `xmine.disentangle.massive.train_rows`).
- a directory: searched recursively (sorted, hidden entries skipped). In each folder, files
  are grouped by name: `STEM.LANG` (Tatoeba challenge `deu-eng.deu`, WMT `newstest2019.de`,
  FLORES v1 `wikipedia.dev.ne-en.ne`) groups by STEM; `LANG.SPLIT` (FLORES-200
  `deu_Latn.devtest`) groups by SPLIT. LANG is a language code: 2-3 lower-case letters with an
  optional `_Script` (`deu`, `de`, `cmn_Hans`); `md`, `txt`, `tsv`, `json` ... are never codes
  (`xmine.langs.NOT_LANGUAGE_SUFFIXES`), and backups and markup (`.tmp`, `.bak`, `.tmx` ...:
  `NOT_TEXT_SUFFIXES`) are never read. A code of that shape xmine does not know (`ber`, Berber,
  ISO 639-5) is read as it is, and said.
  A compressed file's suffix (`.gz`, `.xz`, `.bz2`, `.zst`, `.zstd`) is left out first:
  `news.de.gz` is `news.de`, read decompressed.
  A group of two or more languages is one multi-way aligned set: with an English member, every
  other language is paired with English; without, every two languages are paired.
- languages are normalised with `xmine.langs.normalize_lang` (de, deu, deu_Latn -> deu), and a
  pair is kept when both of its languages are in `--langs` (when given). The pair's sides are
  ordered with English second (else alphabetically), so `en-de` and `de-en` files merge.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from xmine.artefacts.fileio import missing
from xmine.errors import ConfigError, InputError, check_list_of_names
from xmine.langs import (NOT_LANGUAGE_SUFFIXES, NOT_TEXT_SUFFIXES, is_known_lang, lang_script, normalize_lang,
                         usual_script)
from xmine.disentangle.massive import PIVOT, available_locales, find_folder, train_rows
from xmine.io.corpus import iter_parallel
from xmine.io.reader_base import COMPRESSED_SUFFIXES

log = logging.getLogger(__name__)

_LANG_CODE = re.compile(r"^[a-z]{2,3}(_[A-Z][a-z]{3})?$")
#: and `id`: a file of sentence ids beside its text, except in a set named for its pair of
#: languages with Indonesian in it, as OPUS names its files (`OpenSubtitles.en-id.id`; `_is_lang`)
_NOT_LANG = NOT_LANGUAGE_SUFFIXES | {"id"}
_OPUS_PAIR = re.compile(r"(?:^|[._])([a-z]{2,3})-([a-z]{2,3})$")
_PIVOT = "eng"


def _is_lang(code: str, stem: str = "") -> bool:
    """Whether `code`, the last suffix of a file named `stem.code` (or a stem), is a language code
    (`id`: where `stem` names a pair with Indonesian, OPUS's `X.en-id`; was: never, so an OPUS
    Indonesian corpus was "no parallel files")."""
    if code == "id" and (m := _OPUS_PAIR.search(stem)):
        return "id" in m.groups()
    return bool(_LANG_CODE.match(code)) and code not in _NOT_LANG


@dataclass(frozen=True, kw_only=True)
class PairFiles:
    """Two line-aligned files and their (normalised) languages; src_lang != tgt_lang."""

    src: Path
    tgt: Path
    src_lang: str
    tgt_lang: str

    #: MASSIVE locales (src, tgt) when the files are MASSIVE jsonl files, joined by id, train rows only
    massive: tuple[str, str] | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.src_lang, self.tgt_lang)

    def pairs(self, *, warn: bool = True) -> Iterator[tuple[str, str]]:
        """The aligned sentences, streamed (`xmine.io.corpus.iter_parallel`; `warn`: its warnings
        about skipped lines). MASSIVE: only train rows, checked against dev/test by id and partition
        (`xmine.disentangle.massive.train_rows`)."""
        if self.massive is not None:
            yield from zip(*train_rows(self.src.parent, *self.massive)[1:])  # (ids, src, tgt)
            return
        for _, src, tgt in iter_parallel(self.src, self.tgt, warn=warn):
            yield src, tgt


def _ordered(a: tuple[str, Path], b: tuple[str, Path]) -> tuple[tuple[str, Path], tuple[str, Path]]:
    """English second, else alphabetical by language."""
    if a[0] == _PIVOT or (b[0] != _PIVOT and a[0] > b[0]):
        return b, a
    return a, b


def _pairs_of_group(members: dict[str, Path]) -> list[PairFiles]:
    langs = sorted(members)
    if _PIVOT in members:
        combos = [(l, _PIVOT) for l in langs if l != _PIVOT]
    else:
        combos = [(a, b) for i, a in enumerate(langs) for b in langs[i + 1:]]
    return [PairFiles(src=sp, tgt=tp, src_lang=sl, tgt_lang=tl)
            for (sl, sp), (tl, tp) in (_ordered((a, members[a]), (b, members[b])) for a, b in combos)]


def _name_parts(name: str) -> tuple[str, str]:
    """(stem, last suffix) of a file name, a compression suffix (`COMPRESSED_SUFFIXES`, which the
    readers decompress) left out: `news.de.gz` is `news.de`; ("", name) without a dot."""
    base, dot, ext = name.rpartition(".")
    if dot and base and f".{ext.lower()}" in COMPRESSED_SUFFIXES:
        name = base
    stem, _, last = name.rpartition(".")
    return stem, last


def _script_of(path: Path) -> str | None:
    """The script the language code of a pair file's name gives (`arb_Latn.devtest` -> Latn)."""
    stem, last = _name_parts(path.name)
    return lang_script(last if _is_lang(last, stem) else stem)


def _scan_directory(root: Path, near_misses: list[str] | None = None, left_out: list[tuple[str, str]] | None = None,
                    scripts: dict[str, str] | None = None, unknown: list[str] | None = None) -> list[PairFiles]:
    """The pairs of a directory's files (the module's rule); `near_misses` gets the files named with
    an upper-case language code (`news.DE`), which the rule does not read, `unknown` those read
    under a code of a language's shape that xmine does not know (`ber`, Berber, ISO 639-5; a typo),
    and `left_out` those another file of the same language and set replaced. `scripts`: the script
    wanted of a language (--langs zho_Hant), before its usual one."""
    groups: dict[tuple[Path, str, str], dict[str, Path]] = defaultdict(dict)
    for path in sorted(root.rglob("*")):
        if not path.is_file() or any(p.startswith(".") for p in path.relative_to(root).parts):
            continue
        stem, last = _name_parts(path.name)
        if not stem:
            continue
        if last.lower() in NOT_TEXT_SUFFIXES:  # (was: x.tmp, a backup, trained as language 'tmp')
            continue
        if _is_lang(last, stem):
            group, code = groups[(path.parent, "stem", stem)], last
            if unknown is not None and not is_known_lang(last):  # (ber, Berber: ISO 639-5; a typo: said)
                unknown.append(path.name)
        elif _is_lang(stem):
            group, code = groups[(path.parent, "split", last)], stem
            if unknown is not None and not is_known_lang(stem):  # (qqq.devtest: was unsaid, as news.qqq was not)
                unknown.append(path.name)
        else:
            if near_misses is not None and (_is_lang(last.lower()) or _is_lang(stem.lower()) or last == "id"
                                            or _code_before_extension(path.name)):
                near_misses.append(path.name)
            continue
        lang = normalize_lang(code)
        if lang in group:  # two files of one language in a set (arb_Arab, arb_Latn; news.de, news.de.gz): a
            # compressed copy never replaces its plain file, and the language's usual script is taken (was: the
            # later one, so FLORES's romanised arb_Latn for Arabic, kas_Deva, zho_Hant), else the later one
            usual = (scripts or {}).get(lang) or usual_script(code)
            keep_first = path.name.startswith(group[lang].name + ".") or (
                usual is not None and _script_of(group[lang]) == usual != _script_of(path))
            taken, left = (group[lang], path) if keep_first else (path, group[lang])
            if left_out is not None:
                left_out.append((lang, f"{left.name} ({taken.name} taken)"))
            path = taken
        group[lang] = path
    return [pair for members in groups.values() if len(members) >= 2 for pair in _pairs_of_group(members)]


def _code_before_extension(name: str) -> bool:
    """`news.de.txt`: a language code, then an extension that is none (the rule reads `news.de`)."""
    stem, last = _name_parts(name)
    inner_stem, inner = _name_parts(stem)
    return last.lower() in NOT_LANGUAGE_SUFFIXES and bool(inner_stem) and _is_lang(inner, inner_stem)


def _near_miss_note(near_misses: list[str]) -> str:
    """What the files named almost as a language's are told: upper case (`news.DE`), `.id`, read as
    sentence ids unless the set names its pair (`X.en-id.id`, as OPUS does), or the code before an
    extension (`news.de.txt`: was "no parallel files found" without a word on why)."""
    ids = [name for name in near_misses if _name_parts(name)[1] == "id"]
    extended = [name for name in near_misses if _code_before_extension(name)]
    cased = [name for name in near_misses if name not in ids and name not in extended]
    notes = [f"{', '.join(names[:3])}{' and others' if len(names) > 3 else ''}: left out: {why}" for names, why in (
        (extended, "the language code must be the name's last suffix (news.de) or its first (de.txt), "
                   "not before an extension"),
        (cased, "language codes in file names are lower case"),
        (ids, "an .id file is read as sentence ids, not Indonesian, unless its set names its pair with id "
              "(OpenSubtitles.en-id.id); or name it .ind, or the pair with --pairs id=SRC:en=TGT")) if names]
    return "; ".join(notes)


def _parse_explicit(spec: str) -> PairFiles:
    parts = spec.split(":")
    if len(parts) != 2:
        raise ConfigError(f"--pairs {spec!r}: expected a directory, SRC:TGT files or LANG=SRC:LANG=TGT")
    if any(not part.rpartition("=")[2].strip() for part in parts):  # (was: "." said to be no file)
        raise ConfigError(f"--pairs {spec!r}: a side names no file; give SRC:TGT, each a file")
    sides = []
    for part in parts:
        lang, eq, file = part.partition("=")
        if not eq:
            file, lang = part, _name_parts(Path(part).name)[1]
        path = Path(file).expanduser()
        if not path.is_file():  # (a link that loops or names nothing said to be one)
            raise InputError(path, f"parallel file not found ({missing(path) or 'not a file'})")
        if not eq and not ((lang == "id" or _is_lang(lang)) and is_known_lang(lang)):  # (named: id is Indonesian)
            # "de.txt:en.txt" would otherwise pair language "txt" with itself
            raise ConfigError(f"--pairs {spec!r}: cannot tell the language of {file} from its name (its extension "
                              f"{lang!r} is no language code); name it STEM.LANG (news.de) or write LANG={file}")
        if not is_known_lang(lang):
            raise ConfigError(f"--pairs {spec!r}: {lang!r} is not a known language code (ISO 639-1 such as de, "
                              "ISO 639-3 such as deu, or deu_Latn)")
        sides.append((normalize_lang(lang), path))
    if sides[0][0] == sides[1][0]:
        raise ConfigError(f"--pairs {spec!r}: both sides are language {sides[0][0]!r}")
    if sides[0][1].resolve() == sides[1][1].resolve():  # (was: each sentence its own translation, trained, exit 0)
        raise ConfigError(f"--pairs {spec!r}: both sides are the file {sides[0][1]}: its pairs would be each sentence "
                          "with itself; give each language's own file")
    (sl, sp), (tl, tp) = _ordered(sides[0], sides[1])
    return PairFiles(src=sp, tgt=tp, src_lang=sl, tgt_lang=tl)


def _massive_pairs(folder: Path) -> list[PairFiles]:
    """Every MASSIVE locale with en-US: `<locale>.jsonl` joined by id, train partition only."""
    return [PairFiles(src=folder / f"{loc}.jsonl", tgt=folder / f"{PIVOT}.jsonl", src_lang=normalize_lang(loc),
                      tgt_lang=normalize_lang(PIVOT), massive=(loc, PIVOT))
            for loc in available_locales(folder) if loc != PIVOT]


def discover_pairs(specs: Sequence[str], *, langs: Sequence[str] | None = None) -> list[PairFiles]:
    """Every parallel file pair named by `specs` (directories or SRC:TGT), filtered by `langs`."""
    check_list_of_names(specs, "pair specs", paths=True)
    check_list_of_names(langs, "langs")
    if specs is None:
        raise ConfigError("pair specs must be a list of directories of parallel files or SRC:TGT (got None)")
    wanted = {normalize_lang(l) for l in langs} if langs else None
    scripts = {normalize_lang(l): lang_script(l) for l in langs or () if lang_script(l)}  # (was: zho_Hant read as zho)
    found: list[PairFiles] = []
    near_misses: list[str] = []
    left_out: list[tuple[str, str]] = []  # (language, what was left out for what)
    unknown: list[str] = []
    for spec in specs:
        p = Path(spec).expanduser()
        massive = find_folder(p) if p.is_dir() else None
        if massive is not None:
            found += _massive_pairs(massive)
        elif p.is_dir():
            scanned = _scan_directory(p, near_misses, left_out, scripts, unknown)
            if not scanned and len(specs) > 1:  # (alone, said below; was: one of several adding nothing, unsaid)
                raise InputError(p, "--pairs names a directory without parallel files (see `xmine train --help` "
                                    "for the rule)")
            found += scanned
        elif ":" in spec:
            found.append(_parse_explicit(spec))
        elif not p.exists():  # (was: "not a directory and not SRC:TGT parallel files" for a typo)
            raise InputError(p, f"{missing(p)} (--pairs takes a directory of parallel files, or SRC:TGT)")
        else:
            raise InputError(p, "not a directory and not SRC:TGT parallel files")
    if wanted is not None:
        found = [f for f in found if f.src_lang in wanted and f.tgt_lang in wanted]
    by_files: dict[tuple[Path, Path], PairFiles] = {}
    for f in found:  # the first of the specs naming the same two files
        by_files.setdefault((f.src.resolve(), f.tgt.resolve()), f)
    unique = list(by_files.values())
    if not unique:
        what = f" with both languages in --langs {','.join(sorted(wanted))}" if wanted else ""
        hint = f"; {_near_miss_note(near_misses)}" if near_misses else ""  # (was: the rule alone, for news.DE)
        raise ConfigError(f"no parallel files found in {', '.join(specs)}{what} (see `xmine train --help` for the "
                          f"rule){hint}")
    if near_misses:  # (was: said only where nothing else was found)
        log.warning(_near_miss_note(near_misses))
    if unknown:
        log.warning(f"{', '.join(unknown[:3])}{' and others' if len(unknown) > 3 else ''}: read under a language "
                    "code xmine does not know (not ISO 639-1 or 639-3); check it is one, or name the pair with "
                    "--pairs LANG=SRC:LANG=TGT")
    if left_out := [said for lang, said in left_out if wanted is None or lang in wanted]:  # (was: every language)
        log.warning(f"{len(left_out)} file(s) left out, another of the same language and set taken: "
                    f"{', '.join(left_out[:4])}{', ...' if len(left_out) > 4 else ''}; name the pair you want with "
                    "--pairs SRC:TGT")
    if wanted is not None and (absent := wanted - {lang for f in unique for lang in (f.src_lang, f.tgt_lang)}):
        # warned, not refused: a wider list than the data is a lab's way to name its languages once
        # (was: left out without a word; the projection then knows fewer languages than asked)
        log.warning(f"--langs {','.join(sorted(absent))}: in no pair of parallel files found in {', '.join(specs)} "
                    f"(with another language of --langs); the projection learns "
                    f"{','.join(sorted(wanted - absent))} only")
    return unique
