"""Receiver-harm diagnostics (PACE App. A, Fig. 4): pure functions of a results DataFrame.

Everything compares a *treatment* arm with a *control* arm (default: PACE full vs Local),
paired within the same dataset, partition, client count and run seed (and receiver, for
the receiver–seed units). An arm is ``(method, variant)`` or ``(method, variant, rank)``;
values are result-row percent, so differences are in percentage points.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from pace_nb.core.errors import ConfigError
from pace_nb.core.schema import FEDERATION

#: One experimental setting (everything but the seed, method and receiver).
SETTING = FEDERATION
PACE = ("pace", "full")
LOCAL = ("local", "native")
TOL = 0.01  # points: |difference| <= TOL is a tie (App. A)


def _arm(rows: pd.DataFrame, arm: Sequence) -> pd.DataFrame:
    method, variant, *rank = arm
    sel = (rows["method"] == method) & (rows["variant"] == variant)
    if rank:
        sel &= rows["rank"] == int(rank[0])
    return rows[sel]


def _keys(frame: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
    """Replace NaN keys (beta of non-Dirichlet rows) by a sentinel so merges/groupbys keep them."""
    frame = frame.copy()
    if "beta" in frame.columns:
        frame["beta"] = frame["beta"].fillna(-1.0)
    for col in cols:
        if col not in frame.columns:
            frame[col] = -1.0 if col == "beta" else ""
    return frame


def _restore(frame: pd.DataFrame) -> pd.DataFrame:
    if "beta" in frame.columns:
        frame["beta"] = frame["beta"].where(frame["beta"] >= 0, np.nan)
    return frame


def paired_differences(rows: pd.DataFrame, treatment: Sequence = PACE, control: Sequence = LOCAL,
                       metric: str = "acc", receivers: bool = False,
                       by: Sequence[str] = SETTING) -> pd.DataFrame:
    """Seed-paired ``treatment − control`` differences of ``metric`` (points).

    Pooled rows (``receiver == -1``) by default; ``receivers=True`` pairs receiver–seed
    units (``receiver >= 0``) instead. When the control arm has no receiver rows, the
    treatment row's ``<metric>_local`` column (e.g. ``acc_local``) is used as the control
    if present. Returns the ``by`` keys, ``seed`` (and ``receiver``), ``treatment``,
    ``control``, ``diff``.
    """
    if metric not in rows.columns:
        raise ConfigError(f"unknown metric {metric!r}; result columns: {', '.join(rows.columns)}")
    part = rows[rows["receiver"] >= 0] if receivers else rows[rows["receiver"] == -1]
    unit = list(by) + ["seed"] + (["receiver"] if receivers else [])
    t = _keys(_arm(part, treatment), unit)
    c = _keys(_arm(part, control), unit)
    fallback = f"{metric}_local"
    if c.empty and receivers and tuple(control[:2]) == LOCAL and fallback in t.columns:
        c = t[unit + [fallback]].rename(columns={fallback: metric})
    for name, frame in (("treatment", t), ("control", c)):
        dup = frame.duplicated(subset=unit)
        if dup.any():
            raise ConfigError(f"{name} arm {tuple((treatment, control)[name == 'control'])} has "
                              f"{int(dup.sum())} duplicate rows per unit; give the rank as a third element")
    merged = t[unit + [metric]].merge(c[unit + [metric]], on=unit, suffixes=("_t", "_c"), how="inner")
    merged = merged.rename(columns={f"{metric}_t": "treatment", f"{metric}_c": "control"})
    merged["diff"] = merged["treatment"] - merged["control"]
    return _restore(merged.sort_values(unit, kind="stable").reset_index(drop=True))


def paired_t(diffs: Iterable[float], confidence: float = 0.95) -> dict:
    """Mean difference with a two-sided paired t interval (t.ppf((1+conf)/2, n−1) · s/√n).

    Same statistic as ``scipy.stats.ttest_rel`` on the two paired samples. Zero-variance
    differences give a zero-width interval (t and p undefined unless the mean is 0).
    """
    d = np.asarray(list(diffs), dtype=float)
    d = d[~np.isnan(d)]
    n = d.size
    out = {"n": n, "mean": float(d.mean()) if n else math.nan, "std": math.nan, "se": math.nan,
           "ci_low": math.nan, "ci_high": math.nan, "t": math.nan, "p": math.nan}
    if n < 2:
        return out
    sd = float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    half = float(stats.t.ppf(0.5 + confidence / 2.0, n - 1)) * se
    out.update(std=sd, se=se, ci_low=out["mean"] - half, ci_high=out["mean"] + half)
    if se > 0:
        out["t"] = out["mean"] / se
        out["p"] = float(2 * stats.t.sf(abs(out["t"]), n - 1))
    elif out["mean"] == 0:
        out["t"], out["p"] = 0.0, 1.0
    return out


def win_tie_loss(diffs: Iterable[float], tol: float = TOL) -> tuple[int, int, int]:
    """Counts of differences above ``tol``, within ±``tol`` (ties), below −``tol``."""
    d = np.asarray(list(diffs), dtype=float)
    d = d[~np.isnan(d)]
    eps = 1e-9  # a displayed 0.01 difference of two-decimal percents is a tie
    return int((d > tol + eps).sum()), int((np.abs(d) <= tol + eps).sum()), int((d < -tol - eps).sum())


def paired_summary(rows: pd.DataFrame, treatment: Sequence = PACE, control: Sequence = LOCAL,
                   metrics: Sequence[str] = ("acc", "f1_weighted"), confidence: float = 0.95,
                   tol: float = TOL, by: Sequence[str] = SETTING) -> pd.DataFrame:
    """Per setting and metric: mean paired difference, t interval, p, Win/Tie/Loss (Fig. 4a–b)."""
    recs = []
    for metric in metrics:
        diffs = _keys(paired_differences(rows, treatment, control, metric, by=by), by)
        for key, grp in diffs.groupby(list(by), sort=True):
            w, t, l = win_tie_loss(grp["diff"], tol)
            recs.append({**dict(zip(by, key, strict=True)), "metric": metric,
                         **paired_t(grp["diff"], confidence), "wins": w, "ties": t, "losses": l})
    cols = list(by) + ["metric", "n", "mean", "std", "se", "ci_low", "ci_high", "t", "p", "wins", "ties", "losses"]
    return _restore(pd.DataFrame(recs, columns=cols))


def receiver_units(rows: pd.DataFrame, treatment: Sequence = PACE, control: Sequence = LOCAL,
                   metric: str = "acc", by: Sequence[str] = SETTING) -> pd.DataFrame:
    """Receiver–seed units with their ``diff`` (points) on the receiver's own test nodes."""
    return paired_differences(rows, treatment, control, metric, receivers=True, by=by)


