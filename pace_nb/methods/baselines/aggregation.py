"""Pure server-side helpers of the federated mechanism (:mod:`.base`): batched views, FedAvg
weights, personalized mixing, broadcast and byte counts. Functions of tensors only.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from pace_nb.core.errors import ConfigError
from pace_nb.nn.gcn import Params



def per_seed(t: Tensor, num_seeds: int, num_clients: int) -> Tensor:
    """View a batched tensor ``[S*K, ...]`` as ``[S, K, ...]`` (seed-major order)."""
    if t.shape[0] != num_seeds * num_clients:
        raise ConfigError(f"expected {num_seeds}×{num_clients} models, got leading size {t.shape[0]}")
    return t.reshape(num_seeds, num_clients, *t.shape[1:])


def size_weights(sizes: Tensor) -> Tensor:
    """FedAvg weights ``n_k / Σ_j n_j`` (McMahan et al. 2017)."""
    sizes = torch.as_tensor(sizes, dtype=torch.float64)
    if sizes.dim() != 1 or sizes.numel() == 0 or bool((sizes < 0).any()) or float(sizes.sum()) <= 0:
        raise ConfigError(f"client sizes must be a non-empty vector of non-negative counts with a positive sum, got {sizes.tolist()}")
    return sizes / sizes.sum()


def mix(params: Params, weights: Tensor, num_seeds: int, num_clients: int,
        keys: Sequence[str] | None = None) -> Params:
    """Personalized aggregation: receiver ``i`` of seed ``s`` gets ``Σ_j W[s, i, j] θ_{s, j}``.

    ``params`` is batched ``[S*K, ...]``; ``weights`` is ``[S, R, K]`` (or ``[R, K]``, shared by
    every seed). Returns batched ``[S*R, ...]`` for ``keys`` (default: every key).
    """
    w = torch.as_tensor(weights)
    if w.dim() == 2:
        w = w.expand(num_seeds, *w.shape)
    if w.dim() != 3 or w.shape[0] != num_seeds or w.shape[2] != num_clients:
        raise ConfigError(f"mixing weights must be [S={num_seeds}, R, K={num_clients}], got {tuple(w.shape)}")
    out = {}
    for key in (keys if keys is not None else list(params)):
        v = per_seed(params[key], num_seeds, num_clients)
        flat = v.reshape(num_seeds, num_clients, -1)
        mixed = torch.einsum("srk,skd->srd", w.to(flat.dtype), flat)
        out[key] = mixed.reshape(num_seeds * w.shape[1], *v.shape[2:])
    return out


def weighted_mean(params: Params, weights: Tensor, num_seeds: int, num_clients: int,
                  keys: Sequence[str] | None = None) -> Params:
    """One global model per seed: ``θ_s = Σ_k w_k θ_{s, k}`` (``weights`` [K], e.g. :func:`size_weights`).

    Returns ``[S, ...]`` for ``keys``; :func:`broadcast` hands the same tensor to every receiver, so
    all receivers of a seed hold bitwise the same model (a per-receiver mix need not: its products
    may round differently row by row).
    """
    w = torch.as_tensor(weights)
    if w.dim() != 1 or w.shape[0] != num_clients:
        raise ConfigError(f"global-model weights must be [K={num_clients}], got {tuple(w.shape)}")
    out = {}
    for key in (keys if keys is not None else list(params)):
        v = per_seed(params[key], num_seeds, num_clients)
        flat = v.reshape(num_seeds, num_clients, -1)
        out[key] = torch.einsum("k,skd->sd", w.to(flat.dtype), flat).reshape(num_seeds, *v.shape[2:])
    return out


def broadcast(global_params: Params, num_seeds: int, num_clients: int) -> Params:
    """Per-seed global models ``[S, ...]`` → one copy per receiver ``[S*K, ...]``."""
    return {k: v.repeat_interleave(num_clients, dim=0) for k, v in global_params.items()}


def nbytes(tensors) -> int:
    """Dense float32 bytes of a tensor collection (dict values / list / single tensor)."""
    if isinstance(tensors, Tensor):
        return 4 * int(tensors.numel())
    if isinstance(tensors, dict):
        tensors = list(tensors.values())
    return sum(nbytes(t) for t in tensors)
