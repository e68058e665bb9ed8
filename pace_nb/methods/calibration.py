"""Convex NLL logit calibration, CNLL (PACE Eq. 1, 10; App. F Eq. 14–17).

A receiver picks one scalar on the logit segment between its Local and External logits,

    z(α) = (1 − α) z_L + α z_E,            α ∈ [0, 1]                  (Eq. 1)
    α* = argmin_α NLL_val(z(α))                                          (Eq. 10)

The validation risk is convex (Eq. 16) with derivative, for ``d = z_E − z_L``,

    R'(α) = mean_v ( E_{c ~ softmax(z_v(α))}[d_{v,c}] − d_{v,y_v} )      (Eq. 15)

Resolver (released rule): ``R'(0) ≥ 0`` → α = 0 (Local bit for bit); ``R'(1) ≤ 0`` → α = 1;
otherwise 64 bisection steps on ``R'``. Empty validation set → α = 0. All in float64.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.core.errors import ConfigError

BISECTION_STEPS = 64


@dataclass(frozen=True)
class CNLLConfig:
    """``iterations``: bisection steps after the endpoint tests (paper: 64)."""

    iterations: int = BISECTION_STEPS


def check_finite(z: Tensor, what: str = "logits") -> None:
    """Raise :class:`ConfigError` when ``z`` holds NaN or ±inf."""
    if z.numel() and not bool(torch.isfinite(z).all()):
        bad = int((~torch.isfinite(z)).sum())
        raise ConfigError(f"{what} contain {bad} NaN/inf value(s); the model diverged or the input is broken — "
                          f"CNLL needs finite logits")


def blend(z_local: Tensor, z_external: Tensor, alpha: float) -> Tensor:
    """Eq. 1. ``alpha = 0`` returns ``z_local`` itself and ``alpha = 1`` ``z_external`` itself."""
    alpha = float(alpha)
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"alpha must lie in [0, 1], got {alpha}")
    if alpha == 0.0:
        return z_local
    if alpha == 1.0:
        return z_external
    return (1.0 - alpha) * z_local + alpha * z_external


def _as_f64(t) -> np.ndarray:
    return t.detach().cpu().double().numpy() if isinstance(t, Tensor) else np.asarray(t, dtype=np.float64)


def risk_derivative(alpha: float, z_local, delta, y) -> float:
    """``R'(α)`` of Eq. 15 (float64): model-implied minus label-observed displacement.

    (numpy: many tiny softmaxes are much cheaper there than in torch.)
    """
    return derivative_at(z_local, delta, y)(alpha)


def derivative_at(z_local, delta, y):
    """``α ↦ R'(α)`` (:func:`risk_derivative`) for repeated evaluation, as the bisection does: the α-free
    parts (the float64 arrays, the observed term ``d_{v,y_v}``) are formed once and the buffers reused —
    the same operations in the same order, so the same bits."""
    zl, d = _as_f64(z_local), _as_f64(delta)
    y = np.asarray(y.cpu() if isinstance(y, Tensor) else y, dtype=np.int64).reshape(-1)
    observed = np.take_along_axis(d, y[:, None], axis=-1)[:, 0]
    z, top, total = np.empty_like(zl), np.empty(zl.shape[:-1] + (1,)), np.empty(zl.shape[:-1] + (1,))

    def at(alpha: float) -> float:
        np.add(zl, np.multiply(d, alpha, out=z), out=z)  # z = zl + α d
        np.amax(z, axis=-1, keepdims=True, out=top)
        np.exp(np.subtract(z, top, out=z), out=z)
        np.sum(z, axis=-1, keepdims=True, out=total)
        np.multiply(np.divide(z, total, out=z), d, out=z)  # p ⊙ d
        return float((z.sum(axis=-1) - observed).mean())

    return at


def validation_nll(z_local: Tensor, z_external: Tensor, y: Tensor, alpha: float) -> float:
    """``R(α)`` of Eq. 14 (mean validation NLL, float64)."""
    z = (1.0 - alpha) * z_local.double() + alpha * z_external.double()
    return float(F.cross_entropy(z, y.long()))


def cnll_alpha(z_local: Tensor, z_external: Tensor, y: Tensor, config: CNLLConfig = CNLLConfig()) -> float:
    """α* of Eq. 10 on the given (validation) nodes: endpoint tests, then bisection on Eq. 15."""
    check_finite(z_local, "Local logits")
    check_finite(z_external, "External logits")
    if z_local.shape != z_external.shape or z_local.dim() != 2 or y.shape != z_local.shape[:1]:
        raise ConfigError(f"CNLL needs logits [n, C] of equal shape and labels [n]; got "
                          f"{tuple(z_local.shape)}, {tuple(z_external.shape)}, {tuple(y.shape)}")
    if y.numel() == 0:
        return 0.0
    zl = _as_f64(z_local)
    d = _as_f64(z_external) - zl
    derivative = derivative_at(zl, d, y.detach().cpu().long().numpy())
    if derivative(0.0) >= 0:
        return 0.0
    if derivative(1.0) <= 0:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(config.iterations):
        mid = 0.5 * (lo + hi)
        if derivative(mid) > 0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def calibrate(
    z_local: Tensor, z_external: Tensor, y: Tensor, val_mask: Tensor, alpha: str | float = "cnll",
    config: CNLLConfig = CNLLConfig(),
) -> tuple[float, Tensor]:
    """Receiver-local calibration: ``("cnll" | fixed α)`` → ``(α, z(α))`` over all nodes."""
    if isinstance(alpha, str):
        if alpha != "cnll":
            raise ConfigError(f"alpha must be 'cnll' or a number in [0, 1], got {alpha!r}")
        check_finite(z_local, "Local logits")
        check_finite(z_external, "External logits")
        a = cnll_alpha(z_local[val_mask], z_external[val_mask], y[val_mask], config)
    else:
        a = float(alpha)
    return a, blend(z_local, z_external, a)


def alpha_path(
    z_local: Tensor, z_external: Tensor, y: Tensor, val_mask: Tensor, test_mask: Tensor | None = None,
    num: int = 101,
) -> pd.DataFrame:
    """Validation NLL / accuracy and test accuracy along the segment (columns: alpha,
    val_nll, val_acc, test_acc), for plots of Eq. 14 and the α* it selects."""
    check_finite(z_local, "Local logits")
    check_finite(z_external, "External logits")
    if num < 2:
        raise ConfigError(f"alpha_path needs num >= 2 points, got {num}")
    zl, ze = _as_f64(z_local), _as_f64(z_external)
    yn = y.detach().cpu().long().numpy()
    val, test = val_mask.cpu().numpy(), (test_mask.cpu().numpy() if test_mask is not None else None)
    alphas = np.linspace(0.0, 1.0, num)
    rows = []
    for a in alphas:
        z = zl if a == 0 else ze if a == 1 else (1.0 - a) * zl + a * ze
        pred = z.argmax(axis=-1)
        logp = z - z.max(axis=-1, keepdims=True)
        logp = logp - np.log(np.exp(logp).sum(axis=-1, keepdims=True))
        nll = -np.take_along_axis(logp, yn[:, None], axis=-1)[:, 0]
        rows.append({
            "alpha": float(a),
            "val_nll": float(nll[val].mean()) if val.any() else float("nan"),
            "val_acc": float((pred[val] == yn[val]).mean()) if val.any() else float("nan"),
            "test_acc": float((pred[test] == yn[test]).mean()) if test is not None and test.any() else float("nan"),
        })
    return pd.DataFrame(rows)
