"""Mask and partition draws: how far a table entry of ours moves from one data draw to the next.

Louvain and METIS partitions are deterministic, so a data seed changes only the clients'
20/40/40 masks; under Dirichlet it redraws each client's class mix too. The paper's masks and
its Dirichlet partition are one unseeded OpenFGL draw (``benchmarks/openfgl_splits.py``): no
code can regenerate them, so part of any gap may be the draw. ``configs/pace_draws.toml`` reruns
the settings in question on more data seeds into the store's ``draws/`` folder (never the main
store: a table shows one draw per setting); :func:`draw_spread` gives, per entry of a table, the
mean and range of our means over the main draw and those draws. A paper value inside that range
of at least five draws is what another draw gives (:func:`~pace_nb.analysis.causes.draw_cause`);
no interval is extrapolated beyond the draws.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

#: Folder of a results store that holds the mask draws (a results store of its own).
DRAWS_FOLDER = "draws"
#: Tables whose entries are functions of one setting's rows (Table 4 ranks methods, App. A pools
#: units; a draw with fewer methods would change what they compare).
DRAW_TABLES: tuple[str, ...] = ("1", "3", "6", "7", "8", "9", "10", "11", "12")
#: Fewest draws (the main one included) from which a spread is read.
MIN_DRAWS = 3


def data_seeds(rows: pd.DataFrame) -> pd.Series:
    """The data seed of each result row (column ``data_seed``; ``-1`` when the row records none)."""
    from pace_nb.experiments.store import normalize_rows

    frame = rows if "data_seed" in rows.columns else normalize_rows(rows).set_axis(rows.index)
    return frame["data_seed"].astype("int64")


def split_draws(rows: pd.DataFrame | None, exclude: set[int] | frozenset[int] = frozenset()) -> dict[int, pd.DataFrame]:
    """Rows grouped by data seed (rows without one and seeds in ``exclude`` are left out)."""
    if rows is None or not len(rows):
        return {}
    seeds = data_seeds(rows)
    return {int(s): g for s, g in rows.groupby(seeds) if s >= 0 and int(s) not in exclude}


def draw_spread(table_id: str, main: pd.DataFrame, draws: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Per entry of ``main`` (:func:`~pace_nb.analysis.tables.comparison` of the main draw): our means
    over the main draw and each of ``draws`` (data seed → the same table's comparison of that draw's
    rows) → ``n_draws``, ``draw_mean``, ``draw_std`` (sample), ``draw_min``, ``draw_max``.
    Tables outside :data:`DRAW_TABLES` and entries with fewer than :data:`MIN_DRAWS` draws get NaN."""
    out = pd.DataFrame({"n_draws": 0, "draw_mean": math.nan, "draw_std": math.nan, "draw_min": math.nan,
                        "draw_max": math.nan}, index=main.index)
    if table_id not in DRAW_TABLES or not draws or main.empty:
        return out
    means = [main["ours_mean"]]
    for comp in draws.values():
        if not (comp["row"].tolist() == main["row"].tolist() and comp["col"].tolist() == main["col"].tolist()):
            raise AssertionError(f"table {table_id}: a draw's entries do not line up with the main draw's")
        means.append(pd.to_numeric(comp["ours_mean"], errors="coerce").set_axis(main.index))
    m = pd.concat(means, axis=1)
    n = m.notna().sum(axis=1)
    ok = (n >= MIN_DRAWS) & main["ours_mean"].notna()
    out.loc[ok, "n_draws"] = n[ok]
    out.loc[ok, "draw_mean"] = m[ok].mean(axis=1)
    out.loc[ok, "draw_std"] = m[ok].std(axis=1)
    out.loc[ok, "draw_min"] = m[ok].min(axis=1)
    out.loc[ok, "draw_max"] = m[ok].max(axis=1)
    return out
