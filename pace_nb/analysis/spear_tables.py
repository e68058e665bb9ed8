"""SPEAR's Tab. 2 (robustness), Tab. 3's SPEAR/FedAvg rows and Tab. 4 (ablation) from SPEAR's pooled rows.

The paper text quotes only a few numbers of these tables, so :func:`entries` adds a row for every
dataset we ran; :func:`ours` reads one entry (mean, sample std, number of data seeds) from
:func:`pooled_rows`. Tab. 1 and Tab. 3's comparison rows are :mod:`analysis.spear_comparison`'s.
"""
from __future__ import annotations

import math

import pandas as pd

from pace_nb.analysis import spear_comparison as sc
from pace_nb.core.schema import SPEAR_VARIANT_LABELS
from pace_nb.experiments.store import normalize_rows
from pace_nb.methods.registry import canonical


def entries(table: str, paper: pd.DataFrame, rows: pd.DataFrame | None) -> pd.DataFrame:
    base = dict(paper="spear", table=table, partition="dirichlet", beta=0.05, num_clients=10, rank=0,
                value=math.nan, std=math.nan, note="")
    have = normalize_rows(rows) if rows is not None and len(rows) else None
    spear = have[(have.method == "spear") & (have.partition == "dirichlet")] if have is not None else None
    datasets = sorted(set(spear.dataset)) if spear is not None else []
    extra = []
    if table == "ablation":
        extra = [dict(base, dataset=d, method="spear", variant=v, metric="acc") for d in datasets for v in SPEAR_VARIANT_LABELS]
    elif table == "robustness":
        extra = [dict(base, dataset=d, method="spear", variant=v, metric="max_drop_pts")
                 for d in datasets for v in ("edge_noise", "feature_noise")]
    elif table == "efficiency":
        extra = [dict(base, dataset=d, method=m, variant=v, metric=x) for d in datasets
                 for m, v, x in (("spear", "comm", "comm_kb"), ("spear", "comm", "seconds"),
                                 ("fedavg", "multiround", "comm_mb"), ("fedavg", "multiround", "seconds"))]
    frame = pd.concat([paper, pd.DataFrame(extra, columns=paper.columns)], ignore_index=True)
    return frame.drop_duplicates(subset=["dataset", "method", "variant", "metric"], keep="first")


def pooled_rows(rows: pd.DataFrame | None) -> pd.DataFrame | None:
    """SPEAR's pooled Dirichlet rows, without the comparison's (those belong to Tab. 1/3,
    :mod:`analysis.spear_comparison`); column ``scope`` names each robustness row's perturbation scope."""
    if rows is None or not len(rows):
        return None
    r = normalize_rows(rows)
    return r[~sc.is_comparison(r) & (r.partition == "dirichlet") & (r.receiver == -1)]


def ours(e: pd.Series, r: pd.DataFrame | None, scope: str = "clients") -> tuple[float, float, int]:
    """Entry ``e`` of a SPEAR table from :func:`pooled_rows`."""
    if r is None:
        return math.nan, math.nan, 0
    if e.metric == "max_drop_pts":  # robustness rows of the other scope are left out
        r = r[r["scope"].isin(["", scope])]
    r = r[(r.num_clients == e.num_clients) & ((r.beta - e.beta).abs() < 1e-9)]
    if e.dataset != "all":
        r = r[r.dataset == e.dataset]
    sel = lambda m, v: r[(r.method.map(canonical) == m) & (r.variant == v)]
    if e.metric == "acc":
        vals = sel(e.method, e.variant).acc
    elif e.metric == "max_drop_pts":  # clean (full) minus perturbed, paired by data seed
        clean = sel("spear", "full").groupby(["dataset", "seed"]).acc.mean()
        pert = sel("spear", e.variant).groupby(["dataset", "seed"]).acc.mean()
        drops = (clean - pert).dropna()
        if e.dataset == "all":  # the paper bounds the worst dataset mean: that dataset's drops
            if not len(drops):
                return math.nan, math.nan, 0
            worst = drops.groupby("dataset").mean().idxmax()
            vals = drops.xs(worst, level="dataset")
        else:
            vals = drops
    elif e.metric == "comm_kb":  # per client, KiB (the paper's 18.8 KB is per client)
        g = sel(e.method, e.variant)
        vals = (g.bytes_up.fillna(0) + g.bytes_down.fillna(0)) / g.num_clients / 1024
    elif e.metric == "comm_mb":  # total, MiB
        g = sel(e.method, e.variant)
        vals = (g.bytes_up.fillna(0) + g.bytes_down.fillna(0)) / 2**20
    elif e.metric == "seconds":
        vals = sel(e.method, e.variant).seconds
    elif e.metric == "speedup_vs_fedavg":
        fa = sel("fedavg", "multiround").groupby("dataset").seconds.mean()
        sp = sel("spear", "comm").groupby("dataset").seconds.mean()
        ratio = (fa / sp).dropna()
        return (ratio.max() if len(ratio) else math.nan), math.nan, int(len(ratio))
    else:
        return math.nan, math.nan, 0
    vals = pd.Series(vals).dropna()
    return (float(vals.mean()) if len(vals) else math.nan,
            float(vals.std(ddof=1)) if len(vals) > 1 else math.nan, int(len(vals)))
