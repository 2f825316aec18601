"""The Python API (mining/api.py): the examples of docs/api.md run as they are, with the real
encoder; the API gives the command's result; `import xmine` stays cheap."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.clitools import ok, xm

REPO = Path(__file__).resolve().parent.parent


def test_the_examples_of_docs_api_run(data_dir):
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "api.md").read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 5
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/api.md", "exec"), namespace)  # noqa: S102  (the documented examples)


def test_api_mine_gives_the_command_result(data_dir, tmp_path):
    import xmine
    from tests.flores import flores_lines

    de, en = flores_lines(data_dir, "deu_Latn", 40), flores_lines(data_dir, "eng_Latn", 40)[::-1]
    (tmp_path / "de.txt").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en) + "\n", encoding="utf-8")
    ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--src-lang", "de", "--tgt-lang", "en", "-q",
          "-o", tmp_path / "m.tsv"))
    expected = [line.split("\t") for line in (tmp_path / "m.tsv").read_text(encoding="utf-8").splitlines()]
    table = xmine.mine(de, en, src_lang="de", tgt_lang="en")
    rows = table.to_pylist()
    assert [(f"{r['score']:.6f}", r["translation"]["de"], r["translation"]["en"]) for r in rows] == \
        [tuple(e) for e in expected]
    assert all(de[r["src_index"]] == r["translation"]["de"] and en[r["tgt_index"]] == r["translation"]["en"]
               for r in rows)
    # From the files, the same pairs, named by file and line.
    from_files = xmine.mine(tmp_path / "de.txt", tmp_path / "en.txt", src_lang="de", tgt_lang="en").to_pylist()
    assert [r["translation"] for r in from_files] == [r["translation"] for r in rows]
    assert all(r["src_record"] == de.index(r["translation"]["de"]) + 1 for r in from_files)


def test_import_xmine_loads_nothing_heavy():
    code = ("import sys, xmine; heavy = [m for m in ('numpy', 'torch', 'pyarrow', 'faiss', 'click', 'datasets') "
            "if m in sys.modules]; assert not heavy, heavy; assert callable(xmine.mine)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
