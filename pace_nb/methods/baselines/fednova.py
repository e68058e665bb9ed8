"""FedNova (Wang et al., NeurIPS 2020): normalized averaging.

Client k reports its cumulative update ``Δ_k = W_k − W_g`` and its normalizing factor
``‖a_k‖₁``; for (full-batch) local GD ``a_k = (1, …, 1)`` so ``‖a_k‖₁ = τ_k`` = number of local
optimizer steps. Server: ``d_k = Δ_k / τ_k``, ``τ_eff = Σ_k p_k τ_k``, ``W = W_g + τ_eff Σ_k p_k d_k``
with ``p_k = n_k / n`` (FedNova Eq. 6). ``tau="steps"`` (default) counts the optimizer steps each
client took (full batch: the local epochs, equal for all clients, so FedNova's update coincides
with FedAvg's); ``tau="train"`` uses ``epochs × n_train_k`` — the step count of one-sample
mini-batches — which makes the normalization matter when clients differ in size.
One-round adaptation: Local models are reused (plain CE), W_g = W0. With full-batch training
and equal epochs FedNova = FedAvg exactly (docs/DESIGN.md §12).

``fednova_sgd`` (diagnostic): local momentum SGD (ρ = 0.9, the matched lr and weight decay) instead
of Adam, with the momentum normalizer of FedNova §4: ``a_k = [1 − ρ^τ, 1 − ρ^{τ−1}, …, 1 − ρ]/(1 − ρ)``,
``‖a_k‖₁ = [τ − ρ(1 − ρ^τ)/(1 − ρ)]/(1 − ρ)``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from pace_nb.core.validation import Interval, Options, param
from pace_nb.methods.baselines.base import FedContext, broadcast, per_seed, size_weights
from pace_nb.methods.baselines.fedavg import WEIGHTINGS, FedAvg, client_sizes
from pace_nb.methods.contract import register

TAUS = ("steps", "train")


def fednova_update(deltas: Tensor, taus: Tensor, p: Tensor) -> Tensor:
    """``τ_eff Σ_k p_k Δ_k / τ_k`` for stacked deltas ``[K, ...]`` (FedNova Eq. 6)."""
    taus = torch.as_tensor(taus, dtype=torch.float64)
    p = torch.as_tensor(p, dtype=torch.float64)
    if bool((taus <= 0).any()):
        raise ValueError("local step counts must be positive")
    tau_eff = float((p * taus).sum())
    coef = (tau_eff * p / taus).to(deltas.dtype)
    return torch.einsum("k,k...->...", coef, deltas)


def momentum_a(tau: int, rho: float) -> Tensor:
    """FedNova's ``a_k`` for τ local steps of SGD with momentum ρ: entry j (1-based) is
    ``(1 − ρ^{τ−j+1})/(1 − ρ)`` — how much gradient j contributes to the cumulative update."""
    j = torch.arange(1, int(tau) + 1, dtype=torch.float64)
    return (1 - rho ** (int(tau) - j + 1)) / (1 - rho)


def momentum_norm(tau, rho: float) -> Tensor:
    """``‖a_k‖₁ = [τ − ρ(1 − ρ^τ)/(1 − ρ)]/(1 − ρ)`` (elementwise over a tensor of τ's)."""
    t = torch.as_tensor(tau, dtype=torch.float64)
    return (t - rho * (1 - rho**t) / (1 - rho)) / (1 - rho)


@register
class FedNova(FedAvg):
    """FedNova: normalized averaging of the local updates."""

    name = "fednova"
    label = "FedNova"
    colour, marker = "#225522", "<"
    paper_rows = {"pace_control": 2}  # its rows in the papers' tables
    paper = "Wang et al. 2020, Tackling the objective inconsistency problem in heterogeneous federated optimization"

    @dataclass(frozen=True)
    class Config:
        tau: str = param("steps", Options(TAUS))
        weighting: str = param("nodes", Options(WEIGHTINGS))

    def taus(self, ctx: FedContext) -> Tensor:
        steps = torch.full((ctx.num_clients,), float(ctx.config.epochs), dtype=torch.float64)
        return steps if self.cfg.tau == "steps" else steps * ctx.train_sizes

    def aggregate(self, ctx, trained, stats):
        p = size_weights(client_sizes(ctx, self.cfg.weighting))
        taus = self.taus(ctx)
        out = {}
        for key in self.shared_keys:
            start = per_seed(ctx.start[key], ctx.num_seeds, ctx.num_clients)
            delta = per_seed(trained[key], ctx.num_seeds, ctx.num_clients) - start
            base = torch.einsum("k,sk...->s...", p.to(start.dtype), start)
            upd = torch.stack([fednova_update(delta[s], taus, p) for s in range(ctx.num_seeds)])
            out[key] = base + upd
        return self.with_private(ctx, broadcast(out, ctx.num_seeds, ctx.num_clients), trained)


@register
class FedNovaSGD(FedNova):
    """FedNova with local momentum SGD and the momentum ``‖a_k‖₁`` (diagnostic variant)."""

    name = "fednova_sgd"
    label = "FedNova-SGD"
    colour, marker = "#225522", ">"

    @dataclass(frozen=True)
    class Config(FedNova.Config):
        momentum: float = param(0.9, Interval(float, 0, 1, closed="left"))

    def plain_local(self, ctx) -> bool:
        return False

    def local_optimizer(self, ctx):
        return {"name": "sgd", "momentum": float(self.cfg.momentum)}

    def local_loss(self, step, ctx):
        return step.params["conv1.bias"].new_zeros(())

    def taus(self, ctx: FedContext) -> Tensor:
        return momentum_norm(super().taus(ctx), float(self.cfg.momentum))
