"""Each loss term against values worked out by hand on tiny 2-d tensors (computation in comments)."""

from __future__ import annotations

import math

import pytest
import torch

from xmine.disentangle import losses as L
from xmine.disentangle.methods import Batch, get_method
from xmine.disentangle.model import Disentangler

R2 = 1 / math.sqrt(2)  # cos between [1,0] and [1,1]


def t(*rows):
    return torch.tensor(rows, dtype=torch.float32)


def close(x, value):
    assert float(torch.as_tensor(x).detach()) == pytest.approx(float(torch.as_tensor(value).detach()), abs=1e-5)


def test_reconstruction_loss_dream_eq2():
    # e - (m + l) = [1,0] - [0.5,0.5] = [0.5,-0.5]; squared norm 0.5; / d=2 -> 0.25
    close(L.reconstruction_loss(t([1, 0]), t([0.5, 0]), t([0, 0.5])), 0.25)
    # exact reconstruction -> 0
    close(L.reconstruction_loss(t([1, 2]), t([1, 0]), t([0, 2])), 0.0)


def test_meaning_parallel_loss_dream_eq6():
    # 1 - cos([1,0],[1,1]) = 1 - 1/sqrt2 = 0.29289
    close(L.meaning_parallel_loss(t([1, 0]), t([1, 1])), 1 - R2)


def test_meaning_random_loss_dream_eq7_clamps_negative_cosines():
    # max(0, cos([1,0],[0,1])=0) + max(0, cos([1,0],[1,1])=0.70711) = 0.70711
    close(L.meaning_random_loss(t([1, 0]), t([0, 1]), t([1, 0]), t([1, 1])), R2)
    # cos([1,0],[-1,0]) = -1 -> clamped to 0; second 0 too
    close(L.meaning_random_loss(t([1, 0]), t([-1, 0]), t([1, 0]), t([0, 1])), 0.0)


def test_language_embedding_loss_dream_eq9():
    # 2 - cos([1,0],[1,0])=1 - cos([1,0],[0,1])=0 -> 1
    close(L.language_embedding_loss(t([1, 0]), t([1, 0]), t([1, 0]), t([0, 1])), 1.0)
    # batch mean: second row 2 - cos([0,1],[0,-1])=-1 - cos([1,1],[1,1])=1 -> 2; mean (1+2)/2 = 1.5
    close(L.language_embedding_loss(t([1, 0], [0, 1]), t([1, 0], [0, -1]), t([1, 0], [1, 1]), t([0, 1], [1, 1])), 1.5)


def test_language_identification_loss_dream_eq11():
    # logits [0, ln 3] -> softmax [1/4, 3/4]; true class 1 -> -ln(3/4) = 0.28768
    close(L.language_identification_loss(t([0, math.log(3)]), torch.tensor([1])), -math.log(0.75))


def test_meat_reconstruction_and_cross_reconstruction_cosine_forms():
    e_s, e_t = t([1, 0]), t([0, 1])
    m_s, m_t, l_s, l_t = t([0.5, 0]), t([0, 0.5]), t([0.5, 0]), t([0, 0.5])
    # L_R: s_M + s_L = [1,0] = e_s, t_M + t_L = [0,1] = e_t -> (1 - 1) + (1 - 1) = 0
    close(L.meat_reconstruction_loss(e_s, e_t, m_s, m_t, l_s, l_t), 0.0)
    # L_CR: s_M + t_L = [.5,.5] vs e_t=[0,1]: 1 - 1/sqrt2; t_M + s_L = [.5,.5] vs e_s: same -> 2 - sqrt2
    close(L.cross_reconstruction_loss(e_s, e_t, m_s, m_t, l_s, l_t), 2 - 2 * R2)
    # scale-free: doubling every part changes nothing
    close(L.cross_reconstruction_loss(e_s, e_t, 2 * m_s, 2 * m_t, 2 * l_s, 2 * l_t), 2 - 2 * R2)


def test_meat_language_loss_pushes_the_two_languages_apart():
    # max(0, cos([1,0],[1,1])) = 0.70711; max(0, cos([1,0],[-1,0]) = -1) = 0 -> batch mean 0.35355
    close(L.meat_language_loss(t([1, 0], [1, 0]), t([1, 1], [-1, 0])), R2 / 2)


def test_adversarial_loss_uniform_target():
    # logits [0,0]: log softmax = [ln .5, ln .5] -> -(mean) = ln 2 = 0.69315 (the minimum, log K)
    close(L.adversarial_loss(t([0, 0])), math.log(2))
    # logits [0, ln3]: log softmax [ln .25, ln .75] -> (1.38629 + 0.28768) / 2 = 0.83698
    close(L.adversarial_loss(t([0, math.log(3)])), (-math.log(0.25) - math.log(0.75)) / 2)
    close(L.discriminator_loss(t([0, math.log(3)]), torch.tensor([0])), -math.log(0.25))


