"""FedRCL (Seo et al., CVPR 2024): relaxed contrastive learning during local training — the
released loss (``skynbe/FedRCL``, ``configs/client/fedrcl.yaml``).

Local loss ``CE + w · (L_SCL + L_relax)`` on the **pre-ReLU layer-1 output** (released
``feature_relu: False``; the GCN has one hidden layer), training nodes only, ``s`` = cosine
similarity, τ = 0.05. For every anchor i:

* **supervised term** (top-k mining): the single hardest positive ``p_i = min_{j: y_j = y_i} s_ij``
  (self included, so an anchor alone in its class has p_i = s_ii) against the two most
  similar other-class samples ``n_i1, n_i2``:
  ``L_SCL,i = −log softmax([p_i, n_i1, n_i2]/τ)₀`` (missing negatives are dropped);
* **relaxation** (``intra_class_thresholding``): the single least-similar same-class sample
  ``q_i = min_{j ≠ i, y_j = y_i} s_ij`` is pushed away only if ``q_i ≥ 0.7`` (else it is
  replaced by −1, as released): ``L_relax,i = −log softmax([s_ii, q_i]/τ)₀``;

both averaged over the anchors, weights 1 and 1. Server: FedAvg. One-round adaptation: 100
local epochs from W0 with this objective (Adam as every matched control; the released
SGD, gradient clipping and multi-block branches do not apply to a 2-layer GCN), one upload,
one size-weighted return.

Each run records in its params ``pred_entropy``: per seed, the entropy of the returned model's
predicted-class shares over every node of every client's subgraph, over ``log C``
(:func:`~pace_nb.methods.metrics.predicted_class_entropy`; 0 = one class for every node, a
majority-class-level predictor; no labels read), so a row that scores at the majority-class level
can be told from one that does not.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.core.validation import Interval, Options, param
from pace_nb.nn.training import TrainStep
from pace_nb.methods.baselines.base import FedContext
from pace_nb.methods.baselines.fedavg import WEIGHTINGS, FedAvg
from pace_nb.methods.contract import register
from pace_nb.methods.metrics import predicted_class_entropy


def class_masks(y: Tensor) -> tuple[Tensor, Tensor]:
    """``(same, not_other)`` [n, n] of labels ``y``: same class; and NOT (same class, another sample) —
    the entries the relaxation's minimum skips. They depend on the labels alone, so a client builds them once."""
    same = y.view(-1, 1) == y.view(1, -1)
    return same, ~same | torch.eye(y.shape[0], dtype=torch.bool, device=y.device)


def rcl_loss(feat: Tensor, y: Tensor, tau: float = 0.05, threshold: float = 0.7, topk_neg: int = 2,
             relax_weight: float = 1.0, masks: tuple[Tensor, Tensor] | None = None) -> Tensor:
    """Released FedRCL loss of features ``[..., n, d]`` (leading dims: models sharing the labels ``[n]``)
    — the mean over anchors of the top-k supervised term plus ``relax_weight`` × the thresholded
    relaxation term (module doc); shape ``feat.shape[:-2]``.

    The similarities are compared without autograd and only the selected pairs (hardest positive,
    top-k negatives, least-similar other) are recomputed as row dot products with gradient: the
    value and gradient of a min/top-k are those of the entries it selects, so the loss and its
    gradient are the dense formulation's at O(n·d) autograd memory instead of O(n²). ``masks``:
    :func:`class_masks` of ``y``, when the caller keeps them."""
    n = feat.shape[-2]
    if n == 0:
        return feat.sum((-2, -1)) * 0.0
    f = F.normalize(feat, dim=-1)
    with torch.no_grad():
        s = f @ f.transpose(-1, -2)
        same, not_other = class_masks(y) if masks is None else masks
        d = torch.diagonal(s, dim1=-2, dim2=-1).clone()
        q_val, q_idx = torch.where(not_other, float("inf"), s).min(dim=-1)
        neg_val, neg_idx = s.masked_fill_(same, float("-inf")).topk(min(int(topk_neg), n), dim=-1)  # s is spent
        keep_q = torch.isfinite(q_val) & (q_val >= threshold)
        # the hardest positive (self included) is the first index of min(s_ii, q_i): self, q's index, or on a tie the lower one
        me = torch.arange(n, device=feat.device).expand_as(q_idx)
        pos_idx = torch.where(q_val < d, q_idx, torch.where(q_val == d, torch.minimum(q_idx, me), me))
        lead = f.shape[:-2].numel()
        base = (torch.arange(lead, device=feat.device) * n).view(*f.shape[:-2], 1)  # row offset of each model
    rows = f.reshape(lead * n, f.shape[-1])

    def dots(idx: Tensor) -> Tensor:  # f_i · f_idx[i] (idx [..., n] or [..., n, k]): the picked rows by index_select
        wide = idx.dim() > f.dim() - 1
        flat = idx.flatten(-2) if wide else idx
        picked = rows.index_select(0, (flat + base).view(-1))
        if wide:
            return (f.unsqueeze(-2) * picked.view(*idx.shape, f.shape[-1])).sum(-1)
        return (f * picked.view(f.shape)).sum(-1)

    pos = dots(pos_idx)
    neg = torch.where(torch.isinf(neg_val), neg_val, dots(neg_idx))  # a missing negative drops out
    scl = torch.logsumexp(torch.cat([pos.unsqueeze(-1), neg], -1) / tau, dim=-1) - pos / tau
    self_sim = (f * f).sum(-1)
    q = torch.where(keep_q, dots(q_idx), torch.full_like(self_sim, -1.0))
    relax = torch.logsumexp(torch.stack([self_sim, q], -1) / tau, dim=-1) - self_sim / tau
    return scl.mean(-1) + relax_weight * relax.mean(-1)


