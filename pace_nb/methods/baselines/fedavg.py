"""FedAvg (McMahan et al., AISTATS 2017): size-weighted parameter mean.

One-round adaptation (PACE Table 1): every client trains its Local model (100 epochs from the
shared W0 — the Local models themselves are reused), uploads it once; the server returns
``θ = Σ_k n_k θ_k / Σ_k n_k`` to every receiver (one tensor per seed, broadcast); no post-return training. ``n_k`` = number of
nodes of client k's subgraph (OpenFGL's ``num_samples``; ``weighting="train"`` uses the number
of training nodes instead).
"""
from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from pace_nb.core.validation import Options, param
from pace_nb.methods.baselines.base import FedContext, FederatedMethod, broadcast, size_weights, weighted_mean
from pace_nb.methods.contract import register

WEIGHTINGS = ("nodes", "train")


def client_sizes(ctx: FedContext, weighting: str) -> Tensor:
    """``n_k`` per client: subgraph nodes (default) or training nodes."""
    return ctx.sizes if weighting == "nodes" else ctx.train_sizes


@register
class FedAvg(FederatedMethod):
    """FedAvg: ``θ = Σ_k (n_k/n) θ_k`` for every receiver."""

    name = "fedavg"
    label = "FedAvg"
    colour, marker = "#000000", "^"
    paper_rows = {"pace_control": 0, "multiround": 0}  # its rows in the papers' tables
    paper = "McMahan et al. 2017, Communication-efficient learning of deep networks from decentralized data"

    @dataclass(frozen=True)
    class Config:
        weighting: str = param("nodes", Options(WEIGHTINGS))

    def weights(self, ctx: FedContext) -> Tensor:
        return size_weights(client_sizes(ctx, self.cfg.weighting))

    def aggregate(self, ctx, trained, stats):
        glob = weighted_mean(trained, self.weights(ctx), ctx.num_seeds, ctx.num_clients, self.shared_keys)
        return self.with_private(ctx, broadcast(glob, ctx.num_seeds, ctx.num_clients), trained)
