"""The loss terms of the disentanglers, one function per term, named as the papers name them.

Notation (shared by DREAM, MEAT, ORACLE, SEED and the intra/inter paper): a batch holds B
parallel pairs (s_i, t_i); `e_s`, `e_t` are the frozen encoder's embeddings (B, d); `m_*` are
meaning embeddings and `l_*` language embeddings; a `_neg` suffix marks the embedding of s'_i
(t'_i), a random other sentence of the same language drawn inside the batch. Every function
returns the term averaged over the batch (a scalar tensor).

Papers (plain text in ../shared/papers):
- DREAM: Tiyajamorn et al. 2021, Eqs. 1-11.
- MEAT: Kuroda et al. 2022, as summarised by ORACLE Sec. 3.2 (Eq. 4): L_R + L_CR + L_L + L_A.
- ORACLE: Ki et al. 2024, Eqs. 5-7 (L_IC, L_IS).
- SEED: Fukushima et al. 2025, Eqs. 3-6 (L_M, L_L, L_C).
- intra/inter: Nonomura et al., Eqs. 2-7 (L_intra = L_mean + L_lang, L_inter = L_cross + L_sep).
- FMDA: "Fine-grained Multilingual Disentangled Autoencoder" (../shared/papers/fmda-*.txt;
  its authors are not in that text), Sec. 3.2-3.5, Eqs. 1-5. Its
  terms read per-sentence parts (template tp, residual rs, language lang, meaning m) of the
  token-level model in model.py; the names follow the paper (Loss_lang, Loss_rec^utt,
  Loss_rec^tp, Loss_rec^rs and their -CL versions, Loss_con^tp, Loss_con^m).

Choices (where a paper leaves room):
- A term written for one sentence pair is averaged over the batch; a term written for "e"
  (DREAM's L_R, L_L^i) is applied to both sides and the two summed, as the paper's other
  terms (L_M^m, L_L^m) sum their s- and t-parts.
- MEAT's L_R, L_CR and L_L are not printed in any paper available here (ORACLE Table 1 and Eq. 4
  only name them). We take their forms from the ORACLE authors' released MEAT code
  (github.com/dayeonki/oracle, code/loss/meat.py), which writes each as a cosine embedding loss:
  L_R = (1 - phi(s_M + s_L, e_s)) + (1 - phi(t_M + t_L, e_t)); L_CR = (1 - phi(s_M + t_L, e_t)) +
  (1 - phi(t_M + s_L, e_s)), "reconstructing ... using semantic from the target and language
  embedding from the source, and vice versa" (ORACLE Sec. 3.2); L_L = max(0, phi(s_L, t_L)), the
  language embeddings of a pair's two languages apart. Cosine forms matter here: DREAM's squared
  error (1/d)||.||^2 on unit-length embeddings is ~1e-3, so next to L_A (~log K) it preserved
  nothing, and the meaning part we trained that way scored below raw on every task.
- MEAT's adversarial loss L_A: a language discriminator D reads the meaning embedding and is
  trained with cross-entropy to name its language (`discriminator_loss`); the extractor is
  trained to make D maximally uncertain: L_A = cross-entropy of D's prediction against the
  uniform distribution over languages (`adversarial_loss`). Bounded below (by log K), unlike the
  negated cross-entropy, so it cannot run away. The two are optimised in alternation.
- ORACLE's L_IC (Eq. 5) uses "pairwise cosine similarity" with j != i: we average the similarity
  of i to every other same-language sentence j of the batch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def _cos(a: Tensor, b: Tensor) -> Tensor:
    """Row-wise cosine similarity phi(a_i, b_i), shape (B,)."""
    return F.cosine_similarity(a, b, dim=-1, eps=1e-8)


# --- DREAM (Tiyajamorn et al. 2021) -------------------------------------------------------------

def reconstruction_loss(e: Tensor, m: Tensor, l: Tensor) -> Tensor:
    """L_R = (1/d) ||e - (m + l)||_2^2 (DREAM Eq. 2), batch mean."""
    return ((e - (m + l)) ** 2).mean(dim=-1).mean()


def meaning_parallel_loss(m_s: Tensor, m_t: Tensor) -> Tensor:
    """L_M^x = 1 - phi(s_M, t_M) (DREAM Eq. 6): meaning of a parallel pair alike."""
    return (1.0 - _cos(m_s, m_t)).mean()


def meaning_random_loss(m_s: Tensor, m_s_neg: Tensor, m_t: Tensor, m_t_neg: Tensor) -> Tensor:
    """L_M^m = max(0, phi(s_M, s'_M)) + max(0, phi(t_M, t'_M)) (DREAM Eq. 7)."""
    return (_cos(m_s, m_s_neg).clamp(min=0) + _cos(m_t, m_t_neg).clamp(min=0)).mean()


def language_embedding_loss(l_s: Tensor, l_s_neg: Tensor, l_t: Tensor, l_t_neg: Tensor) -> Tensor:
    """L_L^m = 2 - phi(s_L, s'_L) - phi(t_L, t'_L) (DREAM Eq. 9).

    The same formula is SEED's L_L (Eq. 5) and the intra/inter paper's L_lang (Eq. 4).
    """
    return (2.0 - _cos(l_s, l_s_neg) - _cos(l_t, l_t_neg)).mean()


def language_identification_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """L_L^i = -sum_j y_j log softmax(MLP_I(e_L))_j (DREAM Eqs. 10-11), batch mean."""
    return F.cross_entropy(logits, labels)


# --- MEAT (Kuroda et al. 2022, via ORACLE Sec. 3.2 and its authors' code; see Choices) ----------

def meat_reconstruction_loss(e_s: Tensor, e_t: Tensor, m_s: Tensor, m_t: Tensor, l_s: Tensor, l_t: Tensor) -> Tensor:
    """MEAT's L_R = (1 - phi(s_M + s_L, e_s)) + (1 - phi(t_M + t_L, e_t)) (ORACLE Eq. 4), batch mean."""
    return (2.0 - _cos(m_s + l_s, e_s) - _cos(m_t + l_t, e_t)).mean()


