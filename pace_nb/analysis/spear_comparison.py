"""SPEAR's Tab. 1 (accuracy) and Tab. 3 (time, upload per client, total communication) of SPEAR
and its 13 baselines, from the rows of :mod:`pace_nb.methods.oneshot.compare` (every method
scored on the complete graph: study "comparison", evaluation "complete_graph").

The text of SPEAR quotes two Tab. 3 numbers (paper values ``table="cost"``): 18.8 KB for SPEAR
on CiteSeer (read as per client) and 7246 MB for FedAvg (a width-256 GCN: our variant
``hidden256``). Every other cell shows ours beside "–". Units: KiB and MiB (docs/DESIGN.md §12).
"""
from __future__ import annotations

import json
import math

import pandas as pd

from pace_nb.data.datasets import dataset_order
from pace_nb.experiments.store import normalize_rows
from pace_nb.methods.registry import SPEAR_CONTEXT, method_label, spear_comparison

def comparison_label(method: str) -> str:
    """Display name of a method in SPEAR's comparison tables (the registry's, e.g. "FedOPT (FedAdam)")."""
    return method_label(method, SPEAR_CONTEXT)


#: Display of the comparison's extra variants: FedSD2C's core-set-only run, DENSE's teachers'
#: ensemble (read from the DENSE row's params), other widths (``hidden<H>``) as they are.
VARIANT_LABELS: dict[str, str] = {"coreset": "core-set only", "teacher_ensemble": "teachers' ensemble"}


def label(e) -> str:
    base = comparison_label(e.method)
    return base + ("" if e.variant in ("native", "full") else f" [{VARIANT_LABELS.get(e.variant, e.variant)}]")


def teacher_ensemble_rows(r: pd.DataFrame) -> pd.DataFrame:
    """The uploaded teachers' ensemble (DENSE's, OASIS's: any row that records one) as rows of
    their own (variant ``teacher_ensemble``): the accuracy and F1 on the complete graph that the
    method's row records in ``params`` (what its student distils), no bytes or time of their own."""
    out = []
    for _, row in r[r.params.astype(str).str.contains("teacher_ensemble_acc", regex=False)].iterrows():
        p = json.loads(row.params) if isinstance(row.params, str) and row.params else {}
        if "teacher_ensemble_acc" not in p:
            continue
        e = row.copy()
        e["variant"] = "teacher_ensemble"
        e["acc"] = float(p["teacher_ensemble_acc"])
        for k in ("f1_weighted", "f1_macro"):
            e[k] = float(p.get(f"teacher_ensemble_{k}", math.nan))
        e[["bytes_up", "bytes_down", "seconds"]] = math.nan
        out.append(e)
    return pd.DataFrame(out, columns=r.columns)


def is_comparison(rows: pd.DataFrame | pd.Series) -> pd.Series:
    """Which rows were written by SPEAR's comparison: column ``study`` is "comparison" (``rows``: a
    frame of result rows, or its ``study`` column). Its SPEAR row shares method/variant ``spear/full``
    with the ablation's (study "spear"); both are scored on the complete graph."""
    study = rows["study"] if isinstance(rows, pd.DataFrame) else rows
    return study.astype(str) == "comparison"


def _comparison_rows(rows: pd.DataFrame | None) -> pd.DataFrame | None:
    """Rows scored by SPEAR's comparison protocol (:func:`is_comparison`)."""
    if rows is None or not len(rows):
        return None
    r = normalize_rows(rows)
    r = r[is_comparison(r) & (r.partition == "dirichlet") & (r.receiver == -1)]
    ens = teacher_ensemble_rows(r)
    return pd.concat([r, ens], ignore_index=True) if len(ens) else r


def scores(entries_: pd.DataFrame, rows: pd.DataFrame | None) -> list[tuple[float, float, int]]:
    """(mean, sample std, n) over data seeds of every entry (dataset, method, variant, metric),
    the comparison rows selected once."""
    r = _comparison_rows(rows)
    return [_score(e, r) for _, e in entries_.iterrows()]


def _score(e: pd.Series, r: pd.DataFrame | None) -> tuple[float, float, int]:
    if r is None:
        return math.nan, math.nan, 0
    r = r[(r.dataset == e.dataset) & (r.num_clients == e.num_clients) & ((r.beta - e.beta).abs() < 1e-9)
          & (r.method.str.lower() == e.method) & (r.variant == e.variant)]
    if e.metric == "kib_client":
        vals = r.bytes_up / r.num_clients / 1024
    elif e.metric == "mib_total":
        vals = (r.bytes_up.fillna(0) + r.bytes_down.fillna(0)) / 2**20
    elif e.metric in ("acc", "seconds"):
        vals = r[e.metric]
    else:
        return math.nan, math.nan, 0
    vals = pd.Series(vals).dropna()
    return (float(vals.mean()) if len(vals) else math.nan,
            float(vals.std(ddof=1)) if len(vals) > 1 else math.nan, int(len(vals)))


def entries(table: str, paper: pd.DataFrame, rows: pd.DataFrame | None) -> pd.DataFrame:
    base = dict(paper="spear", table=table, partition="dirichlet", beta=0.05, num_clients=10, rank=0,
                value=math.nan, std=math.nan, note="")
    r = _comparison_rows(rows)
    datasets = sorted(set(r.dataset), key=dataset_order) if r is not None else []
    pairs = [(m, "full" if m == "spear" else "native") for m in spear_comparison()]
    if r is not None:  # other widths that were run (e.g. FedAvg at hidden 256 for Tab. 3)
        for m, v in dict.fromkeys(zip(r.method.str.lower(), r.variant, strict=True)):
            if (m, v) in pairs or (table != "main" and v == "teacher_ensemble"):
                continue
            at = [i for i, (pm, _) in enumerate(pairs) if pm == m]  # right below its own method's row
            pairs.insert(at[-1] + 1 if at else len(pairs), (m, v))
    metrics_ = ("acc",) if table == "main" else ("seconds", "kib_client", "mib_total")
    extra = [dict(base, dataset=d, method=m, variant=v, metric=x) for d in datasets for m, v in pairs for x in metrics_]
    frame = pd.concat([paper, pd.DataFrame(extra, columns=paper.columns)], ignore_index=True)
    frame = frame.drop_duplicates(subset=["dataset", "method", "variant", "metric"], keep="first")
    # columns dataset by dataset (registry order), each in the metrics' order; rows keep the methods' order
    order = [(dataset_order(d), metrics_.index(m) if m in metrics_ else len(metrics_)) for d, m in
             zip(frame["dataset"], frame["metric"], strict=True)]
    return frame.iloc[sorted(range(len(frame)), key=order.__getitem__)].reset_index(drop=True)
