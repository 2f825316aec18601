"""The typed error hierarchy of xmine.

Every error a user can cause derives from `XmineError`; the CLI prints its message (no traceback)
and exits with status 2. Messages name the file, the line and the problem.
"""

from __future__ import annotations

import dataclasses
import decimal
import numbers
import os
import re
from pathlib import Path


class XmineError(Exception):
    """Base class of every error xmine raises on purpose."""


class InputError(XmineError):
    """A user-supplied file is missing, unreadable or malformed.

    `path` and `line` (1-based, or None when the problem is the whole file) say where.
    """

    def __init__(self, path: str | Path, problem: str, *, line: int | None = None):
        self.path = Path(path)
        self.line = line
        self.problem = problem
        # a URL as given (a Path would drop one of its slashes: s3:/bucket)
        shown = path if isinstance(path, str) and "://" in path else self.path
        where = f"{shown}:{line}" if line is not None else f"{shown}"
        super().__init__(f"{where}: {problem}")


class NonFiniteRowError(XmineError):
    """An embedding row holds NaN or infinity. `side` ("src"/"tgt") and `row` (0-based, in the rows
    given to the search) say which; the caller that knows the file turns it into an InputError."""

    def __init__(self, side: str, row: int):
        self.side, self.row = side, row
        super().__init__(f"{side} embedding row {row} is not finite (NaN or inf)")

    def __reduce__(self):  # crosses process boundaries (Ray tasks) intact
        return type(self), (self.side, self.row)

    @staticmethod
    def of_store_row(row: int, line: int) -> str:
        """How a stored row holding NaN or inf is said once its file is known: its row and the input
        line it came from (`mine`, `build-index` and `verify` say it alike)."""
        return f"embedding row {row} (input line {line}) is not finite (NaN or inf)"


class DataNotFoundError(XmineError):
    """A benchmark or training data set is not where xmine looked for it."""


class EncoderError(XmineError):
    """An encoder cannot be built or loaded (unknown name, missing package, bad weight file)."""


class EncoderMismatchError(XmineError):
    """An artefact (projection, store, index) was made with another encoder than the one given."""


class ArtefactError(XmineError):
    """An artefact directory on disk is incomplete, corrupt or of an unexpected kind/version."""


def error_lines(error: Exception) -> list[str]:
    """How the command line says `error`: "xmine: error: " before each of its lines (an error may
    name several problems, one a line: `check_every`), each shortened (`shortened`)."""
    return [shortened(f"xmine: error: {line}") for line in str(error).splitlines() or [""]]


def check_every(checks) -> None:
    """Run every check (callables raising ArtefactError); ArtefactError naming every problem, one
    line each, once all have run: a user repairing damaged files sees them all at once."""
    problems = []
    for check in checks:
        try:
            check()
        except ArtefactError as e:
            problems.append(str(e))
    if problems:
        raise ArtefactError("\n".join(problems))


class DamagedManifestError(ArtefactError):
    """The manifest file `path` no longer matches the checksum it was written with
    (`xmine.artefacts.fileio.load_manifest`): nothing it records can be trusted, but its writer may
    replace the artefact when asked (--overwrite). `advice` ends the message: what to do."""

    def __init__(self, path: str | Path, advice: str = "rebuild the artefact"):
        self.path, self.advice = Path(path), advice
        super().__init__(f"{path}: content differs from the checksum it was written with: edited or damaged "
                         f"since xmine wrote it; {advice}")

    def __reduce__(self):  # crosses process boundaries (Ray tasks) intact
        return type(self), (self.path, self.advice)


class ConfigError(XmineError):
    """Options that contradict each other or are out of range."""