def harm_counts(units: pd.DataFrame, tol: float = TOL, by: Sequence[str] | None = SETTING) -> pd.DataFrame:
    """Helped / tied / harmed receiver–seed units, per setting (``by``) or overall (``by=None``)."""
    frame = _keys(units, by or [])
    groups = frame.groupby(list(by), sort=True) if by else [((), frame)]
    recs = []
    for key, grp in groups:
        h, t, m = win_tie_loss(grp["diff"], tol)
        key = key if isinstance(key, tuple) else (key,)
        recs.append({**dict(zip(by or [], key, strict=True)), "units": len(grp), "helped": h, "tied": t, "harmed": m})
    return _restore(pd.DataFrame(recs))


def receiver_means(units: pd.DataFrame, by: Sequence[str] = SETTING) -> pd.DataFrame:
    """Per fixed receiver: mean ``diff`` over its seeds (``n_seeds``), ``min_diff`` (worst seed)."""
    frame = _keys(units, by)
    out = frame.groupby(list(by) + ["receiver"], sort=True)["diff"].agg(
        mean_diff="mean", min_diff="min", n_seeds="count").reset_index()
    return _restore(out)


def worst_receiver(units: pd.DataFrame, by: Sequence[str] | None = None) -> pd.DataFrame:
    """Receivers with nonnegative mean, worst receiver mean and worst single unit (App. A).

    ``by=None`` pools all settings (the paper pools the three citation datasets).
    """
    means = receiver_means(units)
    frame, mframe = _keys(units, by or []), _keys(means, by or [])
    groups = mframe.groupby(list(by), sort=True) if by else [((), mframe)]
    recs = []
    for key, grp in groups:
        key = key if isinstance(key, tuple) else (key,)
        sel = frame
        for col, val in zip(by or [], key, strict=True):
            sel = sel[sel[col] == val]
        worst = sel.loc[sel["diff"].idxmin()]
        wm = grp.loc[grp["mean_diff"].idxmin()]
        recs.append({**dict(zip(by or [], key, strict=True)), "receivers": len(grp),
                     "nonnegative_means": int((grp["mean_diff"] >= -1e-9).sum()),
                     "worst_mean": float(wm["mean_diff"]), "worst_mean_dataset": wm["dataset"],
                     "worst_mean_receiver": int(wm["receiver"]), "worst_unit": float(worst["diff"]),
                     "worst_unit_dataset": worst["dataset"], "worst_unit_seed": int(worst["seed"]),
                     "worst_unit_receiver": int(worst["receiver"])})
    return _restore(pd.DataFrame(recs))


def alpha_utilisation(rows: pd.DataFrame, arm: Sequence = PACE, by: Sequence[str] = SETTING) -> pd.DataFrame:
    """CNLL α use per setting over receiver–seed units: mean α, share α = 0, share α = 1 (Table 3)."""
    part = _keys(_arm(rows[rows["receiver"] >= 0], arm).dropna(subset=["alpha"]), by)
    out = part.groupby(list(by), sort=True)["alpha"].agg(
        units="count", alpha_mean="mean", alpha_zero_frac=lambda a: float((a == 0).mean()),
        alpha_one_frac=lambda a: float((a == 1).mean())).reset_index()
    return _restore(out)


def diagnostics_report(rows: pd.DataFrame, treatment: Sequence = PACE, control: Sequence = LOCAL,
                       tol: float = TOL) -> dict[str, pd.DataFrame]:
    """Every App. A diagnostic at once (the frames a notebook or ``pace-nb`` prints)."""
    units = receiver_units(rows, treatment, control)
    return {"paired": paired_summary(rows, treatment, control, tol=tol),
            "harm": harm_counts(units, tol), "harm_total": harm_counts(units, tol, by=None),
            "receivers": receiver_means(units),
            "worst": worst_receiver(units) if len(units) else pd.DataFrame(),
            "alpha": alpha_utilisation(rows, treatment)}
