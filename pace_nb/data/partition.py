"""Node partitions among K clients (docs/DESIGN.md §4): Louvain (OpenFGL-exact), METIS, Dirichlet.

Pure functions: each returns ``list[np.ndarray]`` — client k's sorted global node ids,
clients in OpenFGL's order.
"""
from __future__ import annotations

import math

from typing import Callable

import numpy as np
import scipy.sparse as sp
from torch import Tensor

from pace_nb.core.errors import ConfigError, unknown
from pace_nb.core.validation import check_clients

#: OpenFGL's ``give_up``: pointer moves before the fallback assignment.
GIVE_UP = 1000


def _adjacency(edge_index: Tensor | np.ndarray, num_nodes: int) -> sp.csr_matrix:
    """Unweighted scipy adjacency of an edge list (duplicates summed, as PyG's converter)."""
    ei = np.asarray(edge_index.cpu() if isinstance(edge_index, Tensor) else edge_index, dtype=np.int64)
    data = np.ones(ei.shape[1], dtype=np.float64)
    return sp.coo_matrix((data, (ei[0], ei[1])), shape=(num_nodes, num_nodes)).tocsr()


def _finalize(groups: list[list[int]] | list[np.ndarray]) -> list[np.ndarray]:
    return [np.sort(np.asarray(g, dtype=np.int64)) for g in groups]


def louvain_communities(edge_index, num_nodes: int, resolution: float = 1.0) -> np.ndarray:
    """Community label per node: scikit-network Louvain with OpenFGL's arguments (deterministic)."""
    from sknetwork.clustering import Louvain

    if np.asarray(edge_index).size == 0:
        raise ConfigError(f"Louvain needs edges to find communities, but the graph ({num_nodes} nodes) has none; "
                          f"use the metis or dirichlet partition")
    algo = Louvain(modularity="newman", resolution=resolution, return_aggregate=True)
    return np.asarray(algo.fit_predict(_adjacency(edge_index, num_nodes)), dtype=np.int64)


def split_oversized(groups: list[list[int]], cap: int) -> list[list[int]]:
    """Cut every group longer than ``cap`` into consecutive ``cap``-sized chunks.

    The remainder is appended to the list being walked, so it is cut again when it is
    still too long (OpenFGL's growing-list walk).
    """
    if cap < 1:
        raise ConfigError(f"Louvain size cap N//K - delta = {cap} < 1; use fewer clients or a smaller delta")
    out = [list(g) for g in groups]
    i = 0
    while i < len(out):
        while len(out[i]) > cap:
            out.append(out[i][cap:])
            out[i] = out[i][:cap]
        i += 1
    return out


def _openfgl_fallback(load: list[int], candidates: list[int], ptr: int) -> int:
    """OpenFGL's give-up branch, verbatim in effect: its "smallest client" loop compares the
    load at the *current* pointer with the running minimum and then moves the pointer to
    the loop index, so it picks the index after the last strict decrease — not the argmin."""
    best = float("inf")
    for i in range(len(candidates)):
        if load[candidates[ptr]] < best:
            best = load[candidates[ptr]]
            ptr = i
    return ptr


def assign_groups(sizes: list[int], num_clients: int, target: int, delta: int,
                  fallback: str = "openfgl") -> tuple[list[int], list[int]]:
    """OpenFGL's greedy packing of groups (already sorted largest first) into clients.

    Returns (owner client per group, indices of the groups placed by the fallback). A
    client holding ``>= target`` nodes leaves the candidate list when the pointer reaches
    it (while ≥ 2 candidates remain); the pointer moves round-robin while the group would
    reach ``target + delta``; it does not advance after an assignment. After more than
    ``GIVE_UP`` moves the group is placed by the fallback: ``"openfgl"`` reproduces
    OpenFGL's code (:func:`_openfgl_fallback`, what its caches hold), ``"smallest"`` is its
    intent (the least-loaded candidate). Only fallback groups can exceed ``target + delta − 1``.
    """
    if fallback not in ("openfgl", "smallest"):
        raise unknown("Louvain fallback", fallback, ("openfgl", "smallest"))
    load = [0] * num_clients
    candidates = list(range(num_clients))
    ptr, owners, fell_back = 0, [], []
    for g, size in enumerate(sizes):
        while len(candidates) >= 2 and load[candidates[ptr]] >= target:
            candidates.pop(ptr)
            ptr %= len(candidates)
        moves = 0
        while load[candidates[ptr]] + size >= target + delta:
            ptr = (ptr + 1) % len(candidates)
            moves += 1
            if moves > GIVE_UP:
                fell_back.append(g)
                ptr = (_openfgl_fallback(load, candidates, ptr) if fallback == "openfgl"
                       else int(np.argmin([load[c] for c in candidates])))
                break
        load[candidates[ptr]] += size
        owners.append(candidates[ptr])
    return owners, fell_back


