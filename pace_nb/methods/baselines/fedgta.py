"""FedGTA (Li et al., VLDB 2024): topology-aware personalized averaging.

Client (after local training): soft labels ``softmax(z)`` of its model are propagated by
label propagation (5 steps, α = 0.5, seeded on the training nodes), training rows are reset
to their one-hot labels, and the client uploads
* the **LP moments**: raw and central moments of orders 1..10 over nodes, per class (hybrid);
* a **confidence**: degree-weighted negative entropy of the temperature-20 softened
  propagated labels, ``Σ_v deg_v (C/e + Σ_c p_vc log p_vc)``.
Server: for receiver i, the clients j whose moment vectors have ``cos(m_i, m_j) > 0.5``
(always including i) are averaged with weights ``conf_j / Σ conf``.

One-round adaptation: plain local training (Local models reused), one upload, one
personalized return. Defaults follow OpenFGL's config (prop_steps 5, lp_alpha 0.5,
temperature 20, num_moments 10, hybrid moments, accept_alpha 0.5).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn.models import LabelPropagation
from torch_geometric.utils import degree

from pace_nb.nn.training import batched_logits
from pace_nb.core.validation import Interval, Options, param
from pace_nb.methods.baselines.base import FederatedMethod, mix
from pace_nb.methods.contract import register

MOMENT_TYPES = ("raw", "central", "hybrid")


def moments(x: Tensor, num_moments: int = 10, kind: str = "hybrid") -> Tensor:
    """Moments of orders 1..M over nodes (dim 0), per column: raw ``mean(x^p)``, central
    ``mean((x − mean x)^p)``, or both stacked (hybrid) → ``[M or 2M, C]``."""
    raw = torch.stack([x.pow(p).mean(0) for p in range(1, num_moments + 1)])
    cen = torch.stack([(x - x.mean(0, keepdim=True)).pow(p).mean(0) for p in range(1, num_moments + 1)])
    return {"raw": raw, "central": cen, "hybrid": torch.cat([raw, cen])}[kind]


def confidence(p: Tensor, deg: Tensor, eps: float = 1e-8) -> Tensor:
    """FedGTA's aggregation weight: ``Σ_v deg_v · C/e + Σ_v deg_v Σ_c p_vc log(p_vc + eps)``."""
    deg = deg.to(p.dtype)
    return deg.sum() * p.shape[1] * math.exp(-1) + (deg * (p * torch.log(p + eps)).sum(1)).sum()


def client_statistics(logits: Tensor, edge_index: Tensor, y: Tensor, train_mask: Tensor, num_classes: int,
                      prop_steps: int = 5, lp_alpha: float = 0.5, temperature: float = 20.0,
                      num_moments: int = 10, kind: str = "hybrid") -> tuple[Tensor, Tensor]:
    """(moment vector, confidence) of one client from its model's eval logits."""
    soft = F.softmax(logits.detach().double(), dim=1)
    out = LabelPropagation(num_layers=prop_steps, alpha=lp_alpha)(soft, edge_index, mask=train_mask)
    onehot = F.one_hot(y[train_mask], num_classes).to(out.dtype)
    raw = F.softmax(out, dim=1)
    dis = F.softmax(out / temperature, dim=1)
    raw[train_mask] = onehot
    dis[train_mask] = onehot
    n = logits.shape[0]
    deg = degree(edge_index[0], n) + degree(edge_index[1], n)
    return moments(raw, num_moments, kind).reshape(-1), confidence(dis, deg)


def accept_weights(mom: Tensor, conf: Tensor, threshold: float = 0.5) -> Tensor:
    """``W[i, j] ∝ conf_j · [cos(m_i, m_j) > threshold]`` with the diagonal always accepted."""
    m = F.normalize(mom.double(), dim=-1)
    cos = m @ m.transpose(-1, -2)
    accept = (cos > threshold) | torch.eye(cos.shape[-1], dtype=torch.bool)
    w = accept.double() * conf.double().unsqueeze(-2)
    return w / w.sum(-1, keepdim=True)


@register
class FedGTA(FederatedMethod):
    """FedGTA: LP moments + confidence → personalized aggregation."""

    name = "fedgta"
    label = "FedGTA"
    colour, marker = "#DDCC77", "X"
    paper_rows = {"pace_control": 6, "multiround": 6}  # its rows in the papers' tables
    paper = "Li et al. 2024, FedGTA: Topology-aware averaging for federated graph learning"
    personalized = True

    @dataclass(frozen=True)
    class Config:
        prop_steps: int = param(5, Interval(int, 1, None))
        lp_alpha: float = param(0.5, Interval(float, 0, 1))
        temperature: float = param(20.0, Interval(float, 0, None, closed="neither"))
        num_moments: int = param(10, Interval(int, 1, None))
        moment_type: str = param("hybrid", Options(MOMENT_TYPES))
        accept_alpha: float = param(0.5, Interval(float, -1, 1))


    @torch.no_grad()
    def upload(self, ctx, trained):
        fg, c = ctx.fg, self.cfg
        logits = batched_logits(trained, fg.clients, ctx.client_of, device=ctx.device)
        moms, confs = [], []
        for b, z in enumerate(logits):
            cl = fg.clients[ctx.client_of[b]]
            m, q = client_statistics(z, cl.edge_index, cl.y, cl.train_mask, fg.num_classes, c.prop_steps,
                                     c.lp_alpha, c.temperature, c.num_moments, c.moment_type)
            moms.append(m)
            confs.append(q)
        return {"moments": torch.stack(moms), "confidence": torch.stack(confs)}

    def aggregate(self, ctx, trained, stats):
        mom, conf = ctx.view(stats["moments"]), ctx.view(stats["confidence"])
        if bool((conf <= 0).any()):
            conf = conf.clamp_min(1e-12)
        w = torch.stack([accept_weights(mom[s], conf[s], self.cfg.accept_alpha) for s in range(ctx.num_seeds)])
        ctx.state["weights"] = w
        return self.with_private(ctx, mix(trained, w, ctx.num_seeds, ctx.num_clients, self.shared_keys), trained)
