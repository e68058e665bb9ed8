"""Pooled and per-receiver evaluation → tidy result rows (schema: docs/ARCHITECTURE.md).

Any method that yields per-receiver logits reuses :func:`evaluate_method`:

* ``external_logits=None`` → the receiver's prediction is ``local_logits`` (Local);
* ``alpha=None`` → native method: the prediction is ``external_logits``;
* ``alpha="cnll"`` → receiver-local CNLL between Local and External (Eq. 10);
* ``alpha=a`` (a number, or one number per receiver) → fixed blend (Eq. 1).

Rows: one per receiver (``receiver = i``, its own test nodes) plus the pooled row
(``receiver = -1``: predictions of every receiver on its own test nodes, concatenated); study
"pace", evaluation "receivers", ``seed`` = ``run_seed``.
Scores are percent; ``upload_ratio``/``return_ratio`` are percent of dense model bytes.
"""
from __future__ import annotations

import json
import math
import numbers
from typing import TYPE_CHECKING, Any
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from pace_nb.methods import metrics
from pace_nb.methods.calibration import calibrate
from pace_nb.core.errors import ConfigError, MethodError
from pace_nb.core.schema import COLUMNS

if TYPE_CHECKING:
    import pandas as pd

NAN = float("nan")


def make_row(**fields: Any) -> dict[str, Any]:
    """A result row with every column of the schema (``core.schema.COLUMNS``; missing → NaN,
    ``scope`` → "", ``params`` → JSON). Callers set the row's dimensions (``study``,
    ``evaluation``, ``beta``, ``data_seed``, ``run_seed``; :func:`federation_fields` gives the
    federation's); a row lacking them gets them from ``params`` when normalized
    (:func:`pace_nb.experiments.store.normalize_rows`)."""
    extra = set(fields) - set(COLUMNS)
    if extra:
        raise ConfigError(f"unknown result column(s) {sorted(extra)}; valid: {', '.join(COLUMNS)}")
    row = {c: fields.get(c, NAN) for c in COLUMNS}
    if not isinstance(row["scope"], str):
        row["scope"] = ""
    params = row["params"]
    if isinstance(params, dict):
        row["params"] = json.dumps(params, sort_keys=True, default=str)
    elif params is None or (isinstance(params, float) and math.isnan(params)):
        row["params"] = "{}"
    return row


def federation_fields(fg) -> dict[str, Any]:
    """Row columns describing the federated setting of ``fg``: dataset, partition, K, ``beta``
    (Dirichlet concentration, else NaN) and ``data_seed`` (-1 when ``fg.config`` has none)."""
    cfg = getattr(fg, "config", {}) or {}
    beta, seed = cfg.get("beta"), cfg.get("seed")
    return {"dataset": fg.dataset, "partition": cfg.get("scheme", cfg.get("partition", NAN)),
            "num_clients": fg.num_clients,
            "beta": float(beta) if isinstance(beta, numbers.Real) and not isinstance(beta, bool) else NAN,
            "data_seed": int(seed) if isinstance(seed, numbers.Integral) and not isinstance(seed, bool) else -1}


def _pct(x: float) -> float:
    return 100.0 * x if x == x else NAN


def _per_receiver(values, k: int, what: str) -> list:
    if values is None:
        return [None] * k
    if isinstance(values, (str, int, float)):
        return [values] * k
    values = list(values)
    if len(values) != k:
        raise ConfigError(f"{what}: expected one value per receiver ({k}), got {len(values)}")
    return values


def receiver_predictions(
    fg, local_logits: Sequence[Tensor], external_logits: Sequence[Tensor] | None = None,
    alpha: str | float | Sequence[float] | None = None,
) -> tuple[list[float], list[Tensor]]:
    """Per-receiver α and final logits (see module docstring for the modes)."""
    k = fg.num_clients
    if len(local_logits) != k or (external_logits is not None and len(external_logits) != k):
        raise ConfigError(f"need logits for each of the {k} receivers")
    alphas, finals = [], []
    per_alpha = _per_receiver(alpha, k, "alpha")
    for i, client in enumerate(fg.clients):
        a_i = per_alpha[i]
        if external_logits is None:
            alphas.append(NAN)
            finals.append(local_logits[i])
        elif a_i is None:
            alphas.append(NAN)
            finals.append(external_logits[i])
        else:
            a, z = calibrate(local_logits[i], external_logits[i], client.y.to(local_logits[i].device),
                             client.val_mask.to(local_logits[i].device), a_i)
            alphas.append(a)
            finals.append(z)
    return alphas, finals


