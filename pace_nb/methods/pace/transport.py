"""Server transport: uniform self-inclusive RegMean consensus (Eq. 6–7) and the
receiver-anchored correction (Eq. 8–9).

Inputs are the *uploaded approximations* ``Δ̄_j`` (reconstructed carriers) of all K clients,
stacked on a leading client axis, and per-layer sketches ``c_j [K, d_in]`` (Eq. 5).

* RegMean (Eq. 7 with diagonal ``C_j``, ``w_j = 1/K``)::

      Δ^C[:, d] = Σ_j Δ̄_j[:, d] c_j[d] / max(Σ_j c_j[d], ε)

  for every GCN weight matrix, also those sent dense (layer ℓ uses layer ℓ's sketch).
* "mean" (ablation): ``Δ^C = mean_j Δ̄_j``. Non-matrix parameters: plain mean always.
* Correction ``Γ_i = Δ^C − Δ̄_i`` re-truncated to rank r for eligible matrices → ``Γ̂_i``
  (Eq. 8); the receiver builds ``W_E = W_L + Γ̂_i`` (Eq. 9).
* "direct" return (ablation): every receiver gets the same compressed consensus
  ``P_r(Δ^C)`` and builds ``W_E = W0 + P_r(Δ^C)`` ("returning a compressed consensus as a
  replacement", paper §3); with ``rank = 0`` (dense) this is exactly ``W0 + Δ^C``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from collections.abc import Mapping

import torch
from torch import Tensor

from pace_nb.core.errors import ConfigError, unknown
from pace_nb.methods.pace.lowrank import Carrier, Params, compress

EPS = 1e-12
CONSENSUS = ("regmean", "mean")
RETURNS = ("correction", "direct")


@dataclass(frozen=True)
class TransportConfig:
    """``consensus``: "regmean" (PACE) | "mean"; ``ret``: "correction" (PACE) | "direct"."""

    consensus: Literal["regmean", "mean"] = "regmean"
    ret: Literal["correction", "direct"] = "correction"
    eps: float = EPS

    def __post_init__(self) -> None:
        if self.consensus not in CONSENSUS:
            raise unknown("consensus", self.consensus, CONSENSUS)
        if self.ret not in RETURNS:
            raise unknown("return mode", self.ret, RETURNS)
        if not self.eps > 0:
            raise ConfigError(f"transport eps must be > 0, got {self.eps}")


def regmean(deltas: Tensor, sketches: Tensor, eps: float = EPS) -> Tensor:
    """Eq. 7 with diagonal ``C_j = diag(c_j)``: ``deltas [K, d_out, d_in]``, ``sketches [K, d_in]``."""
    if deltas.dim() != 3 or sketches.shape != (deltas.shape[0], deltas.shape[2]):
        raise ConfigError(
            f"RegMean needs deltas [K, d_out, d_in] and sketches [K, d_in]; got "
            f"{tuple(deltas.shape)} and {tuple(sketches.shape)}")
    num = (deltas * sketches[:, None, :]).sum(dim=0)
    den = torch.clamp(sketches.sum(dim=0), min=eps)
    return num / den[None, :]


def consensus(
    deltas: Mapping[str, Tensor],
    sketches: Mapping[str, Tensor] | None,
    config: TransportConfig = TransportConfig(),
) -> Params:
    """Shared consensus ``Δ^C`` (Eq. 6–7) from client-stacked ``Δ̄`` (leading axis K).

    ``sketches`` maps each weight-matrix name to ``[K, d_in]``; required for "regmean".
    """
    out: Params = {}
    for name, d in deltas.items():
        if config.consensus == "regmean" and d.dim() == 3:
            if sketches is None or name not in sketches:
                raise ConfigError(f"RegMean consensus needs a sketch for {name!r}")
            out[name] = regmean(d, sketches[name].to(d.dtype), config.eps)
        else:
            out[name] = d.mean(dim=0)
    return out


def corrections(cons: Mapping[str, Tensor], deltas: Mapping[str, Tensor]) -> Params:
    """``Γ_i = Δ^C − Δ̄_i`` for every client i (leading axis K) (Eq. 8, before ``P_r``)."""
    return {name: cons[name].unsqueeze(0) - deltas[name] for name in deltas}


def server_returns(
    deltas: Mapping[str, Tensor],
    sketches: Mapping[str, Tensor] | None,
    rank: int,
    config: TransportConfig = TransportConfig(),
) -> dict[str, Carrier]:
    """Per-receiver return carriers, batched over K: ``P_r(Γ_i)`` or (direct) ``P_r(Δ^C)``."""
    cons = consensus(deltas, sketches, config)
    if config.ret == "direct":
        k = next(iter(deltas.values())).shape[0]
        cons = {n: t.unsqueeze(0).expand(k, *t.shape).contiguous() for n, t in cons.items()}
        return compress(cons, rank, batch_dims=1)
    return compress(corrections(cons, deltas), rank, batch_dims=1)


def external_params(
    local: Mapping[str, Tensor], init: Mapping[str, Tensor], returned: Mapping[str, Tensor], ret: str = "correction"
) -> Params:
    """Receiver model ``W_E``: ``W_L + Γ̂_i`` (Eq. 9) or, for "direct", ``W0 + P_r(Δ^C)``."""
    if ret not in RETURNS:
        raise unknown("return mode", ret, RETURNS)
    base = local if ret == "correction" else init
    return {name: base[name] + returned[name].to(base[name].dtype) for name in base}
