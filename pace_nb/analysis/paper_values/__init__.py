"""The papers' reported numbers as tidy package data (typed in from the papers).

One CSV per paper: ``pace_tables.csv`` (PACE Tables 1-12, generated from the paper text by
:mod:`pace_nb.analysis.paper_values.extract`) and ``spear_tables.csv`` (the numbers SPEAR's text
quotes; its tables themselves are not in the available text). Columns: paper, table,
dataset, num_clients, partition, beta, method, variant, rank, metric, value, std, note.
Accuracy/F1 values are percent (mean ± sample std over five seeds); ``*_pct`` metrics are
percent of dense tensor bytes; ``alpha_mean`` is a fraction.
"""
from __future__ import annotations

from functools import cache
from importlib import resources

import pandas as pd

from pace_nb.core.errors import unknown

PAPERS = ("pace", "spear")
COLUMNS = ("paper", "table", "dataset", "num_clients", "partition", "beta", "method",
           "variant", "rank", "metric", "value", "std", "note")


@cache
def _load(paper: str) -> pd.DataFrame:
    with resources.files(__name__).joinpath(f"{paper}_tables.csv").open("r", encoding="utf-8") as fh:
        frame = pd.read_csv(fh, dtype={"table": str, "note": str}, keep_default_na=True)
    frame["note"] = frame["note"].fillna("")
    return frame[list(COLUMNS)]


def paper_values(paper: str | None = None, **filters) -> pd.DataFrame:
    """The reported values of one paper (or both), filtered by column == value.

    >>> paper_values("pace", table="1", dataset="Cora", method="local", metric="acc").value.item()
    79.16
    """
    if paper is not None and paper not in PAPERS:
        raise unknown("paper", paper, PAPERS)
    frame = pd.concat([_load(p) for p in ([paper] if paper else PAPERS)], ignore_index=True)
    for col, want in filters.items():
        if col not in frame.columns:
            raise unknown("paper-value column", col, COLUMNS)
        want = str(want) if col == "table" else want
        frame = frame[frame[col].isin(want) if isinstance(want, (list, tuple, set)) else frame[col] == want]
    return frame.reset_index(drop=True)
