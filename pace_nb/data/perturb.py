"""Seeded structural and feature noise for robustness studies (SPEAR Table 2).

* **Edges, ρ (mixed addition + deletion).** Let E be the set of undirected edges {u, v}
  (u ≠ v, duplicates merged) and m = round(ρ·|E|) the perturbation budget. Half of it,
  ⌊m/2⌋ edges, is *deleted* (drawn uniformly without replacement from E) and m − ⌊m/2⌋ new
  edges are *added* (drawn uniformly from the node pairs that are not edges of the original
  graph, no self loops, no repeats). ρ = 0.5 therefore flips half as many pairs as there
  are edges: a quarter of the edges vanish and as many random ones appear, |E| is kept
  (±1). The result is symmetric (both directions), coalesced, without self loops.
* **Features, η (zero-masking).** Default ``mode="entry"``: every entry of X is set to 0
  independently with probability η (a Bernoulli mask over all N×F entries). The paper does
  not say which granularity it masks, so two other readings are available: ``"node"``
  (a random ⌊ηN⌋ of the nodes lose their whole feature vector; PPR refills them from
  neighbours) and ``"column"`` (a random ⌊ηF⌋ of the feature dimensions are zero for every
  node).
* **Federations.** :func:`perturb_federated` perturbs the complete graph and re-induces the
  client subgraphs on the *same* node sets and masks (the Dirichlet partition depends on
  labels only, so this equals perturbing before partitioning with the same data seed).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch
from torch import Tensor

from pace_nb.core.errors import ConfigError, unknown


def _check_share(name: str, value: float) -> float:
    if not 0.0 <= float(value) <= 1.0:
        raise ConfigError(f"{name} must lie in [0, 1], got {value!r}")
    return float(value)


def undirected_pairs(edge_index: Tensor) -> np.ndarray:
    """Unique undirected edges as an [m, 2] array with u < v (self loops dropped)."""
    ei = edge_index.cpu().numpy()
    u, v = np.minimum(ei[0], ei[1]), np.maximum(ei[0], ei[1])
    keep = u != v
    return np.unique(np.stack([u[keep], v[keep]], 1), axis=0)


def perturb_edges(edge_index: Tensor, num_nodes: int, rho: float, seed: int = 0) -> Tensor:
    """Mixed edge deletion + addition with budget round(ρ|E|) (see module doc); symmetric output."""
    rho = _check_share("edge perturbation rho", rho)
    rng = np.random.default_rng(seed)
    pairs = undirected_pairs(edge_index)
    m = int(round(rho * len(pairs)))
    n_del, n_add = m // 2, m - m // 2
    max_pairs = num_nodes * (num_nodes - 1) // 2
    if n_add > max_pairs - len(pairs):
        raise ConfigError(f"rho={rho} asks for {n_add} new edges but the graph has only {max_pairs - len(pairs)} non-edges")
    kept = np.delete(pairs, rng.choice(len(pairs), n_del, replace=False), axis=0)
    existing = set((pairs[:, 0] * num_nodes + pairs[:, 1]).tolist())
    added: set[int] = set()
    while len(added) < n_add:
        need = n_add - len(added)
        u = rng.integers(0, num_nodes, 2 * need + 8)
        v = rng.integers(0, num_nodes, 2 * need + 8)
        for a, b in zip(np.minimum(u, v).tolist(), np.maximum(u, v).tolist()):
            key = a * num_nodes + b
            if a != b and key not in existing and key not in added:
                added.add(key)
                if len(added) == n_add:
                    break
    new = np.array(sorted(added), dtype=np.int64)
    und = np.concatenate([kept, np.stack([new // num_nodes, new % num_nodes], 1)]).astype(np.int64)
    both = np.concatenate([und, und[:, ::-1]])
    both = np.unique(both, axis=0)
    return torch.from_numpy(np.ascontiguousarray(both.T)).to(edge_index.device)


MASK_MODES = ("entry", "node", "column")


def mask_features(x: Tensor, eta: float, seed: int = 0, mode: str = "entry") -> Tensor:
    """Zero-mask a share η of ``x`` (seeded; see module doc for ``mode``); returns a new tensor."""
    eta = _check_share("feature masking eta", eta)
    if mode not in MASK_MODES:
        raise unknown("feature masking mode", mode, MASK_MODES)
    gen = torch.Generator().manual_seed(int(seed))
    if mode == "entry":
        keep = torch.rand(x.shape, generator=gen) >= eta
    else:
        axis = 0 if mode == "node" else 1
        n = x.shape[axis]
        drop = torch.randperm(n, generator=gen)[: int(eta * n)]
        keep = torch.ones(n, dtype=torch.bool)
        keep[drop] = False
        keep = keep.unsqueeze(1) if axis == 0 else keep.unsqueeze(0)
    return x * keep.to(x.device, x.dtype)


def perturb_federated(fg, rho: float = 0.0, eta: float = 0.0, seed: int = 0, mask_mode: str = "entry"):
    """A copy of ``fg`` whose complete graph has ρ-perturbed edges and η-masked features; the clients keep
    their node sets and masks, their edges are the induced subgraphs of the perturbed graph."""
    from torch_geometric.utils import subgraph

    data = fg.data.clone()
    n = int(data.num_nodes)
    if rho > 0:
        data.edge_index = perturb_edges(data.edge_index, n, rho, seed)
    if eta > 0:
        data.x = mask_features(data.x, eta, seed + 1, mask_mode)
    clients = []
    for c in fg.clients:
        ei, _ = subgraph(c.global_ids.long(), data.edge_index, relabel_nodes=True, num_nodes=n)
        clients.append(replace(c, edge_index=ei, x=data.x[c.global_ids.long()]))
    config = dict(fg.config, perturb={"rho": float(rho), "eta": float(eta), "seed": int(seed), "mask_mode": mask_mode})
    return replace(fg, data=data, clients=clients, config=config)