def evaluate_method(
    fg,
    local_logits: Sequence[Tensor],
    external_logits: Sequence[Tensor] | None = None,
    alpha: str | float | Sequence[float] | None = None,
    *,
    seed: int,
    method: str,
    variant: str = "native",
    rank: int = 0,
    bytes_up: Sequence[int] | None = None,
    bytes_down: Sequence[int] | None = None,
    dense_bytes: int | None = None,
    seconds: float = NAN,
    params: dict | None = None,
) -> list[dict[str, Any]]:
    """Rows (receivers + pooled) of one method on one seed; logits are ``[n_i, C]`` per client."""
    k, c = fg.num_clients, fg.num_classes
    alphas, finals = receiver_predictions(fg, local_logits, external_logits, alpha)
    up, down = _per_receiver(bytes_up, k, "bytes_up"), _per_receiver(bytes_down, k, "bytes_down")
    base = dict(federation_fields(fg), seed=int(seed), run_seed=int(seed), study="pace", evaluation="receivers",
                method=method, variant=variant, rank=int(rank), seconds=seconds, params=params)
    rows: list[dict] = []
    pooled: dict[str, list] = {"y": [], "final": [], "local": [], "external": []}
    for i, client in enumerate(fg.clients):
        mask = client.test_mask.cpu()
        y = client.y.cpu()[mask]
        pred = {"final": finals[i].detach().cpu()[mask].argmax(-1),
                "local": local_logits[i].detach().cpu()[mask].argmax(-1)}
        pred["external"] = (external_logits[i].detach().cpu()[mask].argmax(-1)
                            if external_logits is not None else pred["local"])
        for key in pooled:
            pooled[key].append(y if key == "y" else pred[key])
        s = metrics.scores(y, pred["final"], c)
        rows.append(make_row(
            **base, receiver=i, acc=_pct(s["acc"]), f1_weighted=_pct(s["f1_weighted"]),
            f1_macro=_pct(s["f1_macro"]), alpha=alphas[i],
            acc_local=_pct(metrics.accuracy(y, pred["local"])),
            acc_external=_pct(metrics.accuracy(y, pred["external"])),
            bytes_up=NAN if up[i] is None else int(up[i]), bytes_down=NAN if down[i] is None else int(down[i]),
            upload_ratio=_ratio(up[i], dense_bytes), return_ratio=_ratio(down[i], dense_bytes),
            n_test=int(mask.sum())))
    cat = {key: torch.cat(v) if v else torch.empty(0, dtype=torch.long) for key, v in pooled.items()}
    s = metrics.scores(cat["y"], cat["final"], c)
    finite = [a for a in alphas if a == a]
    rows.append(make_row(
        **base, receiver=-1, acc=_pct(s["acc"]), f1_weighted=_pct(s["f1_weighted"]),
        f1_macro=_pct(s["f1_macro"]), alpha=float(np.mean(finite)) if finite else NAN,
        acc_local=_pct(metrics.accuracy(cat["y"], cat["local"])),
        acc_external=_pct(metrics.accuracy(cat["y"], cat["external"])),
        bytes_up=_total(up), bytes_down=_total(down),
        upload_ratio=_mean_ratio(up, dense_bytes), return_ratio=_mean_ratio(down, dense_bytes),
        n_test=int(cat["y"].numel())))
    return rows


def _ratio(nbytes, dense_bytes) -> float:
    return NAN if nbytes is None or not dense_bytes else 100.0 * float(nbytes) / float(dense_bytes)


def _total(values) -> float:
    return NAN if any(v is None for v in values) else int(sum(values))