def cross_reconstruction_loss(e_s: Tensor, e_t: Tensor, m_s: Tensor, m_t: Tensor, l_s: Tensor, l_t: Tensor) -> Tensor:
    """L_CR = (1 - phi(s_M + t_L, e_t)) + (1 - phi(t_M + s_L, e_s)) (ORACLE Eq. 4), batch mean."""
    return (2.0 - _cos(m_s + l_t, e_t) - _cos(m_t + l_s, e_s)).mean()


def meat_language_loss(l_s: Tensor, l_t: Tensor) -> Tensor:
    """MEAT's L_L = max(0, phi(s_L, t_L)) (ORACLE Eq. 4): a pair's two language embeddings apart."""
    return _cos(l_s, l_t).clamp(min=0).mean()


def discriminator_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """The discriminator's own objective: cross-entropy naming the language of a meaning embedding."""
    return F.cross_entropy(logits, labels)


def adversarial_loss(logits: Tensor) -> Tensor:
    """L_A (ORACLE Eq. 4): cross-entropy of the discriminator's output against uniform (see Choices).

    = -(1/K) sum_k log softmax(logits)_k; minimal (log K) when D cannot tell the languages apart.
    """
    return (-F.log_softmax(logits, dim=-1).mean(dim=-1)).mean()


# --- ORACLE (Ki et al. 2024) --------------------------------------------------------------------

def _mean_similarity_to_others(x: Tensor) -> Tensor:
    """For each row i: mean over j != i of phi(x_i, x_j), shape (B,). Needs B >= 2."""
    xn = F.normalize(x, dim=-1, eps=1e-8)
    sims = xn @ xn.T
    b = x.shape[0]
    return (sims.sum(dim=1) - sims.diagonal()) / (b - 1)


def intra_class_clustering_loss(l_s: Tensor, l_t: Tensor) -> Tensor:
    """L_IC = (1/N) sum_i (2 - phi(s_L^i, s_L^j) - phi(t_L^i, t_L^j)), j != i (ORACLE Eq. 5).

    Each side of the batch is one language (see trainer), so all j != i are same-language.
    """
    return (2.0 - _mean_similarity_to_others(l_s) - _mean_similarity_to_others(l_t)).mean()


def inter_class_separation_loss(m_s: Tensor, l_s: Tensor, m_t: Tensor, l_t: Tensor) -> Tensor:
    """L_IS = (1/N) sum_i max(0, phi(s_M^i, s_L^i)) + max(0, phi(t_M^i, t_L^i)) (ORACLE Eq. 6).

    The same formula is the first line of SEED's L_C (Eq. 6) and the intra/inter paper's L_sep (Eq. 7).
    """
    return (_cos(m_s, l_s).clamp(min=0) + _cos(m_t, l_t).clamp(min=0)).mean()


# --- SEED (Fukushima et al. 2025) and its intra/inter split (Nonomura et al.) -------------------

def seed_meaning_loss(m_s: Tensor, m_t: Tensor, m_s_neg: Tensor, m_t_neg: Tensor) -> Tensor:
    """L_M = 2(1 - cos(s_M, t_M)) + max(0, cos(s_M, s'_M)) + max(0, cos(t_M, t'_M)) (SEED Eq. 4).

    Identical to L_mean of the intra/inter paper (Eq. 3).
    """
    return (
        2.0 * (1.0 - _cos(m_s, m_t)) + _cos(m_s, m_s_neg).clamp(min=0) + _cos(m_t, m_t_neg).clamp(min=0)
    ).mean()


