"""The one migration of stored result rows: the dimensions older rows kept in ``params`` only.

Rows written before ``study``, ``evaluation``, ``beta``, ``scope``, ``data_seed`` and ``run_seed``
were columns (the shipped ``results/``) get them from their ``params`` JSON and ``seed`` column,
with the values today's row builders set (``core.schema.COLUMNS``). Only missing values are
derived (column absent, or NaN in a row; "" too for ``study`` / ``evaluation``), so a frame mixing old and new cells migrates row
by row and a row that has them is never changed. Called by
:func:`pace_nb.experiments.store.normalize_rows`, where the rules are listed.
"""
from __future__ import annotations

import json
import math
from typing import Any
from collections.abc import Mapping

import numpy as np
import pandas as pd

from pace_nb.core.config import PAPER_SEEDS

#: The derived columns, in the order they are derived (``evaluation`` and the seeds need ``study``).
DERIVED: tuple[str, ...] = ("study", "evaluation", "beta", "scope", "data_seed", "run_seed")
_TEXT = ("study", "evaluation", "scope")


def params_dict(params: Any) -> dict:
    """A row's ``params`` JSON as a dict ({} when empty or not an object)."""
    try:
        obj = json.loads(params) if isinstance(params, str) and params else {}
    except ValueError:
        return {}
    return obj if isinstance(obj, dict) else {}


def params_value(obj: Mapping, name: str) -> float:
    """Number ``name`` of a params dict (top level or nested), else NaN."""
    stack = [obj]
    while stack:
        cur = stack.pop()
        if isinstance(cur, Mapping):
            if name in cur and isinstance(cur[name], (int, float)) and not isinstance(cur[name], bool):
                return float(cur[name])
            stack.extend(v for v in cur.values() if isinstance(v, Mapping))
    return math.nan


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


def study_of(p: Mapping, method: str) -> str:
    """"comparison" when params name a complete-graph evaluation (SPEAR's comparison, one-shot rows),
    "spear" for SPEAR's analyses (method spear, or SPEAR's T/a/gamma at the top: the efficiency's
    FedAvg row), else "pace"."""
    ev = p.get("evaluation")
    if isinstance(ev, str) and ev.startswith("complete_graph"):
        return "comparison"
    return "spear" if method == "spear" or {"T", "a", "gamma"} <= p.keys() else "pace"


def derive(p: Mapping, method: str, seed: int, study: str) -> dict[str, Any]:
    """Every derived column of one row (``study`` already known)."""
    data = p.get("data")
    data_seed = _int(data.get("seed")) if isinstance(data, Mapping) else None
    run_seed = _int(p.get("run_seed"))
    if data_seed is None:  # outside PACE's protocol ``seed`` is the data seed unless it is the run seed
        data_seed = seed if study != "pace" and run_seed != seed else -1
    if run_seed is None:
        run_seed = seed if study == "pace" else (PAPER_SEEDS[0] if study == "spear" and method != "spear" else -1)
    scope = p.get("scope")
    return {"study": study, "evaluation": "receivers" if study == "pace" else "complete_graph",
            "beta": params_value(p, "beta"), "scope": scope if isinstance(scope, str) else "",
            "data_seed": data_seed, "run_seed": run_seed}


def _missing(frame: pd.DataFrame, col: str) -> np.ndarray:
    if col not in frame.columns:
        return np.ones(len(frame), dtype=bool)
    v = frame[col]
    if col == "scope":  # "" is a value (no perturbation scope)
        return v.isna().to_numpy()
    if col in _TEXT:
        return (v.isna() | v.isin(["", "nan"])).to_numpy()
    return pd.to_numeric(v, errors="coerce").isna().to_numpy()


def migrate(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the :data:`DERIVED` columns present and filled (rules: module docstring and
    :func:`pace_nb.experiments.store.normalize_rows`); needs integer ``seed``, ``method``, ``params``."""
    todo = {c: _missing(frame, c) for c in DERIVED}
    rows = np.flatnonzero(np.any(np.stack(list(todo.values())), axis=0))
    for c in DERIVED:
        if c not in frame.columns:
            frame[c] = "" if c in _TEXT else math.nan
    if not len(rows):
        return frame
    study = np.where(todo["study"], "", frame["study"].astype(str).to_numpy())
    cols = (frame["params"].to_numpy(), frame["method"].astype(str).to_numpy(), frame["seed"].to_numpy(), study)
    cache: dict[tuple, int] = {}
    derived: list[dict[str, Any]] = []
    code = np.empty(len(rows), dtype=np.int64)
    for j, key in enumerate(zip(*(c[rows] for c in cols), strict=True)):
        i = cache.get(key)
        if i is None:
            params, method, seed, known = key
            p = params_dict(params)
            i = cache[key] = len(derived)
            derived.append(derive(p, str(method), int(seed), str(known) or study_of(p, str(method))))
        code[j] = i
    for c in DERIVED:
        sel = todo[c][rows]
        if sel.any():
            values = np.array([d[c] for d in derived], dtype=object)[code]
            column = frame[c].to_numpy(dtype=object, copy=True)
            column[rows[sel]] = values[sel]
            frame[c] = column
    return frame