def test_intra_class_clustering_loss_oracle_eq5():
    # source side rows [1,0],[0,1],[1,1]: cos(0,1)=0, cos(0,2)=cos(1,2)=0.70711
    # mean similarity to the others: row0 0.35355, row1 0.35355, row2 0.70711
    # target side all [1,0]: 1 each. per row 2 - s - 1: 0.64645, 0.64645, 0.29289 -> mean 0.52860
    ls = t([1, 0], [0, 1], [1, 1])
    lt = t([1, 0], [1, 0], [1, 0])
    close(L.intra_class_clustering_loss(ls, lt), (2 * (1 - R2 / 2) + (1 - R2)) / 3)


def test_inter_class_separation_loss_oracle_eq6():
    # max(0, cos([1,0],[1,1])) = 0.70711; max(0, cos([1,0],[-1,0]) = -1) = 0 -> 0.70711
    close(L.inter_class_separation_loss(t([1, 0]), t([1, 1]), t([1, 0]), t([-1, 0])), R2)


def test_seed_meaning_loss_eq4():
    # 2(1 - cos([1,0],[1,1])) = 0.58579; max(0, cos([1,0],[0,1])) = 0; max(0, cos([1,1],[1,0])) = 0.70711
    close(L.seed_meaning_loss(t([1, 0]), t([1, 1]), t([0, 1]), t([1, 0])), 2 * (1 - R2) + R2)


def test_seed_combined_loss_eq6():
    # e_s=[1,0], e_t=[0,1]; m_s=[1,1] l_s=e_s-m_s=[0,-1]; m_t=[1,0] l_t=e_t-m_t=[-1,1]; s'_L=[0,1], t'_L=[1,0]
    # cos(e_s, m_s+s'_L=[1,2]) = 1/sqrt5 = 0.44721; cos(e_t, m_t+t'_L=[2,0]) = 0
    # cos(e_s, m_t+l_s=[1,-1]) = 0.70711;          cos(e_t, m_s+l_t=[0,2]) = 1
    # cross = 4 - 0.44721 - 0 - 0.70711 - 1 = 1.84568
    # separation: cos([1,1],[0,-1]) = -0.707 -> 0; cos([1,0],[-1,1]) = -0.707 -> 0
    args = (t([1, 0]), t([0, 1]), t([1, 1]), t([1, 0]), t([0, -1]), t([-1, 1]), t([0, 1]), t([1, 0]))
    expected = 4 - 1 / math.sqrt(5) - 0 - R2 - 1
    close(L.seed_cross_loss(*args), expected)
    close(L.seed_combined_loss(*args), expected)


def _random_batch(method_name: str, *, base=None, seed=0, b=6, d=5):
    method = get_method(method_name, base=base)
    torch.manual_seed(seed)
    model = Disentangler({"dim": d, "architecture": method.architecture, "layers": 1, "languages": ["deu", "eng"],
                          "language_classifier": method.language_classifier, "discriminator": method.adversarial})
    e_s, e_t = torch.randn(b, d), torch.randn(b, d)
    m_s, l_s = model(e_s)
    m_t, l_t = model(e_t)
    batch = Batch(e_s=e_s, e_t=e_t, m_s=m_s, m_t=m_t, l_s=l_s, l_t=l_t, lang_s=torch.zeros(b, dtype=torch.long),
                  lang_t=torch.ones(b, dtype=torch.long), neg=(torch.arange(b) + 1) % b, model=model)
    return method, batch


def test_seed_is_intra_plus_inter():
    # The intra/inter paper splits SEED's loss: L_M = L_mean, L_L = L_lang, L_C = L_cross + L_sep.
    _, batch = _random_batch("seed")
    seed = get_method("seed").terms(batch)
    intra = get_method("intra").terms(batch)
    inter = get_method("inter").terms(batch)
    close(seed["L_M"], intra["L_mean"])
    close(seed["L_L"], intra["L_lang"])
    close(seed["L_C"], inter["L_cross"] + inter["L_sep"])


def test_method_term_names():
    assert set(get_method("dream").terms(_random_batch("dream")[1])) == {"L_R", "L_M^x", "L_M^m", "L_L^m", "L_L^i"}
    assert set(get_method("meat").terms(_random_batch("meat")[1])) == {"L_R", "L_CR", "L_L", "L_A"}
    m, b = _random_batch("oracle", base="meat")
    assert set(m.terms(b)) == {"L_R", "L_CR", "L_L", "L_A", "L_IC", "L_IS"}
    m, b = _random_batch("oracle")
    assert m.base == "dream" and {"L_IC", "L_IS", "L_M^x"} <= set(m.terms(b))


def test_seed_parts_by_hand_eq1_eq2():
    # SEED Eq. 1: meaning = W e + b (one linear layer); Eq. 2: language = e - meaning.
    # W = [[2, 0], [1, 1]], b = [0, -1], e = [1, 2]: meaning = [2, 1+2-1] = [2, 2], language = [-1, 0].
    # (A model that computed the language part any other way, e.g. with a second network, or
    # dropped the bias, gives other numbers.)
    model = Disentangler({"dim": 2, "architecture": "residual", "layers": 1, "languages": ["deu", "eng"]})
    with torch.no_grad():
        model.meaning[0].weight.copy_(t([2, 0], [1, 1]))
        model.meaning[0].bias.copy_(torch.tensor([0.0, -1.0]))
    m, l = model(t([1, 2]))
    assert m.tolist() == [[2.0, 2.0]] and l.tolist() == [[-1.0, 0.0]]