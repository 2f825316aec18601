"""xmine: mine bitext and retrieve across languages with disentangled sentence embeddings.

The import package `xmine` holds what every part shares (encoders, corpus reading, the
embedding store, provenance, the CLI). Its subpackages live in the repository's top-level
folders: `xmine.mining` (mining/), `xmine.index` (index/), `xmine.disentangle` (disentangle/)
and `xmine.benchmarks` (benchmarks/).
"""

import importlib

__version__ = "0.1.0"

# The Python API (mining/api.py, docs/api.md) by name, imported on first use (as xmine/cli.py
# gathers the commands), so that `import xmine` stays cheap.
_API = {"mine": "xmine.mining.api", "score": "xmine.mining.api", "embed": "xmine.mining.api"}


def __getattr__(name: str):
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'xmine' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_API])
