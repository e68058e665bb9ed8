"""FedProto (Tan et al., AAAI 2022): prototype exchange instead of model exchange.

Client k uploads hidden-layer class prototypes ``p_kc`` (mean eval-mode layer-1 output of its
training nodes of class c) and counts ``n_kc``. Server: ``g_c = Σ_k n_kc p_kc / Σ_k n_kc`` over
the clients that HOLD class c (OpenFGL averages zero vectors of absent classes in; we do not).
From the second round on, the local loss adds ``λ · MSE(h_v, g_{y_v})`` over training nodes
whose class has a global prototype. Models are never averaged: each receiver keeps its own
model (so one round of FedProto equals Local). Default λ = 1 (OpenFGL).
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.nn.gcn import gcn_forward
from pace_nb.nn.inference import _graph
from pace_nb.nn.training import TrainStep
from pace_nb.core.validation import Interval, param
from pace_nb.methods.baselines.base import FedContext, FederatedMethod
from pace_nb.methods.contract import register


def class_prototypes(h: Tensor, y: Tensor, num_classes: int) -> tuple[Tensor, Tensor]:
    """Per-class means ``[C, H]`` (zeros for absent classes) and counts ``[C]``."""
    counts = torch.bincount(y, minlength=num_classes).to(h.dtype)
    sums = torch.zeros(num_classes, h.shape[1], dtype=h.dtype, device=h.device).index_add_(0, y, h)
    return sums / counts.clamp_min(1).unsqueeze(1), counts


def aggregate_prototypes(protos: Tensor, counts: Tensor) -> tuple[Tensor, Tensor]:
    """Count-weighted mean over holders: ``protos [K, C, H]``, ``counts [K, C]`` → global
    ``[C, H]`` and a mask ``[C]`` of classes that some client holds."""
    total = counts.sum(0)
    g = torch.einsum("kc,kch->ch", counts.to(protos.dtype), protos) / total.clamp_min(1).unsqueeze(1).to(protos.dtype)
    return g, total > 0


@register
class FedProto(FederatedMethod):
    """FedProto: local models + count-weighted global class prototypes."""

    name = "fedproto"
    label = "FedProto"
    colour, marker = "#225522", "h"
    paper_rows = {"multiround": 4}  # its rows in the papers' tables
    paper = "Tan et al. 2022, FedProto: Federated prototype learning across heterogeneous clients"
    personalized = True
    shared_keys = ()

    @dataclass(frozen=True)
    class Config:
        lam: float = param(1.0, Interval(float, 0, None))


    def plain_local(self, ctx) -> bool:
        return ctx.round == 0 or self.cfg.lam == 0

    def local_loss(self, step: TrainStep, ctx: FedContext) -> Tensor:
        g, held = ctx.state["global_protos"], ctx.state["held"]
        total: Any = 0.0  # a tensor after the first model
        for i, (b, k) in enumerate(zip(step.models, step.clients, strict=True)):
            c = ctx.fg.clients[k]
            dev = step.hidden[i].device
            s = ctx.seed_index(b)
            tm = c.train_mask.to(dev)
            y = c.y.to(dev)
            use = tm & held[s].to(dev)[y]
            if bool(use.any()):
                total = total + F.mse_loss(step.hidden[i][use], g[s].to(dev)[y[use]])
        return self.cfg.lam * total

    @torch.no_grad()
    def upload(self, ctx, trained):
        protos, counts = [], []
        for b, k in enumerate(ctx.client_of):
            c = ctx.fg.clients[k]
            x, P = _graph(c, "cpu")
            _, h = gcn_forward({n: v[b] for n, v in trained.items()}, x, P, return_hidden=True)
            p, n = class_prototypes(h[c.train_mask], c.y[c.train_mask], ctx.fg.num_classes)
            protos.append(p)
            counts.append(n)
        return {"prototypes": torch.stack(protos), "counts": torch.stack(counts)}

    def aggregate(self, ctx, trained, stats):
        p, n = ctx.view(stats["prototypes"]), ctx.view(stats["counts"])
        out = [aggregate_prototypes(p[s], n[s]) for s in range(ctx.num_seeds)]
        ctx.state["global_protos"] = torch.stack([o[0] for o in out])
        ctx.state["held"] = torch.stack([o[1] for o in out])
        return {k: v.clone() for k, v in trained.items()}
