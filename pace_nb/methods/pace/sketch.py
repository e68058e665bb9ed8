"""Propagated-message second-moment sketches (PACE Eq. 4–5).

For GCN layer ℓ with input ``H^(ℓ)`` (layer 1: ``X``; layer 2: ``ReLU`` of layer 1 in eval
mode, i.e. no dropout) and normalized propagation ``P``, the effective linear-layer input
is ``S = P·H^(ℓ)`` (Eq. 3). The client measures on its TRAIN nodes

    m = mean_{v ∈ train} S_v ⊙ S_v                        (Eq. 4)
    m̃ = m / max(mean(m), ε),   c = m̃ + ε,   ε = 1e-12     (Eq. 5)

``c`` weights the *input* columns of the PyG weight ``[d_out, d_in]``. The raw-activation
variant (Table 2) uses ``H`` instead of ``P·H``. Sketches never read labels.
"""
from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from typing import Literal
from collections.abc import Mapping

import torch
from torch import Tensor

from pace_nb.core.errors import ConfigError, unknown

EPS = 1e-12
SketchKind = Literal["propagated", "raw"]
SKETCH_KINDS = ("propagated", "raw")
_LAYER = re.compile(r"^conv(\d+)\.weight$")


@dataclass(frozen=True)
class SketchConfig:
    """``kind``: "propagated" (S = P·H, PACE) or "raw" (H; ablation). ``eps`` of Eq. 5."""

    kind: SketchKind = "propagated"
    eps: float = EPS

    def __post_init__(self) -> None:
        if self.kind not in SKETCH_KINDS:
            raise unknown("sketch kind", self.kind, SKETCH_KINDS)
        if not self.eps > 0:
            raise ConfigError(f"sketch eps must be > 0, got {self.eps}")


def weight_names(params: Mapping[str, Tensor]) -> list[str]:
    """GCN weight matrices in layer order (``conv1.weight``, ``conv2.weight``, …)."""
    names = [n for n in params if _LAYER.match(n)]
    return sorted(names, key=lambda n: int(_LAYER.match(n).group(1)))  # type: ignore[union-attr]  # matched above


def _propagate(prop: Tensor, h: Tensor) -> Tensor:
    return torch.sparse.mm(prop, h) if prop.is_sparse else prop @ h


def layer_inputs(params: Mapping[str, Tensor], x: Tensor, prop: Tensor) -> list[Tensor]:
    """Eval-mode inputs ``H^(ℓ)`` of every GCN layer: ``[X, ReLU(P X W1ᵀ + b1), …]`` (Eq. 3)."""
    names = weight_names(params)
    inputs = [x]
    h = x
    for name in names[:-1]:
        bias = params.get(name.replace("weight", "bias"))
        z = _propagate(prop, h @ params[name].transpose(-1, -2))
        h = torch.relu(z + bias if bias is not None else z)
        inputs.append(h)
    return inputs


def moment_sketch(s: Tensor, train_mask: Tensor, eps: float = EPS) -> Tensor:
    """``c = m̃ + ε`` of Eq. 4–5 from the linear-layer input ``S [n, d]`` (rows = nodes).

    A client without training nodes has ``m = 0`` (no evidence), hence ``c = ε``.
    """
    rows = s[train_mask]
    if rows.shape[0] == 0:
        m = torch.zeros(s.shape[1], dtype=s.dtype, device=s.device)
    else:
        m = (rows * rows).mean(dim=0)
    m_tilde = m / torch.clamp(m.mean(), min=eps)
    return m_tilde + eps


def client_sketches(
    params: Mapping[str, Tensor],
    x: Tensor,
    prop: Tensor,
    train_mask: Tensor,
    config: SketchConfig = SketchConfig(),
    known: Mapping[str, Tensor] | None = None,
) -> dict[str, Tensor]:
    """Per-layer sketches of one client's Local model, keyed by the weight they weight.

    ``params``: the client's (unbatched) Local Params; ``prop``: its normalized propagation
    matrix (sparse or dense ``[n, n]``). Returns ``{"conv1.weight": c1 [F], "conv2.weight": c2 [H]}``.
    ``known``: sketches measured before, returned as given — layer 1's reads the data alone
    (``S = P·X``), so it is the same for every model of a client (:func:`client_data`).
    """
    with torch.no_grad():
        inputs = layer_inputs(params, x, prop)
        out = {}
        for name, h in zip(weight_names(params), inputs, strict=True):
            if known is not None and name in known:
                out[name] = known[name]
                continue
            s = _propagate(prop, h) if config.kind == "propagated" else h
            out[name] = moment_sketch(s, train_mask, config.eps)
    return out


#: id(client) -> (weak reference to it, {sketch config: its data}); an entry lives while its client does.
_CLIENT_DATA: dict[int, tuple[weakref.ref, dict]] = {}


def client_data(client, config: SketchConfig = SketchConfig()) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """A client's propagation matrix, float32 dense features and layer-1 sketch (``{"conv1.weight": c1}``):
    what its sketches read of the data alone, the same for every seed and variant of a run, so measured
    once per client object (by identity; clients are read-only) and dropped with it."""
    held = _CLIENT_DATA.get(id(client))
    if held is None or held[0]() is not client:
        key = id(client)
        held = (weakref.ref(client, lambda _ref: _CLIENT_DATA.pop(key, None)), {})
        _CLIENT_DATA[key] = held
    if config not in held[1]:
        from pace_nb.nn.gcn import propagation_matrix

        prop = propagation_matrix(client.edge_index, client.num_nodes)
        x = (client.x.to_dense() if client.x.is_sparse else client.x).float()
        with torch.no_grad():
            first = moment_sketch(_propagate(prop, x) if config.kind == "propagated" else x, client.train_mask,
                                  config.eps)
        held[1][config] = (prop, x, {"conv1.weight": first})
    return held[1][config]
