"""FedProx (Li et al., MLSys 2020): FedAvg with a proximal local term ``μ/2 ‖W − W_g‖²``.

One-round adaptation: W_g = W0 (the shared initialization the server broadcast), so every
client trains 100 epochs on ``CE + μ/2 ‖W − W0‖²`` (all GCN weights and biases), uploads once,
and receives the size-weighted mean (FedAvg's server rule). Default ``μ = 1e-3`` — OpenFGL's
value, from FedProx's grid {0.001, 0.01, 0.1, 1}; ``mu=0.01`` stays selectable (μ is recorded in
every row's ``params``). Under Adam with weight decay ``wd`` a weight without CE signal settles
near ``μ/(μ + wd)·W0``, so μ sets how much of W0 survives in weakly trained coordinates.
Multi-round: W_g is the model the client received at the start of the round.
"""
from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from pace_nb.core.validation import Interval, Options, param
from pace_nb.methods.baselines.base import FedContext
from pace_nb.methods.baselines.fedavg import WEIGHTINGS, FedAvg
from pace_nb.methods.contract import register


def proximal_term(params: dict[str, Tensor], anchor: dict[str, Tensor], mu: float, keys) -> Tensor:
    """``Σ_b μ/2 ‖θ_b − θ_b^anchor‖²`` over ``keys`` (batched tensors, anchor detached): FedProx's term
    as a loss (the reference; training adds its gradient directly, ``FedProx.proximal``)."""
    total = None
    for k in keys:
        d = params[k] - anchor[k].detach().to(params[k].device)
        term = d.pow(2).sum()
        total = term if total is None else total + term
    if total is None:
        raise ValueError("proximal_term: no parameter keys given")
    return 0.5 * mu * total


@register
class FedProx(FedAvg):
    """FedProx: local ``CE + μ/2‖W − W_g‖²``, FedAvg aggregation."""

    name = "fedprox"
    label = "FedProx"
    colour, marker = "#66CCEE", "v"
    paper_rows = {"pace_control": 1, "multiround": 1}  # its rows in the papers' tables
    paper = "Li et al. 2020, Federated optimization in heterogeneous networks"

    @dataclass(frozen=True)
    class Config:
        mu: float = param(1e-3, Interval(float, 0, None))
        weighting: str = param("nodes", Options(WEIGHTINGS))

    def proximal(self, ctx: FedContext) -> float:
        """μ: the trainer adds :func:`proximal_term`'s gradient ``μ (θ − W_g)`` (bitwise autograd's)."""
        return self.cfg.mu