def seed_cross_loss(
    e_s: Tensor, e_t: Tensor, m_s: Tensor, m_t: Tensor, l_s: Tensor, l_t: Tensor, l_s_neg: Tensor, l_t_neg: Tensor
) -> Tensor:
    """Lines 2-3 of SEED's L_C (Eq. 6), = L_cross of the intra/inter paper (Eq. 6):

    2 - cos(s, s_M + s'_L) - cos(t, t_M + t'_L) + 2 - cos(s, t_M + s_L) - cos(t, s_M + t_L).
    """
    return (
        4.0
        - _cos(e_s, m_s + l_s_neg)
        - _cos(e_t, m_t + l_t_neg)
        - _cos(e_s, m_t + l_s)
        - _cos(e_t, m_s + l_t)
    ).mean()


def seed_combined_loss(
    e_s: Tensor, e_t: Tensor, m_s: Tensor, m_t: Tensor, l_s: Tensor, l_t: Tensor, l_s_neg: Tensor, l_t_neg: Tensor
) -> Tensor:
    """L_C (SEED Eq. 6) = separation (line 1) + cross-reconstruction by cosine (lines 2-3)."""
    return inter_class_separation_loss(m_s, l_s, m_t, l_t) + seed_cross_loss(
        e_s, e_t, m_s, m_t, l_s, l_t, l_s_neg, l_t_neg
    )


# --- FMDA (token-level model in model.py) ------------------------------------------

def fmda_language_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Loss_lang = CrossEntropy(P, L) (FMDA Sec. 3.2), batch mean."""
    return F.cross_entropy(logits, labels)


def fmda_utterance_reconstruction_loss(reconstruction: Tensor, emb_utt: Tensor) -> Tensor:
    """Loss_rec^utt = MSE(MLP(emb_lang + emb_tp + emb_rs), emb_utt) (FMDA Sec. 3.3).

    MSE is the mean over rows and dimensions. `emb_utt` is the encoder's pooled sentence vector
    (see fmda_trainer: the paper's [CLS] vector is XLM-R's sentence embedding).
    """
    return F.mse_loss(reconstruction, emb_utt)


def fmda_part_reconstruction_loss(part: Tensor, lang: Tensor, target: Tensor, has_target: Tensor) -> tuple[Tensor, int]:
    """MSE(emb_part + emb_lang, emb_part^Tgt) over the rows that have a target (FMDA Eqs. 1-2).

    Same-language (`lang` of the same utterance): Loss_rec^tpL1 (Eq. 1), Loss_rec^rsL1; with the
    language embedding of the parallel utterance and ITS target: the cross-lingual Loss_rec^tpL1-CL
    (Eq. 2), Loss_rec^rsL1-CL. Rows without a target (no slot annotation) are left out; returns
    (loss, rows used), the loss 0 without gradient when no row has a target.
    """
    rows = has_target.bool()
    n = int(rows.sum())
    if n == 0:
        return torch.zeros((), device=part.device), 0
    return F.mse_loss(part[rows] + lang[rows], target[rows]), n


def fmda_contrastive_loss(x_l1: Tensor, x_l2: Tensor, x_l1_neg: Tensor, x_l2_neg: Tensor, *,
                          form: str = "clamped") -> Tensor:
    """Loss_con^tp on template embeddings (FMDA Eq. 3), Loss_con^m on meaning embeddings (Eq. 4).

    form "paper": - Cos(x^L1, x^L2) + Cos(x^L1, x^L1_neg) + Cos(x^L2, x^L2_neg), batch mean, the
    equations as printed.

    form "clamped" (the default): a deliberate deviation from the equations as printed, in two
    points, measured below; the printed form stays one option away (`--fmda-contrastive paper`):
    - each negative cosine is clamped at 0, max(0, Cos(x, x_neg)), as DREAM's Eq. 7 (whose
      hyperparameters FMDA reuses). Unclamped, the loss rewards pushing negatives to cosine -1;
      with negatives drawn from a BLEU pool of a few hundred utterances (en-US 172, de-DE 315),
      the model parks the pool opposite everything else instead of learning meaning;
    - besides the pool negative, every row also takes the previous row of the batch (cyclically)
      as a negative (in-batch, as DREAM draws its negatives), clamped the same way. The pool alone
      is too small a sample of "different meaning".
    Measured on EN-DE meaning retrieval (2,000 train rows, me5-small, test acc@1 en->de / de->en;
    raw 68.8 / 74.4): paper 41-49 and falling with epochs; clamped, pool only 60-68 and falling;
    clamped, pool + in-batch 73-74 (notes/fmda_table2.md). Needs B >= 2 for the in-batch part.
    """
    neg = (_cos(x_l1, x_l1_neg), _cos(x_l2, x_l2_neg))
    if form == "paper":
        return (-_cos(x_l1, x_l2) + neg[0] + neg[1]).mean()
    if form != "clamped":
        raise ValueError(f"unknown contrastive form {form!r} (clamped or paper)")
    if x_l1.shape[0] < 2:
        raise ValueError("the clamped contrastive loss needs a batch of >= 2 rows (in-batch negatives)")
    in_batch = (_cos(x_l1, x_l1.roll(1, dims=0)), _cos(x_l2, x_l2.roll(1, dims=0)))
    return (-_cos(x_l1, x_l2) + sum(c.clamp(min=0) for c in neg + in_batch)).mean()
