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


def rcl_loss(feat: Tensor, y: Tensor, tau: float = 0.05, threshold: float = 0.7, topk_neg: int = 2,
             relax_weight: float = 1.0) -> Tensor:
    """Released FedRCL loss of features ``[n, d]`` with labels ``[n]``: mean over anchors of the
    top-k supervised term plus ``relax_weight`` × the thresholded relaxation term (module doc)."""
    n = feat.shape[0]
    if n == 0:
        return feat.sum() * 0.0
    f = F.normalize(feat, dim=1)
    s = f @ f.t()
    same = y.view(-1, 1) == y.view(1, -1)
    eye = torch.eye(n, dtype=torch.bool, device=feat.device)
    pos = s.masked_fill(~same, float("inf")).min(dim=1, keepdim=True).values
    neg = s.masked_fill(same, float("-inf")).topk(min(int(topk_neg), n), dim=1).values
    scl = torch.logsumexp(torch.cat([pos, neg], 1) / tau, dim=1) - pos.squeeze(1) / tau
    q = s.masked_fill(~same | eye, float("inf")).min(dim=1, keepdim=True).values
    q = torch.where(torch.isinf(q) | (q < threshold), torch.full_like(q, -1.0), q)
    self_sim = torch.diagonal(s).unsqueeze(1)
    relax = torch.logsumexp(torch.cat([self_sim, q], 1) / tau, dim=1) - self_sim.squeeze(1) / tau
    return scl.mean() + relax_weight * relax.mean()


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
        total: Any = 0.0  # a tensor after the first model
        for i, k in enumerate(step.clients):
            c = ctx.fg.clients[k]
            assert step.pre_hidden is not None, "FedRCL asks the trainer for pre-ReLU features"
            feat = step.pre_hidden[i]
            tm = c.train_mask.to(feat.device)
            total = total + rcl_loss(feat[tm], c.y.to(feat.device)[tm], self.cfg.tau, self.cfg.threshold,
                                     self.cfg.topk_neg, self.cfg.relax_weight)
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
