"""MOON (Li, He & Song, CVPR 2021): model-contrastive federated learning.

From the second round on, the local loss adds
``μ · mean_v −log( e^{cos(z_v, z^g_v)/τ} / (e^{cos(z_v, z^g_v)/τ} + e^{cos(z_v, z^p_v)/τ}) )``
with z the layer-1 representation of the model being trained, z^g that of the received
global model and z^p that of the client's previous local model (eval mode, fixed during the
round; all nodes of the client, as OpenFGL). Server: FedAvg. In round 1 the global and the
"previous" model coincide, so the term is constant and MOON equals FedAvg. Defaults
(OpenFGL / MOON paper): μ = 1, τ = 0.5.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.nn.training import TrainStep, client_hidden
from pace_nb.core.validation import Interval, Options, param
from pace_nb.methods.baselines.base import FedContext
from pace_nb.methods.baselines.fedavg import WEIGHTINGS, FedAvg
from pace_nb.methods.contract import register


def moon_loss(z: Tensor, z_global: Tensor, z_prev: Tensor, tau: float = 0.5) -> Tensor:
    """Model-contrastive loss (MOON Eq. 3), mean over rows."""
    pos = F.cosine_similarity(z, z_global, dim=-1) / tau
    neg = F.cosine_similarity(z, z_prev, dim=-1) / tau
    return (torch.logsumexp(torch.stack([pos, neg], dim=-1), dim=-1) - pos).mean()


@register
class MOON(FedAvg):
    """MOON: model-contrastive local term, FedAvg server."""

    name = "moon"
    label = "MOON"
    colour, marker = "#AA4499", "d"
    paper_rows = {"multiround": 3}  # its rows in the papers' tables
    paper = "Li et al. 2021, Model-contrastive federated learning"

    @dataclass(frozen=True)
    class Config:
        mu: float = param(1.0, Interval(float, 0, None))
        tau: float = param(0.5, Interval(float, 0, None, closed="neither"))
        weighting: str = param("nodes", Options(WEIGHTINGS))


    def plain_local(self, ctx) -> bool:
        return ctx.round == 0 or self.cfg.mu == 0

    def _references(self, ctx: FedContext):
        key = ("moon_refs", ctx.round)
        if key not in ctx.state:
            fg = ctx.fg
            assert ctx.start is not None, "references are built during a round"
            ref = []
            for b, k in enumerate(ctx.client_of):
                g = client_hidden({n: v[b] for n, v in ctx.start.items()}, fg.clients[k])
                p = client_hidden({n: v[b] for n, v in ctx.state["prev_local"].items()}, fg.clients[k])
                ref.append((g, p))
            ctx.state = {k2: v for k2, v in ctx.state.items() if not (isinstance(k2, tuple) and k2[0] == "moon_refs")}
            ctx.state[key] = ref
        return ctx.state[key]

    def local_loss(self, step: TrainStep, ctx: FedContext) -> Tensor:
        refs = self._references(ctx)
        total: Any = 0.0  # a tensor after the first model
        for i, b in enumerate(step.models):
            g, p = refs[b]
            dev = step.hidden[i].device
            total = total + moon_loss(step.hidden[i], g.to(dev), p.to(dev), self.cfg.tau)
        return self.cfg.mu * total

    def after_round(self, ctx, trained, returned) -> None:
        ctx.state["prev_local"] = {k: v.detach().clone() for k, v in trained.items()}