def louvain_partition(edge_index, num_nodes: int, num_clients: int, resolution: float = 1.0,
                      delta: int = 20, fallback: str = "openfgl", return_info: bool = False):
    """OpenFGL ``subgraph_fl_louvain``: Louvain communities packed into K clients of ≈ N/K nodes.

    Groups are the communities in order of first appearance (node order), split to at most
    ``N//K − δ`` nodes, then sorted largest first (stable) and packed by :func:`assign_groups`.
    With ``return_info`` also returns ``{"communities", "groups", "fallback_clients"}`` (the
    clients that received a group through the give-up fallback, one entry per such group).
    """
    labels = louvain_communities(edge_index, num_nodes, resolution)
    _, first = np.unique(labels, return_index=True)
    order = labels[np.sort(first)]  # community ids in order of first appearance
    members: dict[int, list[int]] = {int(c): [] for c in order}
    for node, c in enumerate(labels.tolist()):
        members[c].append(node)
    groups = split_oversized([members[int(c)] for c in order], num_nodes // num_clients - delta)
    groups.sort(key=len, reverse=True)  # stable
    owners, fell_back = assign_groups([len(g) for g in groups], num_clients, num_nodes // num_clients,
                                      delta, fallback)
    clients: list[list[int]] = [[] for _ in range(num_clients)]
    for g, k in zip(groups, owners):
        clients[k].extend(g)
    parts = _finalize(clients)
    if return_info:
        return parts, {"communities": int(order.size), "groups": len(groups),
                       "fallback_clients": [owners[g] for g in fell_back]}
    return parts


def metis_partition(edge_index, num_nodes: int, num_clients: int) -> list[np.ndarray]:
    """``pymetis.part_graph(K, adjacency)``: part i → client i (deterministic)."""
    import pymetis

    adj = _adjacency(edge_index, num_nodes)
    adj = ((adj + adj.T) > 0).astype(np.int64).tocsr()
    adj.setdiag(0)
    adj.eliminate_zeros()
    if num_clients == 1:
        return [np.arange(num_nodes, dtype=np.int64)]
    csr = pymetis.CSRAdjacency(adj.indptr.astype(np.int32), adj.indices.astype(np.int32))
    _, membership = pymetis.part_graph(num_clients, adjacency=csr)
    member_of = np.asarray(membership)
    parts = [np.flatnonzero(member_of == k).astype(np.int64) for k in range(num_clients)]
    empty = [k for k, p in enumerate(parts) if p.size == 0]
    if empty:
        raise ConfigError(f"METIS left client(s) {empty} empty for K={num_clients} on {num_nodes} nodes; "
                          f"use fewer clients")
    return parts


def dirichlet_partition(y, num_clients: int, beta: float, seed: int, min_size: int = 5,
                        max_tries: int = 100) -> list[np.ndarray]:
    """Dirichlet label skew: per class, shuffle and split by proportions ~ Dir(β·1).

    Clients already holding ≥ N/K nodes get proportion 0; retried until every client holds
    ≥ ``min_size`` nodes (at most ``max_tries`` draws, else :class:`ConfigError`).
    """
    y = np.asarray(y.cpu() if isinstance(y, Tensor) else y).astype(np.int64)
    n = y.size
    rng = np.random.default_rng(seed)
    classes = np.unique(y)
    for _ in range(max_tries):
        clients: list[list[int]] = [[] for _ in range(num_clients)]
        for c in classes:
            idx = rng.permutation(np.flatnonzero(y == c))
            prop = rng.dirichlet(np.full(num_clients, float(beta)))
            prop = prop * np.array([len(cl) < n / num_clients for cl in clients])
            total = prop.sum()
            prop = prop / total if total > 0 else np.full(num_clients, 1.0 / num_clients)
            cuts = (np.cumsum(prop) * idx.size).astype(int)[:-1]
            for cl, chunk in zip(clients, np.split(idx, cuts)):
                cl.extend(chunk.tolist())
        if min(len(cl) for cl in clients) >= min_size:
            return _finalize(clients)
    raise ConfigError(f"Dirichlet partition with beta={beta} could not give each of {num_clients} clients "
                      f">= {min_size} nodes in {max_tries} tries; use a larger beta or fewer clients")


def _louvain(data, k, seed, resolution=1.0, delta=20, fallback="openfgl", **_):
    return louvain_partition(data.edge_index, int(data.num_nodes), k, resolution=resolution, delta=delta,
                             fallback=fallback)


def _metis(data, k, seed, **_):
    return metis_partition(data.edge_index, int(data.num_nodes), k)


def _dirichlet(data, k, seed, beta=None, min_size=5, max_tries=100, **_):
    return dirichlet_partition(data.y, k, beta, seed, min_size=min_size, max_tries=max_tries)


#: Scheme name → ``f(data, num_clients, seed, **kw)``.
SCHEMES: dict[str, Callable[..., list[np.ndarray]]] = {
    "louvain": _louvain, "metis": _metis, "dirichlet": _dirichlet,
}


def check_scheme(scheme: str) -> str:
    key = str(scheme).strip().lower()
    if key not in SCHEMES:
        raise unknown("partition scheme", scheme, SCHEMES)
    return key


def validate(num_nodes: int, num_clients, scheme: str, beta=None) -> tuple[str, int]:
    """Check scheme, K (integer, 1 ≤ K ≤ N) and β (> 0, required for Dirichlet)."""
    scheme = check_scheme(scheme)
    k = check_clients(num_clients)
    if k > num_nodes:
        raise ConfigError(f"number of clients K={k} exceeds the number of nodes N={num_nodes}")
    if scheme == "dirichlet":
        if beta is None:
            raise ConfigError("the dirichlet scheme needs a concentration beta > 0 (e.g. --beta 0.05)")
        if not (math.isfinite(float(beta)) and float(beta) > 0):
            raise ConfigError(f"Dirichlet beta must be > 0 and finite, got {beta}")
    return scheme, k


def partition_nodes(data, scheme: str, num_clients: int, seed: int = 2024, **kw) -> list[np.ndarray]:
    """Partition ``data`` (PyG ``Data``) with a registered scheme after validating K and β."""
    scheme, k = validate(int(data.num_nodes), num_clients, scheme, kw.get("beta"))
    parts = SCHEMES[scheme](data, k, int(seed), **kw)
    covered = np.concatenate(parts) if parts else np.empty(0, np.int64)
    if covered.size != data.num_nodes or np.unique(covered).size != data.num_nodes:
        raise ConfigError(f"{scheme} partition does not cover every node exactly once")  # pragma: no cover
    return parts
