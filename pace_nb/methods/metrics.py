"""Classification metrics with a fixed class set, paired t intervals and Win/Tie/Loss.

Metric functions return fractions in [0, 1] (like scikit-learn); result rows store percent.
F1 scores use ``labels=range(C)`` so that every dataset-level class counts, also classes a
receiver never sees (macro-F1 of the paper's Table 10 is "fixed-class").
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from pace_nb.core.errors import ConfigError


def _arrays(y_true, y_pred) -> tuple[np.ndarray, np.ndarray]:
    yt = np.asarray(y_true.cpu() if hasattr(y_true, "cpu") else y_true).reshape(-1)
    yp = np.asarray(y_pred.cpu() if hasattr(y_pred, "cpu") else y_pred).reshape(-1)
    if yt.shape != yp.shape:
        raise ConfigError(f"labels and predictions differ in length: {yt.shape[0]} vs {yp.shape[0]}")
    return yt, yp


def accuracy(y_true, y_pred) -> float:
    """Fraction of correct predictions (NaN for no nodes)."""
    yt, yp = _arrays(y_true, y_pred)
    return float((yt == yp).mean()) if yt.size else float("nan")


def f1(y_true, y_pred, num_classes: int, average: str = "weighted") -> float:
    """F1 over the fixed class set ``range(num_classes)`` ("weighted" or "macro"): per class
    ``2·tp / (n_true + n_pred)`` (0 when the class is neither true nor predicted), averaged with the
    classes' true counts as weights or uniformly — the arithmetic of scikit-learn's ``f1_score`` with
    ``labels=range(C)``, ``zero_division=0``, from three ``bincount`` s."""
    yt, yp = _arrays(y_true, y_pred)
    if not yt.size:
        return float("nan")
    if average not in ("weighted", "macro"):
        raise ConfigError(f"average must be 'weighted' or 'macro', got {average!r}")
    yt, yp = yt.astype(np.int64, copy=False), yp.astype(np.int64, copy=False)

    def counts(v: np.ndarray) -> np.ndarray:
        return np.bincount(v[(v >= 0) & (v < num_classes)], minlength=num_classes)[:num_classes]

    tp, n_true, n_pred = counts(yt[yt == yp]), counts(yt), counts(yp)
    denom = n_true.astype(np.float64) + n_pred.astype(np.float64)
    score = 2.0 * tp.astype(np.float64) / np.where(denom == 0, 1.0, denom)
    score[denom == 0] = 0.0
    if average == "macro":
        return float(np.mean(score))
    weights = n_true.astype(np.float64)
    scale = weights.sum()
    return float((score * weights).sum() / scale) if scale > 0 else float(np.mean(score))


def scores(y_true, y_pred, num_classes: int) -> dict[str, float]:
    """``{"acc", "f1_weighted", "f1_macro"}`` as fractions."""
    return {
        "acc": accuracy(y_true, y_pred),
        "f1_weighted": f1(y_true, y_pred, num_classes, "weighted"),
        "f1_macro": f1(y_true, y_pred, num_classes, "macro"),
    }


def predicted_class_entropy(y_pred, num_classes: int) -> float:
    """Entropy of the predicted-class shares over ``log(num_classes)``, in [0, 1]: 0 when every node
    gets one class (a constant, e.g. majority-class, predictor), 1 when all classes are predicted
    equally often. No labels are read. NaN for no nodes."""
    yp = np.asarray(y_pred.cpu() if hasattr(y_pred, "cpu") else y_pred).reshape(-1)
    if num_classes < 2:
        raise ConfigError(f"predicted-class entropy needs at least 2 classes, got {num_classes}")
    if not yp.size:
        return float("nan")
    share = np.bincount(yp.astype(np.int64), minlength=num_classes) / yp.size
    share = share[share > 0]
    return float(-(share * np.log(share)).sum() / np.log(num_classes))


@dataclass(frozen=True)
class PairedInterval:
    """Mean paired difference ``a − b`` with its two-sided t confidence interval."""

    mean: float
    low: float
    high: float
    n: int

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def paired_t_interval(a, b, confidence: float = 0.95) -> PairedInterval:
    """Paired t interval for ``mean(a − b)`` (seed-paired, App. A); n − 1 degrees of freedom."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ConfigError(f"paired samples need equal 1-D shapes, got {a.shape} and {b.shape}")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence}")
    diff = a - b
    n = diff.size
    mean = float(diff.mean()) if n else float("nan")
    if n < 2:
        return PairedInterval(mean, float("nan"), float("nan"), n)
    sem = float(diff.std(ddof=1)) / np.sqrt(n)
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sem
    return PairedInterval(mean, mean - half, mean + half, n)


def win_tie_loss(a, b, tol: float = 0.01) -> tuple[int, int, int]:
    """Counts of ``a − b > tol`` / ``|a − b| ≤ tol`` / ``a − b < −tol`` (same units as a, b)."""
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if tol < 0:
        raise ConfigError(f"tolerance must be >= 0, got {tol}")
    return int((diff > tol).sum()), int((np.abs(diff) <= tol).sum()), int((diff < -tol).sum())
