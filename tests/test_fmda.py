"""FMDA: loss terms against hand computation, the "1 - P" attention, BLEU pools against exhaustive
sacrebleu, slot masking on the real tokenizer, and a real CLI training run on a
few dozen MASSIVE rows (resume, save/load, sentence-transformers round trip).
"""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from xmine.cli import main as main_cli

from xmine.disentangle import losses as L
from xmine.disentangle.model import FMDA, pad_batch
from xmine.disentangle.fmda_data import (THRESHOLD, _bleu_upper_bound, bleu_tokenizer_for, negative_pool,
                                         read_massive, template_and_residual_masks)
from xmine.disentangle.massive import parse_annotation
from xmine.disentangle.methods import FmdaBatch, fmda_terms

# Slow tier (`pytest -m "not slow"` is the fast one): FMDA training on token states of the real encoder.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def massive_dir(data_dir):
    d = data_dir / "massive" / "data"
    if not (d / "en-US.jsonl").is_file():
        pytest.skip("MASSIVE not in the shared data")
    return d


# --- losses on tiny tensors --------------------------------------------------------------------------

def test_contrastive_loss_by_hand():
    x1 = torch.tensor([[1.0, 0.0]])
    x2 = torch.tensor([[2.0, 0.0]])  # same direction: cos 1
    n1 = torch.tensor([[0.0, 3.0]])  # orthogonal: cos 0
    n2 = torch.tensor([[1.0, 1.0]])  # 45 degrees: cos 1/sqrt(2)
    # the printed Eqs. 3-4: -1 + 0 + 0.70711
    assert float(L.fmda_contrastive_loss(x1, x2, n1, n2, form="paper")) == pytest.approx(-0.29289, abs=1e-5)
    # printed: a negative pointing away lowers the loss below -1
    assert float(L.fmda_contrastive_loss(x1, x2, -x1, -x2, form="paper")) == pytest.approx(-3.0, abs=1e-6)
    # clamped (default): two rows, so each row's in-batch negative is the other row
    a1 = torch.tensor([[1.0, 0.0], [0.0, 1.0]])  # the two L1 rows are orthogonal: in-batch cos 0
    a2 = torch.tensor([[1.0, 1.0], [0.0, 2.0]])  # pos cos: 0.70711, 1; L2 in-batch cos 0.70711 both rows
    m1 = torch.tensor([[-1.0, 0.0], [0.0, 5.0]])  # pool negatives: cos -1 (clamped to 0), 1
    m2 = torch.tensor([[1.0, 0.0], [0.0, -1.0]])  # cos 0.70711, -1 (clamped to 0)
    row0 = -0.70711 + 0.0 + 0.70711 + 0.0 + 0.70711
    row1 = -1.0 + 1.0 + 0.0 + 0.0 + 0.70711
    assert float(L.fmda_contrastive_loss(a1, a2, m1, m2)) == pytest.approx((row0 + row1) / 2, abs=1e-5)
    # clamped: nothing below -1 however far the negatives point away
    assert float(L.fmda_contrastive_loss(a1, a1, -a1, -a1)) >= -1.0 - 1e-6
    with pytest.raises(ValueError, match="batch of >= 2"):
        L.fmda_contrastive_loss(x1, x2, n1, n2)


def test_mlp_depth_is_in_the_spec_and_old_specs_load_with_two_layers():
    new = FMDA({"dim": 4, "languages": ["en-US", "de-DE"], "layers": 1})
    assert isinstance(new.meaning_mlp[0], torch.nn.Linear) and len(new.meaning_mlp) == 1
    assert new.spec["layers"] == 1
    old = FMDA({"dim": 4, "languages": ["en-US", "de-DE"]})  # saved before `layers` existed
    assert [type(x).__name__ for x in old.meaning_mlp] == ["Linear", "ReLU", "Linear"]


