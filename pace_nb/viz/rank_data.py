"""The rank explorer's data (:func:`pace_nb.viz.widgets.rank_explorer`): PACE's pooled rows per
dataset × rank as a table, and each receiver's PACE − Local difference at one rank."""
from __future__ import annotations

import pandas as pd

from pace_nb.core.errors import ConfigError


def rank_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per dataset × rank (PACE full, pooled rows): accuracy mean ± std, mean bytes up /
    down per client and their ratios to dense (percent); rank 0 = dense."""
    f = rows[(rows["method"] == "pace") & (rows["variant"] == "full") & (rows["receiver"] < 0)]
    if f.empty:
        raise ConfigError("rank_table needs pooled rows of method 'pace', variant 'full'")
    k = f["num_clients"].astype(float)
    f = f.assign(up_per_client=f["bytes_up"] / k, down_per_client=f["bytes_down"] / k)
    return f.groupby(["dataset", "rank"]).agg(
        acc_mean=("acc", "mean"), acc_std=("acc", "std"), bytes_up=("up_per_client", "mean"),
        bytes_down=("down_per_client", "mean"), upload_pct=("upload_ratio", "mean"),
        return_pct=("return_ratio", "mean"), seeds=("seed", "nunique")).reset_index()


#: Column names of the rank table as shown (units included).
RANK_COLUMNS = {"dataset": "dataset", "rank": "rank", "acc_mean": "accuracy (%)", "acc_std": "sd (points)",
                "bytes_up": "upload / client (KiB)", "bytes_down": "return / client (KiB)",
                "upload_pct": "upload (% of dense)", "return_pct": "return (% of dense)", "seeds": "seeds"}


def rank_label(rank: int) -> str:
    """A rank as the package names it: the number, or "dense" for 0."""
    return str(int(rank)) if rank else "dense"


def rank_display(tab: pd.DataFrame) -> pd.DataFrame:
    """:func:`rank_table` as shown under the explorer: KiB, one decimal, readable column names."""
    out = tab.assign(rank=tab["rank"].map(rank_label), bytes_up=tab["bytes_up"] / 1024, bytes_down=tab["bytes_down"] / 1024)
    return out.round({"acc_mean": 2, "acc_std": 2, "bytes_up": 1, "bytes_down": 1, "upload_pct": 1,
                      "return_pct": 1}).rename(columns=RANK_COLUMNS)


def rank_gains(rows: pd.DataFrame, rank: int) -> pd.DataFrame:
    """Per dataset and receiver (client): PACE(full, ``rank``) − Local on its own test nodes,
    mean over seeds (points; ``mean_diff``), seed-paired from the rows with ``receiver >= 0``;
    empty when the rows hold no per-receiver rows."""
    from pace_nb.analysis.diagnostics import receiver_means, receiver_units

    units = receiver_units(rows, ("pace", "full", int(rank)), by=["dataset"])
    return receiver_means(units, by=["dataset"]) if len(units) else units


def _ranks(tab: pd.DataFrame) -> list[int]:
    return sorted(r for r in tab["rank"].unique() if r > 0) + ([0] if (tab["rank"] == 0).any() else [])


def rank_card(tab: pd.DataFrame, rank: int) -> pd.DataFrame:
    """The rank table's rows at ``rank`` as shown under the explorer: one column per dataset,
    one row per quantity (narrow enough for a 900 px window)."""
    shown = rank_display(tab[tab["rank"] == rank]).drop(columns="rank").set_index("dataset").T
    shown.columns.name = None
    return shown.reset_index().rename(columns={"index": f"rank {rank_label(rank)}"})


__all__ = ["RANK_COLUMNS", "rank_card", "rank_display", "rank_gains", "rank_label", "rank_table"]
