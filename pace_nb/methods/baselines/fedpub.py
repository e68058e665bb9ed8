"""FED-PUB (Baek et al., ICML 2023): personalized subgraph FL with functional embeddings.

* **Masked GCN** (default ``layers=3``, OpenFGL's model): masked GCN F→H, masked GCN H→H,
  masked linear H→C (``relu`` between; dropout after layer 1, as the shared trainer does);
  ``layers=2`` is PACE's 2-layer GCN with masks. Each effective weight is ``W ⊙ M`` with a
  learnable element-wise mask ``M`` initialized to ones. In eval mode masks with
  ``|M| < λ₁`` are pruned to zero.
* **Regularizers as in OpenFGL**: the L1 mask term ``λ₁ Σ|M|`` is computed on detached state
  there, so it carries no gradient — here it is left out of the objective (it would add a
  constant); masks learn from CE alone. From the second round on the proximal term
  ``λ₂ Σ_layers ‖θ − θ_received‖₂`` is live (``loc_l2``).
* **Functional embedding**: the mean H-dim hidden output over a random proxy graph shared by
  all clients (5 random-partition graphs of 100 nodes, p_in = 0.1, N(0, 1) features; built
  from the run seed): the conv2 output (pre-ReLU) of the 3-layer model, the post-ReLU layer-1
  output of the 2-layer model — never the logits (a C-dim mean is dominated by the shared
  class prior, so every client looks alike).
* **Server**: ``S_ij = exp(τ · cos(e_i, e_j))`` (τ = 10), row-normalized; receiver i gets
  ``Σ_j S_ij θ_j`` for weights and biases; masks stay with their client (the receiver keeps
  its own). The diagonal ``S_ii`` (own weight) of every seed is recorded in the run's params
  (``similarity_diag``).

One-round adaptation: masked local training (100 epochs, from W0 with all-one masks), one
upload (θ, e), one personalized return, evaluated with the receiver's own (pruned) masks.
The 3-layer model's conv1 is PACE's W0; conv2 (glorot) and the head (PyTorch ``Linear``
init) are drawn from the run seed. Defaults: λ₁ = λ₂ = 1e-3, τ = 10, 5 proxy graphs.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.core.validation import Interval, Options, param
from pace_nb.nn.gcn import WEIGHT_KEYS, effective_weight, propagation_matrix
from pace_nb.nn.training import TrainStep
from pace_nb.methods.baselines.base import FedContext, FederatedMethod, mix
from pace_nb.methods.contract import register

MASK_KEYS = ("conv1.mask", "conv2.mask", "lin.mask")
HEAD_KEYS = ("lin.weight", "lin.bias")


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
    """Mean eval-mode hidden output over the proxy nodes ([H]): the conv2 output (pre-ReLU)
    when the model has a linear head, else the post-ReLU conv1 output."""
    h = torch.relu(torch.sparse.mm(P, x @ effective_weight(params, 1).t()) + params["conv1.bias"])
    if "lin.weight" in params:
        h = torch.sparse.mm(P, h @ effective_weight(params, 2).t()) + params["conv2.bias"]
    return h.mean(0)


def head_params(hidden: int, num_classes: int, seed: int) -> dict[str, Tensor]:
    """conv2 H→H (PyG ``GCNConv`` init) and the linear head H→C (``torch.nn.Linear`` init) of the
    3-layer FedPub model, drawn from ``seed`` (global RNG untouched)."""
    from torch_geometric.nn import GCNConv

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed) + 1)
        conv2 = GCNConv(hidden, hidden)
        lin = torch.nn.Linear(hidden, num_classes)
    return {"conv2.weight": conv2.lin.weight.detach().clone(), "conv2.bias": conv2.bias.detach().clone(),
            "lin.weight": lin.weight.detach().clone(), "lin.bias": lin.bias.detach().clone()}


def similarity_weights(emb: Tensor, scale: float = 10.0) -> Tensor:
    """FedPub's server weights: ``exp(scale · cos(e_i, e_j))`` row-normalized ([K, K])."""
    e = F.normalize(emb.double(), dim=-1)
    s = torch.exp(scale * (e @ e.transpose(-1, -2)))
    return s / s.sum(-1, keepdim=True)


def similarity_diagonal(ctx: FedContext) -> dict:
    """``{"similarity_diag": [[S_ii per receiver] per seed]}`` of the last round's mixing weights
    (``ctx.state["weights"]``, [S, K, K]); empty before any aggregation."""
    w = ctx.state.get("weights")
    return {} if w is None else {"similarity_diag": [[round(float(v), 6) for v in torch.diagonal(ws)] for ws in w]}


@register
class FedPub(FederatedMethod):
    """FED-PUB: masked GCN + functional-embedding personalized aggregation."""

    name = "fedpub"
    label = "FedPub"
    colour, marker = "#332288", "D"
    paper_rows = {"pace_control": 4, "multiround": 5}  # its rows in the papers' tables
    paper = "Baek et al. 2023, Personalized subgraph federated learning"
    personalized = True
    #: layers: 2 (PACE's GCN) or 3 (OpenFGL's model)

    @dataclass(frozen=True)
    class Config:
        l1: float = param(1e-3, Interval(float, 0, None))
        loc_l2: float = param(1e-3, Interval(float, 0, None))
        norm_scale: float = param(10.0, Interval(float, 0, None))
        n_proxy: int = param(5, Interval(int, 1, None))
        layers: int = param(3, Options((2, 3)))

    def validate(self) -> None:
        self.shared_keys = WEIGHT_KEYS + (HEAD_KEYS if self.cfg.layers == 3 else ())

    def prepare(self, ctx: FedContext) -> None:
        ctx.state["proxy"] = [proxy_graph(ctx.fg.num_features, s, self.cfg.n_proxy) for s in ctx.seeds]

    def start_models(self, ctx, start):
        out = dict(start)
        if self.cfg.layers == 3:
            heads = [head_params(ctx.config.hidden, ctx.fg.num_classes, s) for s in ctx.seeds]
            for key in heads[0]:
                out[key] = torch.stack([h[key] for h in heads for _ in range(ctx.num_clients)])
        for name in ("conv1", "conv2") + (("lin",) if self.cfg.layers == 3 else ()):
            out[f"{name}.mask"] = torch.ones_like(out[f"{name}.weight"])
        return out

    def plain_local(self, ctx) -> bool:
        return False

    def local_loss(self, step: TrainStep, ctx: FedContext) -> Tensor:
        loss = step.params["conv1.bias"].new_zeros(())  # no L1 gradient (module doc)
        if ctx.round == 0 or self.cfg.loc_l2 == 0:
            return loss
        start = ctx.start_rows(step.models, self.shared_keys, step.params[self.shared_keys[0]].device)
        for k in self.shared_keys:
            prev = start[k]
            loss = loss + self.cfg.loc_l2 * (step.params[k] - prev).flatten(1).norm(dim=1).sum()
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

    def diagnostics(self, ctx) -> dict:
        """``similarity_diag[s][i]`` = S_ii, receiver i's weight on its own model (last round)."""
        return similarity_diagonal(ctx)

    def deployed(self, ctx, returned):
        return prune_masks(returned, self.cfg.l1)
