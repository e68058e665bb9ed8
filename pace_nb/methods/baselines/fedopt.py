"""FedOpt / FedAdam (Reddi et al., ICLR 2021): adaptive server optimizer.

Server keeps a global model x and Adam moments per seed; the pseudo-gradient is the
size-weighted mean client update ``Δ = Σ_k p_k (θ_k − x)``;
``m ← β₁ m + (1−β₁) Δ``, ``v ← β₂ v + (1−β₂) Δ²``, ``x ← x + η m / (√v + τ)`` (Algorithm 2,
no bias correction). Defaults (paper's FedAdam): η = 0.01, β₁ = 0.9, β₂ = 0.99, τ = 1e-3.
Clients train plain CE (one round reuses the Local models).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from pace_nb.core.validation import Interval, Options, param
from pace_nb.methods.baselines.base import broadcast, per_seed, size_weights
from pace_nb.methods.baselines.fedavg import WEIGHTINGS, FedAvg, client_sizes
from pace_nb.methods.contract import register


def adam_server_step(x: Tensor, delta: Tensor, m: Tensor, v: Tensor, lr: float = 0.01, beta1: float = 0.9,
                     beta2: float = 0.99, tau: float = 1e-3) -> tuple[Tensor, Tensor, Tensor]:
    """One FedAdam server update → ``(x_new, m_new, v_new)``."""
    m = beta1 * m + (1 - beta1) * delta
    v = beta2 * v + (1 - beta2) * delta * delta
    return x + lr * m / (v.sqrt() + tau), m, v


@register
class FedAdam(FedAvg):
    """FedAdam: Adam on the server with the mean client update as pseudo-gradient."""

    name = "fedadam"
    aliases = ("fedopt",)
    label = "FedAdam"
    colour, marker = "#222255", "*"
    paper_rows = {"multiround": 2}  # its rows in the papers' tables
    labels = {"spear_comparison": "FedOPT (FedAdam)"}  # SPEAR prints FedOPT
    paper = "Reddi et al. 2021, Adaptive federated optimization"

    @dataclass(frozen=True)
    class Config:
        server_lr: float = param(0.01, Interval(float, 0, None, closed="neither"))
        beta1: float = param(0.9, Interval(float, 0, 1, closed="left"))
        beta2: float = param(0.99, Interval(float, 0, 1, closed="left"))
        tau: float = param(1e-3, Interval(float, 0, None, closed="neither"))
        weighting: str = param("nodes", Options(WEIGHTINGS))


    def aggregate(self, ctx, trained, stats):
        p = size_weights(client_sizes(ctx, self.cfg.weighting))
        mom = ctx.state.setdefault("adam", {})
        out = {}
        for key in self.shared_keys:
            x = per_seed(ctx.start[key], ctx.num_seeds, ctx.num_clients)[:, 0]
            th = per_seed(trained[key], ctx.num_seeds, ctx.num_clients)
            delta = torch.einsum("k,sk...->s...", p.to(th.dtype), th) - x
            m, v = mom.get(key, (torch.zeros_like(x), torch.zeros_like(x)))
            out[key], m, v = adam_server_step(x, delta, m, v, self.cfg.server_lr, self.cfg.beta1, self.cfg.beta2,
                                              self.cfg.tau)
            mom[key] = (m, v)
        return self.with_private(ctx, broadcast(out, ctx.num_seeds, ctx.num_clients), trained)