def check_field_types(config, *, integers: tuple[str, ...] = (), reals: tuple[str, ...] = (),
                      booleans: tuple[str, ...] = (), strings: tuple[str, ...] = (),
                      paths: tuple[str, ...] = (), configs: dict[str, type] | None = None) -> None:
    """A ConfigError naming the first field of the dataclass `config` whose value is not of its kind:
    an integer (`integers`), a real number (`reals`; a bool is neither), True or False (`booleans`),
    a string (`strings`), a string or path (`paths`), an instance of a config class (`configs`: field
    -> class, said with how to switch it off; was: `FilterConfig(pre_clean=False)` accepted, an
    AttributeError in mine); None passes where it is the field's default.
    Python callers give configs what the command line parses: `k="4"` is refused here, not met as a
    TypeError in the first comparison, and `approximate="no"` is not taken as true. A numpy number
    is made the Python number it equals (it is written to JSON records and checkpoints)."""
    kinds = {"an integer": (integers, numbers.Integral), "a number": (reals, numbers.Real),
             "True or False": (booleans, bool), "a string": (strings, str),
             "a string or path": (paths, (str, os.PathLike))}
    defaults = {f.name: f.default for f in dataclasses.fields(config)}
    for kind, (names, types) in kinds.items():
        for name in names:
            value = getattr(config, name)
            if value is None and name in defaults and defaults[name] is None:
                continue
            if types is numbers.Real and isinstance(value, decimal.Decimal) and value.is_finite():
                value = float(value)  # (a number Python's numbers.Real leaves out: was refused as no number)
                object.__setattr__(config, name, value)
            numeric = types in (numbers.Integral, numbers.Real)
            if not isinstance(value, types) or (numeric and isinstance(value, bool)):
                raise ConfigError(f"{name} must be {kind} (got {value!r})")
            if numeric and type(value) not in (int, float):  # a numpy scalar: as Python's (JSON, checkpoints)
                object.__setattr__(config, name, int(value) if types is numbers.Integral else float(value))
    for name, cls in (configs or {}).items():
        if not isinstance(getattr(config, name), cls):
            raise ConfigError(f"{name} must be a {cls.__name__} (got {getattr(config, name)!r}; "
                              f"{cls.__name__}(enabled=False) switches it off)")


def check_list_of_names(value, name: str, *, paths: bool = False) -> None:
    """ConfigError unless `value` is None or a list or tuple of strings (`paths`: or paths): one
    string alone would be read as its characters (was, from Python: `langs="deu,eng"` the languages
    ",", "d", "e", ...; a directory "/data/x" the folders "/" and "d", "/" scanned whole)."""
    kinds = (str, os.PathLike) if paths else (str,)
    if isinstance(value, (*kinds, bytes)):
        items = [str(value)] if paths else [v.strip() for v in str(value).split(",")]
        raise ConfigError(f"{name} must be a list, not the single {type(value).__name__} {str(value)!r}: pass "
                          f"[{', '.join(repr(v) for v in items)}]")
    if value is not None and (not isinstance(value, (list, tuple)) or not all(isinstance(v, kinds) for v in value)):
        raise ConfigError(f"{name} must be a list of {'paths' if paths else 'strings'} (got {value!r})")


class OutputError(XmineError):
    """An output the command must not write: it is an input, it holds someone else's data, it
    exists and --overwrite was not given, or another process is writing it (xmine.artefacts.outputs)."""


#: a value in a message longer than this is cut (a quoted run, or a run without spaces: an option
#: value, a line of a file, a path); was: a 100,000-character line or option value printed whole
LONG_VALUE = 240
_LONG_VALUE = re.compile(rf"(?<!\w)'[^'\n]{{{LONG_VALUE},}}'(?!\w)|(?<!\w)\"[^\"\n]{{{LONG_VALUE},}}\"(?!\w)"
                         rf"|\S{{{LONG_VALUE},}}")  # (quotes, not the apostrophes of "run's ... rule's" in prose)


def shortened(message: str) -> str:
    """`message` with each value longer than `LONG_VALUE` characters cut to its first 100 and last
    60, saying how many were left out between: what the command line prints stays one readable line."""
    return _LONG_VALUE.sub(lambda m: f"{m[0][:100]}…[{len(m[0]) - 160:,} characters]…{m[0][-60:]}", message)