def test_part_reconstruction_skips_rows_without_target():
    part = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    lang = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    target = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
    loss, n = L.fmda_part_reconstruction_loss(part, lang, target, torch.tensor([True, False]))
    assert n == 1 and float(loss) == pytest.approx(0.5)  # ((1-1)^2 + (2-1)^2) / 2, row 1 ignored
    loss, n = L.fmda_part_reconstruction_loss(part, lang, target, torch.tensor([True, True]))
    # row 1: (3+1-0)^2 + (4+1-0)^2 = 16 + 25; mean over 4 cells = (0 + 1 + 16 + 25) / 4
    assert n == 2 and float(loss) == pytest.approx(10.5)
    loss, n = L.fmda_part_reconstruction_loss(part, lang, target, torch.tensor([False, False]))
    assert n == 0 and float(loss) == 0.0


def _identity_fmda():
    m = FMDA({"dim": 2, "languages": ["en-US", "de-DE"]})
    with torch.no_grad():
        for lin in (m.query_tp, m.key_tp, m.value_tp, m.value_rs):
            lin.weight.copy_(torch.eye(2))
            lin.bias.zero_()
    return m


def test_template_attention_and_one_minus_p_by_hand():
    m = _identity_fmda()
    # [CLS] = (2, 0), two zero tokens, one padding token that must get no weight
    h = torch.tensor([[[2.0, 0.0], [0.0, 0.0], [0.0, 0.0], [9.0, 9.0]]])
    mask = torch.tensor([[True, True, True, False]])
    p, p_rs = m.attention(h, mask)
    # logits q.k / sqrt(2) = (2.8284, 0, 0): P = (e^2.8284, 1, 1) / (e^2.8284 + 2)
    assert p[0].tolist() == pytest.approx([0.89431, 0.05284, 0.05284, 0.0], abs=1e-4)
    # softmax(1 - P) over the real tokens: exp(0.10569), exp(0.94716), exp(0.94716), normalised
    assert p_rs[0].tolist() == pytest.approx([0.17732, 0.41134, 0.41134, 0.0], abs=1e-4)
    parts = m(h, mask)
    # identity value maps: emb_tp = sum_j P_j h_j = 0.89431 * (2, 0); emb_rs = 0.17732 * (2, 0)
    assert parts["template"][0].tolist() == pytest.approx([1.78862, 0.0], abs=1e-4)
    assert parts["residual"][0].tolist() == pytest.approx([0.35464, 0.0], abs=1e-4)


def test_fmda_terms_leave_out_unannotated_targets():
    torch.manual_seed(0)
    m = FMDA({"dim": 8, "languages": ["en-US", "de-DE"]})
    h, mask = pad_batch([np.random.default_rng(i).normal(size=(5 + i, 8)).astype(np.float16) for i in range(4)])
    parts = lambda: m(h, mask)  # noqa: E731
    z = torch.zeros(4, 8)
    b = FmdaBatch(parts_l1=parts(), parts_l2=parts(), parts_l1_neg=parts(), parts_l2_neg=parts(),
                  utt_l1=torch.randn(4, 8), utt_l2=torch.randn(4, 8), tp_tgt_l1=torch.randn(4, 8), tp_tgt_l2=z,
                  rs_tgt_l1=torch.randn(4, 8), rs_tgt_l2=z, has_tgt_l1=torch.tensor([True, True, False, True]),
                  has_tgt_l2=torch.zeros(4, dtype=torch.bool), lang_l1=torch.zeros(4, dtype=torch.long),
                  lang_l2=torch.ones(4, dtype=torch.long), model=m)
    terms, counts = fmda_terms(b)
    # L2 (de-DE train) has no annotation: its own and the L1 -> L2 cross-lingual targets are absent
    for absent in ("Loss_rec^tpL2", "Loss_rec^tpL1-CL", "Loss_rec^rsL2", "Loss_rec^rsL1-CL"):
        assert absent not in terms
    for present in ("Loss_rec^tpL1", "Loss_rec^tpL2-CL", "Loss_rec^rsL1", "Loss_rec^rsL2-CL"):
        assert counts[present] == 3
    assert counts["Loss_con^m"] == counts["Loss_lang^L1"] == 4
    # Eq. 2 reads L2's template with L1's language embedding: check one value by hand
    tp2, lang1 = b.parts_l2["template"], b.parts_l1["language"]
    rows = b.has_tgt_l1
    expect = ((tp2[rows] + lang1[rows] - b.tp_tgt_l1[rows]) ** 2).mean()
    assert float(terms["Loss_rec^tpL2-CL"].detach()) == pytest.approx(float(expect.detach()), rel=1e-6)


