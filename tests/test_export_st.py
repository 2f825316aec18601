"""`xmine export-st`: the shipped projection as standard sentence-transformers modules, loaded in
a process where xmine cannot be imported, gives xmine's meaning vectors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from tests.clitools import ok, refused, xm
from tests.flores import flores_lines

LOAD = """
import json, sys
sys.modules["xmine"] = None  # any import of xmine now fails
from sentence_transformers import SentenceTransformer
model = SentenceTransformer(sys.argv[1], device="cpu")
print(json.dumps({"modules": [type(m).__name__ for m in model],
                  "vectors": model.encode(json.load(open(sys.argv[2]))).tolist()}))
"""


def test_export_st_loads_without_xmine_and_gives_the_meaning_vectors(data_dir, tmp_path):
    import xmine

    out = tmp_path / "st"
    ok(xm("export-st", "default", out))
    texts = flores_lines(data_dir, "deu_Latn", 4) + flores_lines(data_dir, "jpn_Jpan", 4)
    (tmp_path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    run = subprocess.run([sys.executable, "-c", LOAD, str(out), str(tmp_path / "texts.json")], capture_output=True,
                         text=True, check=True)
    got = json.loads(run.stdout.splitlines()[-1])
    assert got["modules"] == ["Transformer", "Pooling", "Normalize", "Dense", "Normalize"]
    exported = np.asarray(got["vectors"], dtype=np.float32)
    ours = xmine.embed(texts, precision="fp32")
    cosines = (exported * ours).sum(axis=1) / np.linalg.norm(exported, axis=1) / np.linalg.norm(ours, axis=1)
    assert cosines.min() >= 0.9999, cosines
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "xmine export-st" in card and json.loads((out / "xmine_projection.json").read_text())["part"] == "meaning"
    refused(xm("export-st", "default", out), "already exists")
