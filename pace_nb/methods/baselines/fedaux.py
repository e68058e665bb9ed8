"""FedAux-1R: the first personalized aggregate of FedAux (Zhuo, Zhan & Yu, NeurIPS 2025).

FedAux attaches a learnable auxiliary projection vector ``a`` (dimension = hidden width,
N(0, I) init shared through the global model) to each client's GNN: node embeddings ``h_v``
are scored ``s_v = cos(h_v, a)`` and smoothed with a Gaussian kernel on the 1-D scores,
``z_v = Σ_u κ(s_v, s_u) h_u / Σ_u κ(s_v, s_u)``, ``κ = exp(−(s_v − s_u)² / σ²)`` (their Eq. 3).
The server compares clients by their ``a`` only: ``S_ij = exp(10 · cos(a_i, a_j))``,
row-normalized, and returns ``Σ_j S_ij θ_j`` (weights, biases and a) to receiver i.

Adaptation to PACE's 2-layer GCN: ``h`` is the layer-1 output; the smoothed ``z`` feeds the
model's own second GCN layer as an auxiliary head, and the local loss is
``CE(GCN(x)) + CE(conv2(z))`` (FedAux's classifier on ``[h ‖ z]`` would change the
architecture), so ``a`` is trained by the auxiliary path and the deployed model is a plain GCN.
The kernel smoothing is computed exactly-in-float with a rank-(M+1) Taylor factorization of
``exp(2 s_v s_u / σ²)`` (no dense n × n kernel). FedAux-1R = one round: 100 local epochs from
W0 (+ a₀), one upload, the first personalized aggregate, no post-return training.
Defaults: σ = 1 (FedAux's parser), scale 10, auxiliary weight 1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.nn.gcn import effective_weight, propagation_matrix
from pace_nb.nn.training import TrainStep
from pace_nb.methods.baselines.base import FedContext, FederatedMethod, federated_method, mix
from pace_nb.methods.baselines.fedpub import similarity_weights

AUX_KEY = "aux"


def kernel_features(s: Tensor, sigma: float, order: int = 24) -> Tensor:
    """``φ(s) [n, M+1]`` with ``φ(s_v)·φ(s_u) = exp(−(s_v − s_u)²/σ²)`` up to the Taylor remainder
    of ``exp(2 s_v s_u / σ²)`` (|s| ≤ 1: remainder ≤ (2/σ²)^{M+1}/(M+1)!)."""
    m = torch.arange(order + 1, dtype=s.dtype, device=s.device)
    log_fact = torch.lgamma(m + 1)
    t = (math.sqrt(2.0) / sigma) * s.unsqueeze(1)
    base = torch.exp(-(s * s) / sigma**2).unsqueeze(1)
    return base * t.pow(m) * torch.exp(-0.5 * log_fact)


def kernel_smooth(h: Tensor, a: Tensor, sigma: float = 1.0, order: int | None = None) -> Tensor:
    """FedAux's kernel aggregation ``z = κ h / κ 1`` with ``κ_vu = exp(−(s_v − s_u)²/σ²)``,
    ``s = cos(h, a)`` — factorized, O(n · M · d)."""
    s = F.cosine_similarity(h, F.normalize(a, dim=0).unsqueeze(0), dim=-1)
    order = order if order is not None else max(24, int(math.ceil(12.0 / sigma**2)))
    phi = kernel_features(s, sigma, order)
    num = phi @ (phi.t() @ h)
    den = phi @ phi.sum(0)
    return num / den.unsqueeze(1)


@federated_method
class FedAux(FederatedMethod):
    """FedAux-1R: auxiliary-projection similarity → personalized aggregation (one round)."""

    name = "fedaux1r"
    aliases = ("fedaux", "fedaux-1r")
    label = "FedAux-1R"
    paper = "Zhuo et al. 2025, Personalized subgraph federated learning with differentiable auxiliary projections"
    personalized = True
    shared_keys = ("conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", AUX_KEY)

    @dataclass(frozen=True)
    class Config:
        sigma: float = 1.0
        norm_scale: float = 10.0
        aux_weight: float = 1.0

    def validate(self) -> None:
        self._require("sigma", math.isfinite(self.cfg.sigma) and self.cfg.sigma >= 0.5, "a finite number >= 0.5")
        self._require("norm_scale", math.isfinite(self.cfg.norm_scale) and self.cfg.norm_scale >= 0, "a finite number >= 0")
        self._require("aux_weight", math.isfinite(self.cfg.aux_weight) and self.cfg.aux_weight >= 0, "a finite number >= 0")

    def start_models(self, ctx, start):
        hidden = start["conv1.weight"].shape[1]
        aux = []
        for seed in ctx.seeds:
            g = torch.Generator().manual_seed(int(seed) + 31337)
            aux.append(torch.randn(hidden, generator=g))
        return {**start, AUX_KEY: torch.stack(aux).repeat_interleave(ctx.num_clients, dim=0)}

    def plain_local(self, ctx) -> bool:
        return False

    def prepare(self, ctx: FedContext) -> None:
        ctx.state["P"] = [propagation_matrix(c.edge_index, c.num_nodes) for c in ctx.fg.clients]

    def local_loss(self, step: TrainStep, ctx: FedContext) -> Tensor:
        total = 0.0
        for i, k in enumerate(step.clients):
            c = ctx.fg.clients[k]
            h = step.hidden[i]
            dev = h.device
            z = kernel_smooth(h, step.params[AUX_KEY][i], self.cfg.sigma)
            P = ctx.state["P"][k].to(dev)
            w2 = effective_weight({n: v[i] for n, v in step.params.items()}, 2)
            out = torch.sparse.mm(P, z @ w2.t()) + step.params["conv2.bias"][i]
            tm = c.train_mask.to(dev)
            total = total + F.cross_entropy(out[tm], c.y.to(dev)[tm])
        return self.cfg.aux_weight * total

    def aggregate(self, ctx, trained, stats):
        aux = ctx.view(trained[AUX_KEY])
        w = torch.stack([similarity_weights(aux[s], self.cfg.norm_scale) for s in range(ctx.num_seeds)])
        ctx.state["weights"] = w
        return self.with_private(ctx, mix(trained, w, ctx.num_seeds, ctx.num_clients, self.shared_keys), trained)
