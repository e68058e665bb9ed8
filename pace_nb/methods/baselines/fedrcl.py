"""FedRCL (Seo et al., CVPR 2024): relaxed contrastive learning during local training.

Local loss: ``CE + β_w · mean_ℓ L_RCL(f_ℓ)`` over the GCN's layer features (the "layer-feature
adapter": ℓ ∈ {layer-1 hidden output, layer-2 output}, training nodes only), with

* supervised contrastive term (anchor i, positives P_i = same-class training nodes):
  ``−1/|P_i| Σ_{p∈P_i} log( exp(s_ip/τ) / Σ_{a≠i} exp(s_ia/τ) )``;
* divergence penalty on excessively similar same-class pairs (the "relaxation"):
  ``−log( exp(1/τ) / (exp(1/τ) + Σ_{j∈P_i, s_ij>λ} exp(s_ij/τ)) )``, weighted by β;

``s`` = cosine similarity. Defaults (released config): τ = 0.05, λ = 0.7, β = 1, weight 1.
Server: FedAvg. One-round adaptation: 100 local epochs from W0 with this objective, one
upload, one size-weighted return.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.nn.training import TrainStep
from pace_nb.methods.baselines.base import FedContext, federated_method
from pace_nb.methods.baselines.fedavg import FedAvg


def rcl_loss(feat: Tensor, y: Tensor, tau: float = 0.05, threshold: float = 0.7, beta: float = 1.0) -> Tensor:
    """Relaxed contrastive loss of features ``[n, d]`` with labels ``[n]`` (mean over anchors
    that have at least one positive)."""
    n = feat.shape[0]
    f = F.normalize(feat, dim=1)
    s = f @ f.t()
    eye = torch.eye(n, dtype=torch.bool, device=feat.device)
    pos = (y.view(-1, 1) == y.view(1, -1)) & ~eye
    logits = (s / tau).masked_fill(eye, float("-inf"))
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    npos = pos.sum(1)
    has = npos > 0
    if not bool(has.any()):
        return feat.sum() * 0.0
    scl = -(log_prob.masked_fill(~pos, 0.0).sum(1)[has] / npos[has])
    close = pos & (s > threshold)
    neg = torch.where(close, s / tau, torch.full_like(s, float("-inf")))
    self_logit = torch.full((n, 1), 1.0 / tau, device=feat.device, dtype=feat.dtype)
    dp = torch.logsumexp(torch.cat([self_logit, neg], dim=1), dim=1) - 1.0 / tau
    return (scl + beta * dp[has]).mean()


@federated_method
class FedRCL(FedAvg):
    """FedRCL: relaxed contrastive local objective, FedAvg server."""

    name = "fedrcl"
    label = "FedRCL"
    paper = "Seo et al. 2024, Relaxed contrastive learning for federated learning"

    @dataclass(frozen=True)
    class Config:
        tau: float = 0.05
        threshold: float = 0.7
        beta: float = 1.0
        weight: float = 1.0
        weighting: str = "nodes"

    def validate(self) -> None:
        super().validate()
        self._require("tau", self.cfg.tau > 0, "> 0")
        self._require("threshold", -1 <= self.cfg.threshold <= 1, "in [-1, 1]")
        self._require("beta", self.cfg.beta >= 0, ">= 0")
        self._require("weight", math.isfinite(self.cfg.weight) and self.cfg.weight >= 0, "a finite number >= 0")

    def plain_local(self, ctx) -> bool:
        return self.cfg.weight == 0

    def local_loss(self, step: TrainStep, ctx: FedContext) -> Tensor:
        total = 0.0
        for i, k in enumerate(step.clients):
            c = ctx.fg.clients[k]
            tm = c.train_mask.to(step.hidden[i].device)
            y = c.y.to(tm.device)[tm]
            layers = (step.hidden[i][tm], step.logits[i][tm])
            c_loss = sum(rcl_loss(f, y, self.cfg.tau, self.cfg.threshold, self.cfg.beta) for f in layers) / len(layers)
            total = total + c_loss
        return self.cfg.weight * total
