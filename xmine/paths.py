"""Where xmine keeps its files and finds the benchmark/training data.

- `XMINE_HOME`: xmine's cache (rebuilt encoder models, cached embeddings). Default: the user's
  cache directory (`~/.cache/xmine` on Linux).
- `XMINE_DATA`: the data folder (tatoeba/, mlqe/, sts2017/, parallel/, ...). Default: `../shared/data`
  beside the source checkout, when it exists.
"""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_cache_dir

from xmine.errors import ConfigError, DataNotFoundError

# The checkout's root (the folder holding pyproject.toml), for the default data folder.
REPO_ROOT = Path(__file__).resolve().parent.parent


def xmine_home(*, create: bool = True) -> Path:
    """The cache folder (created on demand; `create=False` for a command that only looks)."""
    env = os.environ.get("XMINE_HOME")
    if env:
        home = Path(env).expanduser()
    else:
        home = Path(user_cache_dir("xmine"))
    if os.path.lexists(home) and not home.is_dir():  # (was: "0 cache file(s)" under a file, exit 0)
        raise ConfigError(f"{home}: XMINE_HOME (xmine's cache folder) names something that is not a directory; "
                          "point it at a directory" if env else f"{home}: xmine's cache folder is not a directory")
    if create:
        home.mkdir(parents=True, exist_ok=True)
    return home


def default_data_dir() -> Path | None:
    """`$XMINE_DATA`, else `../shared/data` beside the checkout, else None."""
    env = os.environ.get("XMINE_DATA")
    if env:
        return Path(env).expanduser()
    beside = REPO_ROOT.parent / "shared" / "data"
    return beside if beside.is_dir() else None


def data_root(data_dir: str | Path | None) -> Path | None:
    """The data folder a command reads: `data_dir` as given (--data-dir), else `default_data_dir()`.
    Its outputs must not lie inside it, whichever way it was found."""
    return Path(data_dir).expanduser() if data_dir else default_data_dir()


def resolve_data_dir(data_dir: str | Path | None, *, needs: str, how_to_get: str,
                     option: str = "pass --data-dir DIR or set XMINE_DATA") -> Path:
    """Return the folder holding data set `needs` (a sub-path such as "tatoeba/v1").

    `data_dir` is what the user passed (--data-dir); it may point at the data root or directly at
    the data set's own folder. Raises `DataNotFoundError` saying where xmine looked, how to get
    the data (`how_to_get`) and how to name it (`option`, the command's way) when it is not there.
    """
    candidates: list[Path] = []
    if data_dir is not None:
        root = Path(data_dir).expanduser()
        candidates += [root, root / needs]
    else:
        root = default_data_dir()
        if root is not None:
            candidates.append(root / needs)
    for c in candidates:
        if c.is_dir() and any(c.iterdir()):
            # Prefer the data set's own folder when the root was given.
            if data_dir is not None and c == Path(data_dir).expanduser() and (c / needs).is_dir():
                return c / needs
            return c
    looked = ", ".join(str(c) for c in candidates) or "(no --data-dir, no $XMINE_DATA, no ../shared/data)"
    raise DataNotFoundError(
        f"{needs}: data not found (looked in {looked}). {how_to_get} "
        f"Then {option}."
    )
