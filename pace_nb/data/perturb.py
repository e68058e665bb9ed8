"""Seeded structural and feature noise for robustness studies (SPEAR Table 2).

SPEAR's "mixed edge addition/deletion ρ" and "random zero-masking η" are OpenFGL's
``random_topology_noise`` / ``random_feature_sparsity``, applied to the **clients' local
data only**; the complete graph used for evaluation stays clean (docs/DESIGN.md §12). That is
``scope="clients"`` (default of :func:`perturb_federated`):

* **Edges of client k, ρ.** With E_k its undirected edges and m = round(ρ·|E_k|): m edges
  drawn uniformly without replacement from E_k are deleted and m new in-client node pairs,
  drawn uniformly from the non-edges of the client graph (no self loops, no repeats), are
  added, so |E_k| is kept (:func:`perturb_client_edges`; a client with fewer than m non-edges
  gets all of them).
* **Features, η (``mode="nnz"``).** Each node i with nnz_i nonzero entries loses exactly
  int(η·nnz_i) of them, drawn uniformly without replacement.

``scope="global"`` is the earlier reading, kept for comparison: the *complete* graph
(evaluation included) is perturbed and the client subgraphs are re-induced on the same node
sets and masks.

* **Edges (global), ρ.** Budget m = round(ρ·|E|): ⌊m/2⌋ edges are *deleted* and m − ⌊m/2⌋
  new ones *added* (uniform non-edges), |E| kept (±1) (:func:`perturb_edges`).
* **Features (global), η.** ``mode="entry"``: every entry of X is set to 0 independently
  with probability η; ``"node"``: a random ⌊ηN⌋ of the nodes lose their whole feature
  vector; ``"column"``: a random ⌊ηF⌋ of the feature dimensions are zero for every node.

Every result is symmetric (both directions), coalesced, without self loops.
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
    new = _sample_non_edges(rng, num_nodes, set((pairs[:, 0] * num_nodes + pairs[:, 1]).tolist()), n_add)
    return _symmetric(np.concatenate([kept, np.stack([new // num_nodes, new % num_nodes], 1)]), edge_index)


def _sample_non_edges(rng, num_nodes: int, existing: set[int], count: int) -> np.ndarray:
    """``count`` distinct node pairs u < v (as u·n + v) outside ``existing``, uniformly (rejection)."""
    added: set[int] = set()
    while len(added) < count:
        need = count - len(added)
        u = rng.integers(0, num_nodes, 2 * need + 8)
        v = rng.integers(0, num_nodes, 2 * need + 8)
        for a, b in zip(np.minimum(u, v).tolist(), np.maximum(u, v).tolist()):
            key = a * num_nodes + b
            if a != b and key not in existing and key not in added:
                added.add(key)
                if len(added) == count:
                    break
    return np.array(sorted(added), dtype=np.int64)


def _symmetric(und: np.ndarray, like: Tensor) -> Tensor:
    und = und.reshape(-1, 2).astype(np.int64)
    both = np.unique(np.concatenate([und, und[:, ::-1]]), axis=0)
    return torch.from_numpy(np.ascontiguousarray(both.T)).to(like.device)


def perturb_client_edges(edge_index: Tensor, num_nodes: int, rho: float, seed=0) -> Tensor:
    """OpenFGL's topology noise on one client graph: delete round(ρ|E|) edges, add as many
    random non-edges (capped at the number of non-edges); symmetric output."""
    rho = _check_share("edge perturbation rho", rho)
    rng = np.random.default_rng(seed)
    pairs = undirected_pairs(edge_index)
    m = int(round(rho * len(pairs)))
    kept = np.delete(pairs, rng.choice(len(pairs), m, replace=False), axis=0)
    free = num_nodes * (num_nodes - 1) // 2 - len(pairs)
    new = _sample_non_edges(rng, num_nodes, set((pairs[:, 0] * num_nodes + pairs[:, 1]).tolist()), min(m, free))
    return _symmetric(np.concatenate([kept, np.stack([new // num_nodes, new % num_nodes], 1)]), edge_index)


MASK_MODES = ("entry", "node", "column", "nnz")


def mask_features(x: Tensor, eta: float, seed: int = 0, mode: str = "entry") -> Tensor:
    """Zero-mask a share η of ``x`` (seeded; see module doc for ``mode``); returns a new tensor."""
    eta = _check_share("feature masking eta", eta)
    if mode not in MASK_MODES:
        raise unknown("feature masking mode", mode, MASK_MODES)
    gen = torch.Generator().manual_seed(int(seed))
    if mode == "nnz":
        return _mask_nonzeros(x, eta, gen)
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


def _mask_nonzeros(x: Tensor, eta: float, gen: torch.Generator) -> Tensor:
    """Zero exactly int(η·nnz_i) uniformly chosen nonzero entries of every row i."""
    rows, cols = x.nonzero(as_tuple=True)
    keys = torch.rand(rows.numel(), generator=gen, dtype=torch.float64).to(x.device)
    order = torch.argsort(rows.double() * 2.0 + keys)       # rows ascending, random within a row
    rows, cols = rows[order], cols[order]
    counts = torch.bincount(rows, minlength=x.shape[0])
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(rows.numel(), device=x.device) - starts[rows]
    budget = torch.floor(eta * counts.double()).long()
    drop = rank < budget[rows]
    out = x.clone()
    out[rows[drop], cols[drop]] = 0
    return out


SCOPES = ("clients", "global")


def perturb_federated(fg, rho: float = 0.0, eta: float = 0.0, seed: int = 0, mask_mode: str | None = None,
                      scope: str = "clients"):
    """A copy of ``fg`` with ρ edge noise and η feature zero-masking (module doc).

    ``scope="clients"`` (OpenFGL): each client's local graph is perturbed (client k seeded by
    ``(seed, k)``; features default ``mask_mode="nnz"``), the complete graph ``fg.data`` — the
    evaluation graph — stays clean. ``scope="global"``: the complete graph is perturbed
    (features default ``"entry"``) and the client subgraphs re-induced on the same nodes/masks.
    """
    from torch_geometric.utils import subgraph

    if scope not in SCOPES:
        raise unknown("perturbation scope", scope, SCOPES)
    mask_mode = mask_mode or ("nnz" if scope == "clients" else "entry")
    config = dict(fg.config, perturb={"rho": float(rho), "eta": float(eta), "seed": int(seed),
                                      "mask_mode": mask_mode, "scope": scope})
    if scope == "clients":
        clients = []
        for k, c in enumerate(fg.clients):
            ei = perturb_client_edges(c.edge_index, c.num_nodes, rho, (int(seed), k)) if rho > 0 else c.edge_index
            x = mask_features(c.x, eta, int(seed) * 1_000_003 + k + 1, mask_mode) if eta > 0 else c.x
            clients.append(replace(c, edge_index=ei, x=x))
        return replace(fg, clients=clients, config=config)
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
    return replace(fg, data=data, clients=clients, config=config)
