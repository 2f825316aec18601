"""The encoder suitability check (xmine.encoders.suitability): on the first use of an encoder xmine
does not ship, and with `xmine encoders --check NAME`, the shipped FLORES-200 sentences are mined
against their English translations; an encoder that does not align them (a BERT with random
weights) gets one warning line with the measured accuracy, the real encoders do not."""

from __future__ import annotations

import re
import shutil

import pytest

from clitools import ok, xm
from tiny_models import build_tiny_bert


@pytest.fixture(scope="module")
def random_bert(tmp_path_factory):
    from xmine.encoders.suitability import check_sentences

    sentences = [s for lines in check_sentences()[0].values() for s in lines]
    return build_tiny_bert(tmp_path_factory.mktemp("random") / "bert", sentences)  # its vocabulary covers them


def _warnings(output: str) -> list[str]:
    return [line for line in output.splitlines() if "translations of 48 FLORES-200 sentences" in line]


@pytest.mark.slow
def test_a_random_bert_is_warned_once_on_first_use_and_the_verdict_is_cached(random_bert, tmp_path, monkeypatch,
                                                                            caplog):
    import xmine.encoders.suitability as suitability

    monkeypatch.setenv("XMINE_HOME", str(tmp_path / "home"))
    measured = []
    real_measure = suitability.measure
    monkeypatch.setattr(suitability, "measure", lambda enc: measured.append(enc.name) or real_measure(enc))
    corpus = tmp_path / "c.txt"
    corpus.write_text("Ein Satz.\nNoch einer.\n", encoding="utf-8")
    ok(xm("embed", corpus, "--lang", "de", "-o", tmp_path / "s", "--encoder", random_bert, "--runtime", "torch",
          "--precision", "fp32", "-q"))
    lines = _warnings("\n".join(r.getMessage() for r in caplog.records if r.levelname == "WARNING"))
    assert len(lines) == 1 and "does not align translations" in lines[0], caplog.text
    accuracy = int(re.search(r"found (\d+)%", lines[0]).group(1))
    assert accuracy < 30
    cached = list((tmp_path / "home" / "suitability").glob("*.json"))
    assert len(cached) == 1 and measured == [str(random_bert)]
    # Another process (the cache of loaded models emptied) reads the verdict instead of measuring again.
    from xmine.encoders import loader

    monkeypatch.setattr(loader, "_LOADED", {})
    caplog.clear()
    ok(xm("embed", corpus, "--lang", "de", "-o", tmp_path / "s2", "--encoder", random_bert, "--runtime", "torch",
          "--precision", "fp32", "-q"))
    assert len(_warnings(caplog.text)) == 1 and measured == [str(random_bert)]
    # The same model in another folder: the verdict read, named as that folder (was: as the first)
    shutil.copytree(random_bert, tmp_path / "copy")
    monkeypatch.setattr(loader, "_LOADED", {})
    caplog.clear()
    ok(xm("embed", corpus, "--lang", "de", "-o", tmp_path / "s3", "--encoder", tmp_path / "copy", "--runtime",
          "torch", "--precision", "fp32", "-q"))
    lines = _warnings(caplog.text)
    assert len(lines) == 1 and f"{tmp_path / 'copy'}: found" in lines[0] and measured == [str(random_bert)], lines


@pytest.mark.slow
@pytest.mark.parametrize("name", ["use-m3", "me5-small"])
def test_the_shipped_encoders_align_the_sentences(name):
    res = ok(xm("encoders", "--check", name))
    lines = _warnings(res.output)
    assert len(lines) == 1 and "it aligns languages" in lines[0] and "warning" not in res.output, res.output
    assert int(re.search(r"found (\d+)%", lines[0]).group(1)) >= 95


@pytest.mark.slow
def test_check_names_the_random_bert_in_one_warning_line(random_bert, tmp_path, monkeypatch):
    monkeypatch.setenv("XMINE_HOME", str(tmp_path))
    res = ok(xm("encoders", "--check", random_bert, "--runtime", "torch"))
    lines = _warnings(res.output)
    assert len(lines) == 1 and lines[0].startswith("xmine: warning:") and "below 80%" in lines[0], res.output