# --- annotations, masks, BLEU pools ------------------------------------------------------------------

def test_slot_spans_and_masks():
    utt = "wake me up at five am this week"
    annot = "wake me up at [time : five am] [date : this week]"
    slots, template = template_and_residual_masks(parse_annotation(annot))
    assert slots == [(14, 21), (22, 31)] and [utt[s:e] for s, e in slots] == ["five am", "this week"]
    assert [utt[s:e] for s, e in template] == ["wake me up at"]


def test_masking_replaces_exactly_the_slot_tokens(me5):
    from xmine.encoders.tokens import token_ids

    utt = "wake me up at five am this week"
    annot = parse_annotation("wake me up at [time : five am] [date : this week]")
    slots, template = template_and_residual_masks(annot)
    plain, = token_ids(me5, [utt], None)
    masked_slots, masked_template = token_ids(me5, [utt, utt], [slots, template])
    tok = me5.tokenizer.convert_ids_to_tokens
    mask_id = me5.tokenizer.mask_token_id
    kept = [t for t, i in zip(tok(plain), masked_slots) if i != mask_id]
    assert kept == ["<s>", "▁que", "ry", ":", "▁wake", "▁me", "▁up", "▁at", "</s>"]
    kept = [t for t, i in zip(tok(plain), masked_template) if i != mask_id]
    assert kept == ["<s>", "▁que", "ry", ":", "▁five", "▁am", "▁this", "▁week", "</s>"]


def bleu_exhaustive_pool(utterances, lang: str) -> np.ndarray:
    """The pool by scoring every ordered pair with sacrebleu: the reference `negative_pool` must equal."""
    import sacrebleu

    tok_name = bleu_tokenizer_for(lang)
    out = np.zeros(len(utterances), dtype=bool)
    for i, a in enumerate(utterances):
        for j, b in enumerate(utterances):
            if i != j and sacrebleu.sentence_bleu(a, [b], tokenize=tok_name).score / 100.0 >= THRESHOLD:
                out[i] = out[j] = True
    return np.flatnonzero(~out)


def test_bleu_bound_is_an_upper_bound_and_pool_is_exact(massive_dir):
    import sacrebleu

    for loc in ("en-US", "ja-JP"):
        utts = [r.utt for r in read_massive(massive_dir, loc) if r.partition == "train"]
        rng = np.random.default_rng(1)
        sample = [utts[i] for i in rng.choice(len(utts), 120, replace=False)]
        # the pool from the n-gram-bounded search equals scoring all 14,280 ordered pairs
        assert negative_pool(sample, loc).tolist() == bleu_exhaustive_pool(sample, loc).tolist()
    # the bound against sacrebleu itself, on near and far pairs of real utterances
    from sacrebleu.metrics import BLEU

    tok = BLEU(tokenize="13a").tokenizer
    utts = [r.utt for r in read_massive(massive_dir, "en-US")[:400]]
    rng = np.random.default_rng(2)
    for _ in range(300):
        i, j = rng.integers(len(utts), size=2)
        if i == j:
            continue
        h, r = tok(utts[i]).split(), tok(utts[j]).split()
        u1 = sum(min(h.count(w), r.count(w)) for w in set(h))
        big = lambda t: [tuple(t[k:k + 2]) for k in range(len(t) - 1)]  # noqa: E731
        u2 = sum(min(big(h).count(b), big(r).count(b)) for b in set(big(h)))
        bound = float(_bleu_upper_bound(np.array([u1]), np.array([u2]), np.array([len(h)]), np.array([len(r)]))[0])
        assert bound + 1e-9 >= sacrebleu.sentence_bleu(utts[i], [utts[j]]).score / 100


