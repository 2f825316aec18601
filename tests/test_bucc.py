"""BUCC 2018 runner on files written in the BUCC format from real FLORES sentences."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from xmine.benchmarks.bucc import best_threshold, command, read_bucc_file, run_bucc
from xmine.errors import InputError

from clitools import ok, refused, xm
from flores import flores_lines


def test_best_threshold_by_hand():
    scores = np.array([1.3, 1.2, 1.1, 1.0])
    correct = np.array([True, True, False, True])
    thr, m = best_threshold(scores, correct, n_gold=4)
    # keep 2: P 1, R .5, F1 .667; keep 4: P .75, R .75, F1 .75 -> threshold 1.0
    assert thr == 1.0 and m["f1"] == pytest.approx(0.75)


def test_bad_line_is_named(tmp_path):
    p = tmp_path / "de-en.training.de"
    p.write_text("de-1\tHallo\nkaputt\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"de-en.training.de:2"):
        read_bucc_file(p)


def test_a_gold_id_in_no_sentence_file_is_named_before_the_encoder_loads(tmp_path):
    """A gold line whose source or English id is in no line of its split's files (was: a gold of
    other ids scored P 0 R 0, exit 0; one such line lowered the recall without a word): one line
    naming the gold file, the line and the id, before anything is encoded or written."""
    root = tmp_path / "bucc2018"
    root.mkdir()
    de = [f"Satz {i}." for i in range(30)]
    _write_split(root, "training", de, [f"Sentence {i}." for i in range(30)], n_par=10, n_noise=5, seed=0)
    gold = root / "de-en.training.gold"
    lines = gold.read_text(encoding="utf-8").splitlines()
    for bad, which in ((f"{lines[0].split()[0]}\ten-999999999", "'en-999999999' is in no line of de-en.training.en"),
                       ("xx-1\tyy-1", "'xx-1' is in no line of de-en.training.de")):
        gold.write_text("\n".join([*lines[:3], bad, *lines[3:]]) + "\n", encoding="utf-8")
        refused(xm("bench", "bucc", "--data-dir", root, "--out", tmp_path / "b.json"),
                f"{gold}:4: id {which}")
        assert not (tmp_path / "b.json").exists()
    for pair in ("de", "de-fr", "../x-en"):  # (was: "no training or sample split in DIR (it holds de-en)")
        refused(xm("bench", "bucc", "--data-dir", root, "--pair", pair, "--out", tmp_path / "b.json"),
                f"--pair {pair!r}: BUCC names a pair SRC-en")


def _write_split(root, split, de, en, n_par, n_noise, seed):
    """Hidden translations: n_par aligned pairs among unrelated sentences on both sides."""
    rng = random.Random(seed)
    idx = list(range(len(de)))
    rng.shuffle(idx)
    par, de_only, en_only = idx[:n_par], idx[n_par:n_par + n_noise], idx[n_par + n_noise:n_par + 2 * n_noise]
    de_rows = [(f"de-{i:09d}", de[j]) for i, j in enumerate(par + de_only)]
    en_order = par + en_only
    rng.shuffle(en_order)
    en_rows = [(f"en-{i:09d}", en[j]) for i, j in enumerate(en_order)]
    en_id = {j: f"en-{i:09d}" for i, j in enumerate(en_order)}
    gold = [(f"de-{i:09d}", en_id[j]) for i, j in enumerate(par)]
    rng.shuffle(de_rows)
    (root / f"de-en.{split}.de").write_text("".join(f"{a}\t{b}\n" for a, b in de_rows), encoding="utf-8")
    (root / f"de-en.{split}.en").write_text("".join(f"{a}\t{b}\n" for a, b in en_rows), encoding="utf-8")
    (root / f"de-en.{split}.gold").write_text("".join(f"{a}\t{b}\n" for a, b in gold), encoding="utf-8")


@pytest.mark.slow
def test_bucc_on_hidden_flores_translations(tmp_path, data_dir, me5, monkeypatch):
    de, en = flores_lines(data_dir, "deu_Latn"), flores_lines(data_dir, "eng_Latn")
    root = tmp_path / "bucc2018"
    root.mkdir()
    # Disjoint FLORES lines for the two splits (the sentences the mining tests embed, 0-299, reused).
    _write_split(root, "training", de[:300], en[:300], n_par=60, n_noise=120, seed=1)
    _write_split(root, "test", de[:300][::-1], en[:300][::-1], n_par=60, n_noise=120, seed=2)
    result = run_bucc(root, pair="de-en", encoder=me5)
    assert result["train"]["f1"] >= 0.9 and result["test"]["f1"] >= 0.85, result
    assert 0.9 < result["threshold"] < 1.5
    # The CLI command writes a result as every benchmark does (was: no machine, data or seconds, a
    # kind of its own, and nothing at all without --out); without test gold only training is reported.
    (root / "de-en.test.gold").unlink()
    out = tmp_path / "bucc.json"
    res = CliRunner().invoke(command, ["--data-dir", str(root), "--encoder", "me5-small", "--out", str(out)])
    assert res.exit_code == 0, res.output
    saved = json.loads(out.read_text())
    assert saved["kind"] == "xmine-benchmark-result" and saved["task"] == "bucc" and saved["machine"]["cores"]
    assert [Path(d["path"]).name for d in saved["data"]] == [f"de-en.training.{x}" for x in ("de", "en", "gold")]
    detail = saved["details"]["raw"]
    assert detail["test"] is None and detail["train"]["f1"] == pytest.approx(result["train"]["f1"])
    assert saved["table"]["rows"] == [["training", *(round(100 * detail["train"][m], 1) for m in
                                                     ("precision", "recall", "f1")), detail["train"]["pairs"], 60,
                                       f"{detail['threshold']:.4f}"]]
    assert saved["provenance"]["parameters"]["pair"] == "de-en" and "(no test gold: the training split only)" in res.output
    # a title saying what measured it and a table, as every bench command prints (was: a loose line a split)
    assert "BUCC 2018 de-en, raw ratio margin, threshold tuned for F1 on the training gold (%): me5-small at " in res.output
    table = res.output.splitlines()
    header = next(i for i, line in enumerate(table) if line.split() == saved["table"]["columns"])
    assert table[header + 2].split() == [str(c) for c in saved["table"]["rows"][0]]
    ok(xm("verify", out))
    # a result the earlier `bench bucc` wrote (kind bucc-result) is replaced with --overwrite, as before
    from xmine.artefacts.fileio import atomic_write_manifest

    atomic_write_manifest(tmp_path / "old.json", {"kind": "bucc-result", "pair": "de-en", "threshold": 1.07})
    refused(xm("bench", "bucc", "--data-dir", root, "--out", tmp_path / "old.json"), "--overwrite")
    ok(xm("bench", "bucc", "--data-dir", root, "--out", tmp_path / "old.json", "--overwrite"))
    assert json.loads((tmp_path / "old.json").read_text())["kind"] == "xmine-benchmark-result"
    # more neighbours asked for than a side holds (a fuzz: k recorded as given, unsaid)
    res = ok(xm("bench", "bucc", "--data-dir", root, "-k", "256", "--out", tmp_path / "k.json"))
    assert "-k 256: a side of bucc2018 holds " in res.output and "a margin is over at most that many" in res.output
    # -k 1 is refused as mine refuses it (was: every mutual pair scored alike, an F1 of nothing, exit 0)
    refused(xm("bench", "bucc", "--data-dir", root, "-k", "1", "--out", tmp_path / "k1.json"),
            "-k 1 with the ratio margin: a pair's one neighbour is the pair itself")
    ok(xm("bench", "bucc", "--data-dir", root, "-k", "1", "--margin", "absolute", "--out", tmp_path / "k1.json"))
    # the default name says each setting given (was: "...-de-enencoder.json" for the default run, and -k,
    # --margin and --retrieval left out, so two settings claimed one name)
    import xmine.benchmarks.common as common

    monkeypatch.setattr(common, "results_dir", lambda: tmp_path / "results")
    ok(xm("bench", "bucc", "--data-dir", root, "-q"))
    ok(xm("bench", "bucc", "--data-dir", root, "-k", "3", "--margin", "distance", "--retrieval", "intersect", "-q"))
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == [
        "bucc-me5-small-de-en-k3-distance-intersect.json", "bucc-me5-small-de-en.json"]
    # a pair the folder does not hold: the pairs it does (was: only "no training or sample split")
    refused(xm("bench", "bucc", "--data-dir", root, "--pair", "fr-en", "--out", tmp_path / "fr.json"),
            f"BUCC fr-en: no training or sample split in {root} (it holds de-en)")
    assert not (tmp_path / "fr.json").exists()


def test_bucc_keeps_a_pair_at_a_threshold_as_mine_keeps_it():
    """(a helper: bucc cast the threshold to float32 after mine moved to float64, so a score half a
    float32 step below the threshold counted as kept here and dropped there)"""
    import numpy as np

    from xmine.benchmarks.bucc import at_least
    from xmine.mining.select import MinedPairs
    from xmine.mining.threshold_rule import keep_at_least

    below = np.float32(1.0251)
    t = float(below) + 1e-9  # a threshold whose nearest float32 is that score, which lies below it
    assert np.float32(t) == below and float(below) < t
    scores = np.array([1.2, below, 1.0], dtype=np.float32)
    mined = MinedPairs(src_idx=np.arange(3), tgt_idx=np.arange(3), score=scores, direction=np.zeros(3, np.int8))
    assert at_least(scores, t).tolist() == [True, False, False]
    assert len(keep_at_least(mined, t).score) == 1