def _mean_ratio(values, dense_bytes) -> float:
    ratios = [_ratio(v, dense_bytes) for v in values]
    return float(np.mean(ratios)) if ratios and all(r == r for r in ratios) else NAN


# -- the rows a method returns, checked before any is stored ------------------------------------
#: ``(columns, rule, holds)``: a value that is given (not NaN) must satisfy ``holds(v, N, K)``
#: (N: the graph's nodes, K: its clients; ``v`` a float array, so inf fails every rule).
ROW_RULES: tuple[tuple[tuple[str, ...], str, Any], ...] = (
    (("acc", "f1_weighted", "f1_macro", "acc_local", "acc_external"), "a percent in [0, 100]",
     lambda v, n, k: (v >= 0) & (v <= 100)),
    (("bytes_up", "bytes_down"), "a non-negative integer", lambda v, n, k: (v >= 0) & np.isfinite(v) & (v == np.floor(v))),
    (("n_test",), "an integer in [0, N]", lambda v, n, k: (v >= 0) & (v <= n) & (v == np.floor(v))),
    (("upload_ratio", "return_ratio", "seconds"), "a finite number >= 0", lambda v, n, k: (v >= 0) & np.isfinite(v)),
    (("alpha",), "a number in [0, 1]", lambda v, n, k: (v >= 0) & (v <= 1)),
    (("receiver",), "-1 (pooled) or a client 0..K-1", lambda v, n, k: (v >= -1) & (v < k) & (v == np.floor(v))),
)


def _numbers(column) -> np.ndarray:
    """A column as float64, NaN where a value is missing or not a number."""
    import pandas as pd

    try:
        return pd.to_numeric(column, errors="coerce").to_numpy(dtype="float64")
    except (TypeError, ValueError):  # e.g. lists in the column
        return np.array([float(x) if isinstance(x, numbers.Real) else NAN for x in column])


def _graph_nodes(fg) -> int:
    data = getattr(fg, "data", None)
    return int(data.num_nodes) if data is not None else sum(int(c.num_nodes) for c in fg.clients)


def check_method_rows(rows, method: str, fg) -> pd.DataFrame:
    """The result rows ``method`` returned on ``fg`` as a DataFrame, checked before any is stored:
    at least one row, every schema column, each value of :data:`ROW_RULES` (N: the graph's nodes,
    K: its clients), ``receiver`` and ``n_test`` on every row and ``acc`` on every row that has test
    nodes. Anything else is a :class:`MethodError` naming the method and the first bad value."""
    import pandas as pd

    from pace_nb.methods.registry import METHODS, method_module

    where = f"method {method!r}" + (f" (module {method_module(method)})" if method in METHODS else "")
    try:
        frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)
    except (TypeError, ValueError):
        raise MethodError(f"{where} returned {type(rows).__name__}, not result rows; its cell is not stored") from None
    if frame.empty:
        raise MethodError(f"{where} returned no result rows; its cell is not stored")
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise MethodError(f"{where}: its rows lack column(s) {missing}; build them with "
                          f"pace_nb.methods.evaluation.make_row")
    n, k = _graph_nodes(fg), fg.num_clients
    values = {c: _numbers(frame[c]) for cols, _, _ in ROW_RULES for c in cols}
    with np.errstate(invalid="ignore"):
        required = {"receiver": True, "n_test": True, "acc": values["n_test"] > 0}
        for cols, rule, holds in ROW_RULES:
            for col in cols:
                v = values[col]
                given = ~np.isnan(v)
                bad = ((frame[col].notna().to_numpy() | required.get(col, False)) & ~given) | (given & ~holds(v, n, k))
                if bad.any():
                    i = int(np.flatnonzero(bad)[0])
                    raw = frame[col].iloc[i]
                    shown = repr(float(v[i])) if raw is None or isinstance(raw, numbers.Real) else repr(raw)
                    raise MethodError(f"{where}: row {i} has {col} = {shown}; it must be {rule} "
                                      f"(N = {n} nodes, K = {k} clients); its cell is not stored")
    return frame
