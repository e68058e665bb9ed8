"""FedSD2C (Zhang, Liu and Wang, NeurIPS 2024, "One-shot federated learning via synthetic
distiller-distillate communication").

Kept: clients send **condensed synthetic data** ("distillates") instead of model parameters,
once. Each client uses its locally trained model (the "distiller"; here its matched Local GCN)
to (i) select a core-set of its most informative samples — the paper's V-information
criterion: the samples whose label the trained model predicts best relative to the label
prior, ``log p_θ(y|x) − log p(y)`` — and (ii) distil them: synthetic samples initialised from
the core-set are optimised so that the distiller's features of the synthetic samples match
those of the real samples of each class (distribution matching of the model's features,
Zhao & Bilen 2023, the paper's distillate synthesis). The server trains the global model on
the union of the distillates.

Adapted to graphs: a sample is a node; the real features are the distiller's layer-1 hidden
representation on the client's own subgraph (neighbourhood-aware), the synthetic nodes are
processed without edges (self loop only), so the distillate carries its neighbourhood's
information in its own features. ``per_class`` synthetic nodes per held class (at most the
class's training count). The server joins the distillates by a cosine kNN graph (``knn``)
and trains the global GCN on it. Dropped: the paper's Fourier-domain perturbation of the
distillates (a privacy add-on that does not change what is communicated). ``init="noise"``
starts the distillates from Gaussian noise instead of the core-set (used to show that the
distillation itself carries the information).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.core.validation import Interval, Options
from pace_nb.methods.oneshot.base import OneShotMethod, SyntheticGraph, adam_steps, knn_graph, label_counts, oneshot_method
from pace_nb.nn.gcn import WEIGHT_KEYS, gcn_forward, propagation_matrix


def v_information(logits: Tensor, y: Tensor, prior: Tensor) -> Tensor:
    """Pointwise V-information of each sample: ``log p_θ(y_i | x_i) − log p(y_i)``."""
    return F.log_softmax(logits, 1).gather(1, y.view(-1, 1)).squeeze(1) - prior.clamp_min(1e-12).log()[y]


def dm_loss(real: Tensor, y_real: Tensor, syn: Tensor, y_syn: Tensor, num_classes: int) -> Tensor:
    """Distribution matching: ``Σ_c ‖mean(real_c) − mean(syn_c)‖²`` over classes present in both."""
    loss = real.new_zeros(())
    for c in range(num_classes):
        r, s = real[y_real == c], syn[y_syn == c]
        if len(r) and len(s):
            loss = loss + (r.mean(0) - s.mean(0)).pow(2).sum()
    return loss


def hidden(params: dict, x: Tensor, P: Tensor) -> Tensor:
    return gcn_forward(params, x, P, return_hidden=True)[1]


@oneshot_method
class FedSD2C(OneShotMethod):
    """FedSD2C: V-information core-set + feature-matching distillates uploaded instead of models."""

    name = "fedsd2c"
    label = "FedSD2C"
    groups = {"oneshot": 2}  # row positions in the papers' tables
    paper = "Zhang et al. 2024, One-shot federated learning via synthetic distiller-distillate communication"
    uses_local = True
    _parameter_constraints = {
        "per_class": [Interval(int, 1, 100_000)], "steps": [Interval(int, 0, 100_000)],
        "lr": [Interval(float, 0.0, 10.0, closed="right")], "init": [Options(("coreset", "noise"))],
        "knn": [Interval(int, 0, 1000)],
    }

    @dataclass(frozen=True)
    class Config:
        per_class: int = 10
        steps: int = 200
        lr: float = 0.01
        init: str = "coreset"
        knn: int = 5

    def client_message(self, ctx, k, client):
        c, cfg = ctx.num_classes, self.cfg
        theta = {n: ctx.local[k][n] for n in WEIGHT_KEYS}
        P = propagation_matrix(client.edge_index, client.num_nodes)
        x, y = client.x.float(), client.y.long()
        tr = torch.nonzero(client.train_mask).flatten()
        counts = label_counts(client, c)
        with torch.no_grad():
            vi = v_information(gcn_forward(theta, x, P)[tr], y[tr], counts / counts.sum())
            h_real = hidden(theta, x, P)[tr]
        picks = []
        for cls in range(c):
            idx = tr[y[tr] == cls]
            if len(idx):
                order = torch.argsort(vi[y[tr] == cls], descending=True, stable=True)
                picks.append(idx[order[:min(cfg.per_class, len(idx))]])
        picks = torch.cat(picks)
        y_syn = y[picks]
        if cfg.init == "coreset":
            x0 = x[picks].clone()
        else:
            x0 = x.mean() + x.std() * torch.randn(len(picks), x.shape[1], generator=ctx.generator(k))
        x_syn = x0.requires_grad_(True)
        eye = propagation_matrix(torch.empty(2, 0, dtype=torch.long), len(picks))  # self loops only
        theta_d = {n: v.detach() for n, v in theta.items()}
        adam_steps([x_syn], lambda: dm_loss(h_real, y[tr], hidden(theta_d, x_syn, eye), y_syn, c), cfg.steps, cfg.lr)
        return {"x": x_syn.detach(), "y": y_syn.float(), "counts": counts}

    def synthesize(self, ctx, messages):
        x = torch.cat([m["x"] for m in messages])
        y = torch.cat([m["y"] for m in messages]).round().long()
        return SyntheticGraph(x, y, knn_graph(x, self.cfg.knn))
