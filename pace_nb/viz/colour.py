"""Colour-vision checks of the palette: a deuteranopia simulation and CIELAB colour differences.

* :func:`simulate_cvd` — Machado, Oliveira & Fernandes (2009), "A physiologically-based model for
  simulation of color vision deficiency", the severity-1.0 matrices, applied in linear sRGB.
* :func:`to_lab` — sRGB (hex) → CIELAB under D65 (IEC 61966-2-1 transfer curve, CIE 1976 L*a*b*).
* :func:`min_delta_e` — the smallest pairwise CIE76 ΔE of a set of colours, optionally as seen
  under a colour-vision deficiency (what tells two methods of one figure apart).
"""
from __future__ import annotations

from itertools import combinations
from collections.abc import Iterable

import numpy as np
from matplotlib.colors import to_rgb

from pace_nb.core.errors import ConfigError

#: Machado et al. (2009), Table 1, severity 1.0 (linear RGB → linear RGB).
MACHADO: dict[str, np.ndarray] = {
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968],
                              [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
    "protanopia": np.array([[0.152286, 1.052583, -0.204868],
                            [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "tritanopia": np.array([[1.255528, -0.076749, -0.178779],
                            [-0.078411, 0.930809, 0.147602],
                            [0.004733, 0.691367, 0.303900]]),
}
_XYZ = np.array([[0.4124564, 0.3575761, 0.1804375],   # linear sRGB → XYZ (D65)
                 [0.2126729, 0.7151522, 0.0721750],
                 [0.0193339, 0.1191920, 0.9503041]])
_WHITE = _XYZ.sum(axis=1)


def _linear(rgb: np.ndarray) -> np.ndarray:
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def _encode(lin: np.ndarray) -> np.ndarray:
    lin = np.clip(lin, 0.0, 1.0)
    return np.where(lin <= 0.0031308, 12.92 * lin, 1.055 * lin ** (1 / 2.4) - 0.055)


def _rgb(colours: Iterable) -> np.ndarray:
    return np.array([to_rgb(c) for c in colours], dtype=float).reshape(-1, 3)


def simulate_cvd(colours: Iterable, kind: str = "deuteranopia") -> np.ndarray:
    """sRGB colours (``[n, 3]`` in 0–1) as seen with ``kind`` colour blindness (Machado 2009)."""
    if kind not in MACHADO:
        raise ConfigError(f"unknown colour-vision deficiency {kind!r}; valid: {', '.join(MACHADO)}")
    return _encode(_linear(_rgb(colours)) @ MACHADO[kind].T)


def to_lab(colours: Iterable) -> np.ndarray:
    """CIELAB (D65) of sRGB colours: ``[n, 3]`` columns L*, a*, b*."""
    xyz = (_linear(_rgb(colours)) @ _XYZ.T) / _WHITE
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])], axis=1)


def delta_e(a, b) -> float:
    """CIE76 colour difference between two colours."""
    la, lb = to_lab([a, b])
    return float(np.linalg.norm(la - lb))


def min_delta_e(colours: Iterable, cvd: str | None = "deuteranopia") -> tuple[float, tuple[int, int]]:
    """Smallest pairwise CIE76 ΔE of ``colours`` (under ``cvd``; None: normal vision) and the pair."""
    rgb = _rgb(colours)
    if len(rgb) < 2:
        raise ConfigError("min_delta_e needs at least two colours")
    lab = to_lab(simulate_cvd(rgb, cvd) if cvd else rgb)
    return min((float(np.linalg.norm(lab[i] - lab[j])), (i, j)) for i, j in combinations(range(len(lab)), 2))
