"""FED-PUB (Baek et al., ICML 2023): personalized subgraph FL with functional embeddings.

* **Masked GCN**: each layer's effective weight is ``W ⊙ M`` with a learnable element-wise
  mask ``M`` (initialized to ones); the local loss adds ``λ₁ Σ |M|`` (sparsity) and, from the
  second round on, the proximal term ``λ₂ Σ_layers ‖θ − θ_received‖₂`` — both computed on the
  live parameters so they carry gradients (OpenFGL evaluates them on detached state-dict
  copies, where they do nothing). In eval mode masks with ``|M| < λ₁`` are pruned to zero.
* **Functional embedding**: the mean output of the last GCN layer over a random proxy graph
  shared by all clients (5 random-partition graphs of 100 nodes, p_in = 0.1, N(0, 1) features;
  built from the run seed).
* **Server**: ``S_ij = exp(τ · cos(e_i, e_j))`` (τ = 10), row-normalized; receiver i gets
  ``Σ_j S_ij θ_j`` for weights and biases; masks stay with their client.

One-round adaptation: masked local training (100 epochs, from W0 with all-one masks), one
upload (θ, e), one personalized return, evaluated with the receiver's own (pruned) masks.
The architecture is PACE's 2-layer GCN (OpenFGL's FedPub adds a third, linear classifier).
Defaults: λ₁ = λ₂ = 1e-3, τ = 10, 5 proxy graphs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.nn.gcn import gcn_forward, propagation_matrix
from pace_nb.nn.training import TrainStep
from pace_nb.methods.baselines.base import FedContext, FederatedMethod, federated_method, mix

MASK_KEYS = ("conv1.mask", "conv2.mask")


def proxy_graph(num_features: int, seed: int, num_graphs: int = 5, nodes_per_graph: int = 100,
                p_in: float = 0.1) -> tuple[Tensor, Tensor]:
    """FedPub's proxy input: ``num_graphs`` disjoint G(n, p_in) blocks (a random partition
    graph with p_out = 0) and N(0, 1) features. Returns ``(x [N, F], P [N, N] sparse)``."""
    g = torch.Generator().manual_seed(int(seed))
    n = num_graphs * nodes_per_graph
    block = torch.arange(n) // nodes_per_graph
    iu = torch.triu_indices(n, n, offset=1)
    same = block[iu[0]] == block[iu[1]]
    iu = iu[:, same]
    keep = torch.rand(iu.shape[1], generator=g) < p_in
    e = iu[:, keep]
    edge_index = torch.cat([e, e.flip(0)], dim=1)
    x = torch.randn(n, num_features, generator=g)
    return x, propagation_matrix(edge_index, n)


def prune_masks(params: dict[str, Tensor], threshold: float) -> dict[str, Tensor]:
    """Eval-mode masks: entries with ``|M| < threshold`` set to zero."""
    out = dict(params)
    for k in MASK_KEYS:
        if k in out:
            m = out[k]
            out[k] = m.masked_fill(m.abs() < threshold, 0.0)
    return out


def functional_embedding(params: dict[str, Tensor], x: Tensor, P: Tensor) -> Tensor:
    """Mean eval-mode output of the last GCN layer over the proxy nodes ([C])."""
    return gcn_forward(params, x, P).mean(0)


def similarity_weights(emb: Tensor, scale: float = 10.0) -> Tensor:
    """FedPub's server weights: ``exp(scale · cos(e_i, e_j))`` row-normalized ([K, K])."""
    e = F.normalize(emb.double(), dim=-1)
    s = torch.exp(scale * (e @ e.transpose(-1, -2)))
    return s / s.sum(-1, keepdim=True)


@federated_method
class FedPub(FederatedMethod):
    """FED-PUB: masked GCN + functional-embedding personalized aggregation."""

    name = "fedpub"
    label = "FedPub"
    paper = "Baek et al. 2023, Personalized subgraph federated learning"
    personalized = True

    @dataclass(frozen=True)
    class Config:
        l1: float = 1e-3
        loc_l2: float = 1e-3
        norm_scale: float = 10.0
        n_proxy: int = 5

    def validate(self) -> None:
        for name in ("l1", "loc_l2", "norm_scale"):
            v = getattr(self.cfg, name)
            self._require(name, isinstance(v, (int, float)) and math.isfinite(v) and v >= 0, "a finite number >= 0")
        self._require("n_proxy", isinstance(self.cfg.n_proxy, int) and self.cfg.n_proxy >= 1, "an integer >= 1")

    def prepare(self, ctx: FedContext) -> None:
        ctx.state["proxy"] = [proxy_graph(ctx.fg.num_features, s, self.cfg.n_proxy) for s in ctx.seeds]

    def start_models(self, ctx, start):
        out = dict(start)
        for layer in (1, 2):
            out[f"conv{layer}.mask"] = torch.ones_like(start[f"conv{layer}.weight"])
        return out

    def plain_local(self, ctx) -> bool:
        return False

    def local_loss(self, step: TrainStep, ctx: FedContext) -> Tensor:
        loss = self.cfg.l1 * sum(step.params[k].abs().sum() for k in MASK_KEYS)
        if ctx.round > 0 and self.cfg.loc_l2 > 0:
            for k in self.shared_keys:
                prev = ctx.start[k][step.models].to(step.params[k].device)
                d = (step.params[k] - prev).flatten(1)
                loss = loss + self.cfg.loc_l2 * d.norm(dim=1).sum()
        return loss

    @torch.no_grad()
    def upload(self, ctx, trained):
        pruned = prune_masks(trained, self.cfg.l1)
        emb = []
        for b in range(ctx.num_models):
            x, P = ctx.state["proxy"][ctx.seed_index(b)]
            emb.append(functional_embedding({k: v[b] for k, v in pruned.items()}, x, P))
        return {"embedding": torch.stack(emb)}

    def aggregate(self, ctx, trained, stats):
        emb = ctx.view(stats["embedding"])
        w = torch.stack([similarity_weights(emb[s], self.cfg.norm_scale) for s in range(ctx.num_seeds)])
        ctx.state["weights"] = w
        return self.with_private(ctx, mix(trained, w, ctx.num_seeds, ctx.num_clients, self.shared_keys), trained)

    def deployed(self, ctx, returned):
        return prune_masks(returned, self.cfg.l1)