@register
class FedRCL(FedAvg):
    """FedRCL: relaxed contrastive local objective, FedAvg server."""

    name = "fedrcl"
    label = "FedRCL"
    colour, marker = "#EE6677", ">"
    paper_rows = {"pace_control": 3}  # its rows in the papers' tables
    paper = "Seo et al. 2024, Relaxed contrastive learning for federated learning"

    @dataclass(frozen=True)
    class Config:
        tau: float = param(0.05, Interval(float, 0, None, closed="neither"))
        threshold: float = param(0.7, Interval(float, -1, 1))
        topk_neg: int = param(2, Interval(int, 1, None))
        relax_weight: float = param(1.0, Interval(float, 0, None))  # not "beta": that name is the Dirichlet β setting key of every row
        weight: float = param(1.0, Interval(float, 0, None))
        weighting: str = param("nodes", Options(WEIGHTINGS))


    def plain_local(self, ctx) -> bool:
        return self.cfg.weight == 0

    def local_loss(self, step: TrainStep, ctx: FedContext) -> Tensor:
        assert step.pre_hidden is not None, "FedRCL asks the trainer for pre-ReLU features"
        total: Any = 0.0  # a tensor after the first client
        for k, pos in step.by_client():  # the models of one client share its labels: one batched loss
            c = ctx.fg.clients[k]
            dev = step.pre_hidden[pos[0]].device
            tm = c.train_mask.to(dev)
            feat = torch.stack([step.pre_hidden[i][tm] for i in pos])
            y = c.y.to(dev)[tm]
            masks = ctx.state.setdefault("class_masks", {})
            if k not in masks:
                masks[k] = class_masks(y)
            total = total + rcl_loss(feat, y, self.cfg.tau, self.cfg.threshold, self.cfg.topk_neg,
                                     self.cfg.relax_weight, masks[k]).sum()
        return self.cfg.weight * total

    @torch.no_grad()
    def after_round(self, ctx: FedContext, trained, returned) -> None:
        if ctx.round != ctx.rounds - 1:
            return
        from pace_nb.nn.training import batched_logits

        k_n, ent = ctx.num_clients, []
        for s in range(ctx.num_seeds):
            models = {n: v[s * k_n:(s + 1) * k_n] for n, v in returned.items()}
            logits = batched_logits(models, ctx.fg.clients, list(range(k_n)), device=ctx.device)
            pred = torch.cat([z.argmax(-1) for z in logits])
            ent.append(round(predicted_class_entropy(pred, ctx.fg.num_classes), 6))
        ctx.state["pred_entropy"] = ent

    def diagnostics(self, ctx: FedContext) -> dict:
        """``pred_entropy[s]``: the normalised predicted-class entropy of seed s's returned model (module doc)."""
        return {"pred_entropy": ctx.state["pred_entropy"]} if "pred_entropy" in ctx.state else {}