# --- a real training run from the CLI -----------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_massive(massive_dir, tmp_path_factory):
    """The first 90 rows of en-US and de-DE (59 train, 12 dev, 19 test), real text and annotation."""
    d = tmp_path_factory.mktemp("massive")
    for loc in ("en-US", "de-DE"):
        with open(massive_dir / f"{loc}.jsonl", encoding="utf-8") as f:
            lines = [next(f) for _ in range(90)]
        (d / f"{loc}.jsonl").write_text("".join(lines), encoding="utf-8")
    return d


def test_misaligned_locales_name_the_row_and_a_damaged_pool_cache_is_computed_again(tiny_massive, tmp_path,
                                                                                      monkeypatch, caplog):
    from xmine.disentangle.fmda_data import _aligned_rows, pool_indices
    from xmine.errors import InputError

    lines = (tiny_massive / "de-DE.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    swapped = tmp_path / "swapped"
    swapped.mkdir()
    shutil.copy(tiny_massive / "en-US.jsonl", swapped)
    (swapped / "de-DE.jsonl").write_text("".join(lines[:4] + [lines[5], lines[4]] + lines[6:]), encoding="utf-8")
    ids = [json.loads(l)["id"] for l in lines]
    with pytest.raises(InputError, match=rf"de-DE.jsonl:5: rows are not aligned with en-US.jsonl .*: row 5 is id "
                                         rf"'{ids[5]}' \(\w+\), en-US.jsonl's id '{ids[4]}' \(\w+, line 5\)"):
        _aligned_rows(swapped, ["de-DE"])
    (swapped / "de-DE.jsonl").write_text("".join(lines[:80]), encoding="utf-8")  # (was: the file alone named)
    with pytest.raises(InputError, match="de-DE.jsonl: rows are not aligned .*: 80 rows, en-US.jsonl has 90"):
        _aligned_rows(swapped, ["de-DE"])

    monkeypatch.setenv("XMINE_HOME", str(tmp_path / "home"))
    utts = [json.loads(l)["utt"] for l in lines[:40]]
    pool, stats = pool_indices(utts, "de-DE", show_progress=False)
    (cached,) = (tmp_path / "home" / "fmda-pools").glob("*.json")
    for damage in ("{", json.dumps({"pool": [0, 1, 400], "stats": stats}), json.dumps({"pool": "x", "stats": {}})):
        cached.write_text(damage, encoding="utf-8")  # (was: a traceback, or indices past the utterances read)
        with caplog.at_level("WARNING", logger="xmine"):
            again, _ = pool_indices(utts, "de-DE", show_progress=False)
        assert again.tolist() == pool.tolist() and "computed again" in caplog.text
        caplog.clear()


def _train_cmd(massive, out, *extra):
    from xmine.cli import main

    return CliRunner().invoke(main, ["train", "--method", "fmda", "--pairs", str(massive), "--langs", "de-DE",
                                     "--batch-size", "16", "--lr", "1e-3", "--max-epochs", "2", "-q", "-o", str(out),
                                     *extra], catch_exceptions=False)


def test_fmda_trains_from_the_cli_resumes_and_round_trips(tiny_massive, tmp_path, me5, data_dir):
    from sentence_transformers import SentenceTransformer

    from xmine.disentangle import export_sentence_transformer, load_projection

    out = tmp_path / "fmda"
    res = _train_cmd(tiny_massive, out)
    assert res.exit_code == 0, res.output
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["method"] == "fmda" and cfg["languages"] == ["en-US", "de-DE"] and len(cfg["history"]) == 2
    rows = cfg["term_rows_per_epoch"]
    # every train row is en-US-annotated; de-DE train rows are not
    assert rows["Loss_rec^tpL1"] == rows["Loss_rec^rsL2-CL"] == rows["Loss_con^m"] == 59
    assert set(cfg["left_out_terms"]) == {"Loss_rec^tpL2", "Loss_rec^tpL1-CL", "Loss_rec^rsL2", "Loss_rec^rsL1-CL"}
    assert cfg["history"][-1]["train_loss"] < cfg["history"][0]["train_loss"] or cfg["best_epoch"] >= 1
    weights = (out / "model.safetensors").read_bytes()

    # the same command again is refused: the folder holds a finished projection now
    res = _train_cmd(tiny_massive, out)
    assert res.exit_code == 2 and "already exists" in res.output
    # with --overwrite it resumes from the checkpoint after epoch 2: nothing to train, same weights
    res = _train_cmd(tiny_massive, out, "--overwrite")
    assert res.exit_code == 0 and (out / "model.safetensors").read_bytes() == weights
    # the data are known by their content: the same files in another folder resume the run, the same
    # folder with a file edited is other data (was: by the folder's path alone, the other way round)
    moved = shutil.copytree(tiny_massive, tmp_path / "moved")
    res = _train_cmd(moved, out, "--overwrite")
    assert res.exit_code == 0 and (out / "model.safetensors").read_bytes() == weights, res.output
    assert json.loads((out / "config.json").read_text())["training_data"]["locales"]["de-DE"]["file_sha256"] == \
        hashlib.sha256((moved / "de-DE.jsonl").read_bytes()).hexdigest()
    edited = (moved / "de-DE.jsonl").read_text(encoding="utf-8").replace("stell einen wecker für zwei",
                                                                         "stelle einen wecker für zwei", 1)
    (moved / "de-DE.jsonl").write_text(edited, encoding="utf-8")
    res = CliRunner().invoke(main_cli, ["train", "--method", "fmda", "--pairs", str(moved), "--langs", "de-DE",
                                        "--batch-size", "16", "--lr", "1e-3", "--max-epochs", "2", "-q",
                                        "--overwrite", "-o", str(out)])
    assert res.exit_code == 2 and "other settings or data" in res.output and "file_sha256" in res.output, res.output
    # other settings into the same folder are refused with one line, exit 2
    from xmine.cli import main

    res = CliRunner().invoke(main, ["train", "--method", "fmda", "--pairs", str(tiny_massive), "--langs", "de-DE",
                                    "--batch-size", "8", "--max-epochs", "2", "-q", "--overwrite", "-o", str(out)])
    assert res.exit_code == 2 and "other settings" in res.output
    # --ray encodes sentences in actors; FMDA trains on token states, so it is refused, not ignored
    res = CliRunner().invoke(main, ["train", "--method", "fmda", "--pairs", str(tiny_massive), "--langs", "de-DE",
                                    "--ray", "-o", str(tmp_path / "fmda-ray")])
    assert res.exit_code == 2 and "--ray applies to the methods other than fmda" in res.output
    assert not (tmp_path / "fmda-ray").exists()
    # an encoder without token states, and options FMDA has no use for: one line before any work
    # (was: a traceback from the token store after the negative pools were built; --valid-fraction
    # and --base read and dropped)
    for extra, said in ((["--encoder", "use-m3"], "encoder 'use-m3' has no token-level output"),
                        (["--valid-fraction", "0.5", "--base", "meat"], "--base, --valid-fraction: not used by")):
        res = CliRunner().invoke(main, ["train", "--method", "fmda", "--pairs", str(tiny_massive), "--langs", "de-DE",
                                        *extra, "-o", str(tmp_path / "fmda-no")])
        assert res.exit_code == 2 and said in res.output and "Traceback" not in res.output, res.output
    assert not (tmp_path / "fmda-no").exists()
    # export-st writes standard modules only: FMDA's is refused in one line (was: AttributeError)
    res = CliRunner().invoke(main, ["export-st", str(out), str(tmp_path / "st-fmda")])
    assert res.exit_code == 2 and "an FMDA projection reads the encoder's token states" in res.output, res.output
    # every corpus command projects sentence vectors: refused before anything is encoded (was: once
    # the first batch was, "it needs texts (Projection.embed_texts)")
    (tmp_path / "a.de").write_text("wecke mich um fünf uhr auf\n", encoding="utf-8")
    (tmp_path / "a.en").write_text("wake me up at five am\n", encoding="utf-8")
    for args in (["mine", tmp_path / "a.de", tmp_path / "a.en", "--src-lang", "de", "--tgt-lang", "en",
                  "-o", tmp_path / "m.tsv"], ["embed", tmp_path / "a.de", "--lang", "de", "-o", tmp_path / "s"],
                 ["langid", tmp_path / "a.de"], ["build-index", tmp_path / "a.en", "-o", tmp_path / "i"]):
        res = CliRunner().invoke(main, [str(a) for a in args] + ["--projection", str(out)])
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        assert res.output.startswith(f"xmine: error: {out}: a projection of method fmda, which reads the encoder's "
                                     "token states"), res.output
    assert not any((tmp_path / name).exists() for name in ("m.tsv", "m.tsv.json", "s", "i"))
    # ... while the benchmarks read its parts through the token path (a regression of that refusal)
    res = CliRunner().invoke(main, ["bench", "tatoeba", "--projection", str(out), "--langs", "deu", "--max-pairs", "20",
                                    "--data-dir", str(data_dir), "--out", str(tmp_path / "bt.json")])
    assert res.exit_code == 0, res.output
    assert "fmda:meaning" in json.loads((tmp_path / "bt.json").read_text())["details"]

    proj = load_projection(out)
    assert proj.token_level
    # bench fmda compares with DREAM: a projection of another method is refused, not labelled DREAM
    from xmine.benchmarks.fmda_tables import evaluate
    from xmine.encoders.projection import shipped_dir
    from xmine.errors import ConfigError

    shipped = load_projection(shipped_dir("me5-small"))
    with pytest.raises(ConfigError, match=f"^--dream de-DE: {shipped.path} is a projection of method inter, not dream$"):
        evaluate(me5, tiny_massive, {"de-DE": {"fmda": proj, "dream": shipped}}, show_progress=False)
    sents = ["wake me up at five am this week", "wecke mich um fünf uhr auf"]
    parts = proj.embed_texts(me5, sents, ("meaning", "template", "residual", "language"))
    for p in parts.values():
        assert p.shape == (2, me5.dim) and np.allclose(np.linalg.norm(p, axis=1), 1, atol=1e-5)
    assert not np.allclose(parts["template"], parts["residual"])
    with pytest.raises(Exception, match="token states"):
        proj.transform(me5.encode(sents), "meaning")

    st_dir = tmp_path / "st"
    export_sentence_transformer(out, "me5-small", st_dir, part="template")
    assert "FMDA projection: needs the encoder's token states" in (st_dir / "README.md").read_text()
    st = SentenceTransformer(str(st_dir), device="cpu", trust_remote_code=True)
    got = st.encode(sents, convert_to_numpy=True)
    cos = (got * parts["template"]).sum(1)
    assert cos.min() > 0.999, cos


# --- checkpoint selection on dev retrieval ------------------------------------------------------------

def test_dev_retrieval_by_hand():
    from types import SimpleNamespace

    from xmine.disentangle.fmda_trainer import FmdaConfig, dev_retrieval

    vecs = {"en-US": torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
            "de-DE": torch.tensor([[1.0, 0.1], [1.0, 0.0], [0.0, 1.0]])}
    # cosines en x de: [[.995, 1, 0], [.0995, 0, 1], [.774, .707, .707]]. en->de (rows): argmax de 1, 2, 0
    # for gold 0, 1, 2: no hit. de->en (columns): argmax en 0, 0, 1: one hit. Mean of 0/3 and 1/3.
    model = torch.nn.Linear(1, 1)
    stepper = SimpleNamespace(model=model, parts=lambda loc, rows: {"meaning": vecs[loc][rows]})
    data = SimpleNamespace(dev_rows=np.arange(3))
    assert dev_retrieval(stepper, data, FmdaConfig(partners=["de-DE"])) == pytest.approx(1 / 6)
    assert model.training  # left in training mode
    vecs["de-DE"] = vecs["en-US"] * 3  # translations identical up to scale: every row found both ways
    assert dev_retrieval(stepper, data, FmdaConfig(partners=["de-DE"])) == 1.0


def test_selection_keeps_the_epoch_with_the_best_dev_retrieval(tiny_massive, tmp_path, me5, monkeypatch):
    from xmine.disentangle import fmda_trainer as T
    from xmine.disentangle import load_projection

    # scripted dev retrieval (epoch 0 = untrained, then epochs 1-5): best at epoch 2, tied at 4 (the
    # earlier is kept), so patience 3 stops after epoch 5; the real value is computed too
    script = iter([0.1, 0.3, 0.6, 0.5, 0.6, 0.2, 0.9])
    real, snapshots, real_fn = [], [], T.dev_retrieval

    def scripted(stepper, data, config):
        real.append(real_fn(stepper, data, config))
        snapshots.append({k: v.clone() for k, v in stepper.model.state_dict().items()})
        return next(script)

    monkeypatch.setattr(T, "dev_retrieval", scripted)
    config = T.FmdaConfig(partners=["de-DE"], batch_size=16, lr=1e-3, max_epochs=10, patience=3)
    proj = T.train_fmda(tiny_massive, tmp_path / "sel", encoder=me5, config=config, show_progress=False)
    cfg = proj.config
    hist = cfg["history"]
    assert [h["dev_retrieval"] for h in hist] == [0.3, 0.6, 0.5, 0.6, 0.2]
    assert cfg["best_epoch"] == 2 and cfg["selected_on"] == "dev-retrieval" and cfg["best_dev_retrieval"] == 0.6
    assert cfg["initial_dev_retrieval"] == 0.1 and cfg["best_valid_loss"] == hist[1]["valid_loss"]
    assert all(0.0 <= r <= 1.0 for r in real)
    # the saved weights are epoch 2's (snapshots[0] is the untrained model), not the last epoch's
    saved = proj.model.state_dict()
    for k, v in snapshots[2].items():
        if k != "langid_centroids":
            assert torch.equal(saved[k], v), k
    assert not torch.equal(saved["meaning_mlp.0.weight"], snapshots[5]["meaning_mlp.0.weight"])
    assert load_projection(tmp_path / "sel").config["best_epoch"] == 2


def test_a_projection_retrieving_no_better_than_untrained_is_said(tiny_massive, tmp_path, me5, monkeypatch, caplog):
    """(was: written with exit 0 and no word, the numbers only in the last line)"""
    from xmine.disentangle import fmda_trainer as T

    script = iter([0.5, 0.4, 0.5, 0.3])  # untrained, then epochs 1-3: never above 0.5
    monkeypatch.setattr(T, "dev_retrieval", lambda stepper, data, config: next(script))
    config = T.FmdaConfig(partners=["de-DE"], batch_size=16, lr=1e-3, max_epochs=3, patience=3)
    with caplog.at_level("WARNING", logger="xmine"):
        proj = T.train_fmda(tiny_massive, tmp_path / "flat", encoder=me5, config=config, show_progress=False)
    note = proj.config["note"]
    assert note.startswith("no epoch retrieved the dev rows better than the untrained model (dev retrieval 0.5000, "
                           "untrained 0.5000)")
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [note]


def test_a_projection_retrieving_worse_than_untrained_is_refused(tiny_massive, tmp_path, me5, monkeypatch):
    """As `train` refuses a loss that never fell (was: written with a warning, exit 0)."""
    from xmine.disentangle import fmda_trainer as T
    from xmine.errors import ConfigError

    script = iter([0.5, 0.4, 0.3, 0.2])  # untrained, then epochs 1-3: every one below it
    monkeypatch.setattr(T, "dev_retrieval", lambda stepper, data, config: next(script))
    config = T.FmdaConfig(partners=["de-DE"], batch_size=16, lr=1e-3, max_epochs=3, patience=3)
    with pytest.raises(ConfigError, match="no epoch retrieved the dev rows as well as the untrained model \\(best "
                                          "dev retrieval 0.4000, untrained 0.5000\\); no projection written"):
        T.train_fmda(tiny_massive, tmp_path / "worse", encoder=me5, config=config, show_progress=False)
    assert not (tmp_path / "worse" / "model.safetensors").exists()


def test_fmda_settings_are_refused_by_their_option_names_too():
    """`xmine train --method fmda` builds an FmdaConfig: its refusals name the option as well as the
    field (was: "max_train must be >= 8, got 4", an option the user never typed)."""
    from xmine.disentangle.fmda_trainer import FmdaConfig
    from xmine.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^max_train \(--max-pairs-per-lang\) must be >= 8 for FMDA, got 4$"):
        FmdaConfig(partners=["de-DE"], max_train=4).check()
    with pytest.raises(ConfigError, match=r"^max_dev \(--max-valid-pairs\) must be >= 8"):
        FmdaConfig(partners=["de-DE"], max_dev=2).check()
    with pytest.raises(ConfigError, match=r"needs layers 1 \(--layers 1\), got 2$"):
        FmdaConfig(partners=["de-DE"], meaning_init="identity", layers=2).check()
    with pytest.raises(ConfigError, match=r"en-US is the locale every other is paired with"):  # (was: en-US-en-US)
        FmdaConfig(partners=["de-DE", "en-US"]).check()


def test_the_python_api_trains_with_the_commands_defaults():
    """(a helper: FmdaConfig's batch was 64, `xmine train --method fmda`'s 512, Tiyajamorn et al.'s
    which the paper reuses: the API trained otherwise than the command without a word)"""
    from xmine.cli import main
    from xmine.disentangle.fmda_trainer import FmdaConfig

    train = main.get_command(None, "train")
    defaults = {p.name: p.default for p in train.params}
    config = FmdaConfig(partners=["de-DE"])
    assert (config.batch_size, config.lr) == (defaults["batch_size"], defaults["lr"]) == (512, 1e-4)


def test_fmda_without_massive_says_to_pass_it_as_pairs(tmp_path):
    """`train --method fmda` reads MASSIVE from --pairs: where it is not there, the error says so
    (was: "pass --data-dir DIR or set XMINE_DATA", an option train does not have and a variable
    it does not read)."""
    from xmine.cli import main

    (tmp_path / "p.de").write_text("Hallo.\n", encoding="utf-8")
    (tmp_path / "p.en").write_text("Hello.\n", encoding="utf-8")
    r = CliRunner().invoke(main, ["train", "--method", "fmda", "--pairs", f"{tmp_path / 'p.de'}:{tmp_path / 'p.en'}",
                                  "--langs", "de-DE", "-o", str(tmp_path / "out")])
    assert r.exit_code == 2 and "massive: data not found" in r.output, r.output
    assert "pass it as --pairs DIR" in r.output and "--data-dir" not in r.output
