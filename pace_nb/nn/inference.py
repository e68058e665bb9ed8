"""Eval-mode forwards of trained GCNs on their clients' subgraphs (no dropout, no gradients).

A client's features and propagation matrix are built once while its tensors live unchanged
(:func:`_graph`), however many models are evaluated on it. Features sparser than
:data:`~pace_nb.nn.gcn.SPARSE_DENSITY` are held as CSR, so layer 1 reads only their nonzeros.
"""
from __future__ import annotations

import weakref
from collections.abc import Sequence

import torch
from torch import Tensor

from pace_nb.core.config import resolve_device
from pace_nb.data.federation import ClientGraph
from pace_nb.nn.gcn import Params, feature_nnz, gcn_forward, propagation_matrix, sparse_enough, to_csr


#: (id(x), id(edge_index), device) → (weakrefs to both, their versions, eval features, P); an entry
#: leaves when either tensor is freed, and is rebuilt when either was changed in place.
_GRAPHS: dict[tuple[int, int, str], tuple] = {}
_MAX_GRAPHS = 4096


def _graph(client: ClientGraph, device) -> tuple[Tensor, Tensor]:
    """A client's float32 features and propagation matrix on ``device``, built once
    per (feature tensor, edge tensor) while both live unchanged."""
    x, ei = client.x, client.edge_index
    key = (id(x), id(ei), str(device))
    hit = _GRAPHS.get(key)
    if hit is not None and hit[0]() is x and hit[1]() is ei and hit[2] == (x._version, ei._version):
        return hit[3], hit[4]
    built = (eval_features(x, device), propagation_matrix(ei, client.num_nodes).to(device))
    if len(_GRAPHS) >= _MAX_GRAPHS:
        _GRAPHS.clear()

    def drop(_ref, key=key):
        _GRAPHS.pop(key, None)

    _GRAPHS[key] = (weakref.ref(x, drop), weakref.ref(ei, drop), (x._version, ei._version), *built)
    return built


def eval_features(x: Tensor, device) -> Tensor:
    """``x`` as float32 on ``device``: sparse CSR below :data:`~pace_nb.nn.gcn.SPARSE_DENSITY`, else dense."""
    x = (x.to_dense() if x.is_sparse else x).to(torch.float32)
    n, f = x.shape
    return (to_csr(x) if x.numel() and sparse_enough(feature_nnz(x), n, f) else x).to(device)


@torch.no_grad()
def client_logits(params: Params, client: ClientGraph, *, device="cpu") -> Tensor:
    """Eval-mode logits [n, C] of one (unbatched) model on a client's whole subgraph (CPU)."""
    dev = resolve_device(device)
    x, P = _graph(client, dev)
    return gcn_forward({k: v.to(dev) for k, v in params.items()}, x, P).cpu()


@torch.no_grad()
def client_hidden(params: Params, client: ClientGraph, *, device="cpu") -> Tensor:
    """Eval-mode post-ReLU layer-1 output [n, H] of one model on a client's subgraph (CPU)."""
    dev = resolve_device(device)
    x, P = _graph(client, dev)
    return gcn_forward({k: v.to(dev) for k, v in params.items()}, x, P, return_hidden=True)[1].cpu()


@torch.no_grad()
def batched_logits(params: Params, clients: Sequence[ClientGraph], client_of: Sequence[int], *,
                   device="cpu") -> list[Tensor]:
    """Eval-mode logits of batched model b on ``clients[client_of[b]]`` (list of [n_b, C], CPU); each
    client's graph is built once (:func:`_graph`), so model b's logits are bitwise :func:`client_logits`'."""
    dev = resolve_device(device)
    return [gcn_forward({n: v[b].to(dev) for n, v in params.items()}, *_graph(clients[int(k)], dev)).cpu()
            for b, k in enumerate(client_of)]
