"""xmine: mine bitext and retrieve across languages with disentangled sentence embeddings.

The import package `xmine` holds what every part shares (encoders, corpus reading, the
embedding store, provenance, the CLI). Its subpackages live in the repository's top-level
folders: `xmine.mining` (mining/), `xmine.index` (index/), `xmine.disentangle` (disentangle/)
and `xmine.benchmarks` (benchmarks/).
"""

__version__ = "0.1.0"

# The Python API (xmine/api.py, docs/api.md), imported on first use so that `import xmine` stays cheap.
_API = ("mine", "score", "embed")


def __getattr__(name: str):
    if name in _API:
        from xmine import api

        return getattr(api, name)
    raise AttributeError(f"module 'xmine' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_API])
