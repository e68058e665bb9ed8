"""The one summariser: mean ± sample std over seeds, one row per setting (PACE §4 reporting).

Used by ``pace-nb run`` (in the order the methods ran), the tables (sorted) and the notebooks.
"""
from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np
import pandas as pd

from pace_nb.core.errors import ConfigError
from pace_nb.core.schema import SETTING
from pace_nb.experiments.store import filter_rows, load_results, normalize_rows


def _check_unmixed(pooled: pd.DataFrame, by: list[str]) -> None:
    """One pooled row per setting × seed: two (other ``params``, e.g. another data seed or
    training config) would silently average two experiments; that is a ConfigError."""
    twice = pooled.duplicated(subset=by + ["seed"], keep=False)
    if twice.any():
        row = pooled[twice].iloc[0]
        same = pooled[twice & (pooled[by + ["seed"]] == row[by + ["seed"]]).all(axis=1)]
        what = ", ".join(f"{c}={row[c]}" for c in by if row[c] != "")
        raise ConfigError(f"the rows mix {len(same)} runs of one setting ({what}, seed {row['seed']}) that differ in "
                          f"params ({' | '.join(same['params'].astype(str).tolist()[:2])}); filter the rows or keep "
                          f"such runs in separate results stores")


def summarize(rows: pd.DataFrame | str | os.PathLike | None = None, by: Iterable[str] = SETTING, *,
              sort: bool = True, **filters) -> pd.DataFrame:
    """Mean ± sample std over seeds of the pooled rows, one row per setting.

    ``rows``: a rows DataFrame, or a store path (None → default store). Columns: the ``by``
    keys, ``evaluation`` (where the rows were scored, ``core.schema.EVALUATIONS``; a setting scored
    in two places lists both, comma separated), ``n_seeds``, ``acc_mean/acc_std``, ``f1w_mean/f1w_std``, ``f1m_mean/f1m_std``,
    ``alpha_mean``, ``alpha_zero_frac``, ``alpha_one_frac`` (over receiver rows),
    ``upload_ratio``, ``return_ratio``, ``seconds``. ``sort=False`` keeps the rows' order.
    """
    frame = normalize_rows(rows) if isinstance(rows, pd.DataFrame) else load_results(rows)
    frame = filter_rows(frame, filters)
    by = list(by)
    keys = frame[by].astype(object).where(frame[by].notna(), "")  # NaN beta must not drop groups
    frame = frame.assign(**{c: keys[c] for c in by})
    pooled, recv = frame[frame.receiver == -1], frame[frame.receiver >= 0]
    _check_unmixed(pooled, by)
    where = {} if "evaluation" in by else {"evaluation": ("evaluation", lambda e: ",".join(sorted(set(e))))}
    out = pooled.groupby(by, sort=sort, dropna=False).agg(
        **where, n_seeds=("seed", "nunique"), acc_mean=("acc", "mean"), acc_std=("acc", "std"),
        f1w_mean=("f1_weighted", "mean"), f1w_std=("f1_weighted", "std"),
        f1m_mean=("f1_macro", "mean"), f1m_std=("f1_macro", "std"),
        upload_ratio=("upload_ratio", "mean"), return_ratio=("return_ratio", "mean"),
        seconds=("seconds", "mean")).reset_index()
    alpha = recv.dropna(subset=["alpha"]).groupby(by, dropna=False)["alpha"].agg(
        alpha_mean="mean", alpha_zero_frac=lambda a: float((a == 0).mean()),
        alpha_one_frac=lambda a: float((a == 1).mean())).reset_index()
    out = out.merge(alpha, on=by, how="left") if len(alpha) else out.assign(
        alpha_mean=np.nan, alpha_zero_frac=np.nan, alpha_one_frac=np.nan)
    if "beta" in by:
        out["beta"] = pd.to_numeric(out["beta"].replace("", np.nan), errors="coerce")
    return out
