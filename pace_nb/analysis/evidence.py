"""What the store holds for the causes' checks (docs/DESIGN.md §12): its rows, every table's
comparison frame, and the **evidence cells** a declared cause waits for.

A cause that names another setting of a method — FedProx with μ = 1e-2, FedNova with local SGD,
FedPub with 2 layers, FedRCL over its weight and τ — applies to an entry only where that run is
stored. ``configs/pace_evidence.toml`` runs them into the store's ``evidence/`` folder
(:data:`EVIDENCE_FOLDER`, a results store of its own, as the draws are: its rows differ from the
tables' only in ``params``, and a table never mixes two runs of one setting); ``pace-nb report``
reads them beside the store's rows.

**The evidence rule** (:func:`agrees`), one for every such cause: with ``o`` our entry, ``p`` the
paper's value (``s_p`` its seed spread) and ``m`` the evidence cell's mean over its ``n ≥ 2`` seeds
(``s_e`` their sample std) in the entry's setting, variant and metric, the cell says the cause holds
when both

1. it closes at least half the gap: ``|m − p| ≤ |o − p| / 2``, and
2. it reaches the paper: ``|m − p| ≤`` :data:`AGREE_WITHIN` points, or within two standard errors of
   the difference, ``|m − p| ≤ 2·sqrt((s_e² + s_p²)/n)``.

A cell that moves away from the paper, or only a little of the way, or whose spread alone would
hold the paper's value without closing half the gap, says the cause does not hold there: the entry
keeps whatever else it has (else it stays unexplained). A cause over a grid of settings (FedRCL)
holds where one grid point does; the closest such point is quoted.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from collections.abc import Callable, Mapping

import pandas as pd

from pace_nb.analysis.spear_comparison import is_comparison
from pace_nb.experiments.store import normalize_rows
from pace_nb.methods.registry import canonical, method_label

#: Folder of a results store that holds the evidence cells (a results store of its own).
EVIDENCE_FOLDER = "evidence"
#: Points within which an evidence cell reaches the paper: the band inside which an entry is not
#: listed at all (:data:`~pace_nb.analysis.causes.LIST_ABOVE`).
AGREE_WITHIN = 2.0
#: A predictor whose predicted-class entropy (over log C) is at most this scores at the level of a
#: one-class predictor: most of its nodes get one class.
COLLAPSED = 0.5


def _protocol_rows(rows: pd.DataFrame | None) -> pd.DataFrame | None:
    r = normalize_rows(rows) if rows is not None and len(rows) else None
    if r is not None:
        r = r[(r["receiver"] == -1) & ~is_comparison(r)]
        r = r.assign(method=r["method"].map(canonical), beta=r["beta"].fillna(-1.0))
    return r


def in_setting(rows: pd.DataFrame | None, e: pd.Series, method: str, variant: str) -> pd.DataFrame | None:
    """The pooled ``rows`` of ``method``/``variant`` in entry ``e``'s setting (dataset, partition, K, β)."""
    if rows is None:
        return None
    beta = -1.0 if e["beta"] != e["beta"] else float(e["beta"])
    return rows[(rows["dataset"] == e["dataset"]) & (rows["partition"] == e["partition"])
                & (rows["num_clients"] == int(e["num_clients"])) & ((rows["beta"] - beta).abs() < 1e-9)
                & (rows["method"] == method) & (rows["variant"] == variant)]


class Evidence:
    """What the store holds, for the causes' checks: its pooled protocol rows (per seed), every
    table's comparison frame (:func:`~pace_nb.analysis.tables.build_tables`) and the pooled rows of
    its evidence cells (``cells``: the ``evidence/`` folder's rows; None when it has none)."""

    def __init__(self, rows: pd.DataFrame | None, comps: Mapping[str, pd.DataFrame],
                 cells: pd.DataFrame | None = None):
        self.rows, self.comps, self.cells = _protocol_rows(rows), comps, _protocol_rows(cells)

    def setting(self, e: pd.Series, method: str, variant: str) -> pd.DataFrame | None:
        """Our pooled rows of ``method``/``variant`` in entry ``e``'s setting (dataset, partition, K, β)."""
        return in_setting(self.rows, e, method, variant)

    def seeds(self, e: pd.Series, method: str, variant: str, metric: str) -> pd.Series:
        """Our per-seed values of ``metric`` for ``method``/``variant`` in entry ``e``'s setting."""
        sel = self.setting(e, method, variant)
        if sel is None or metric not in sel.columns:
            return pd.Series(dtype=float)
        return sel.groupby("seed")[metric].mean().dropna()

    def sibling(self, table_id: str, e: pd.Series, method: str, variant: str) -> pd.Series | None:
        """The entry of the same table and column (dataset, metric, setting) for another method."""
        comp = self.comps.get(str(table_id))
        return None if comp is None else sibling(comp, e, method, variant)

    def cell(self, e: pd.Series, method: str, variant: str, params: Mapping[str, object]) -> pd.DataFrame:
        """The evidence rows of ``method``/``variant`` in entry ``e``'s setting run with ``params``
        (each given hyperparameter equal to the value its rows record); empty when none is stored."""
        sel = in_setting(self.cells, e, method, variant)
        if sel is None or sel.empty:
            return pd.DataFrame()
        return sel[sel["params"].map(lambda p: all(_same(param_of(p, k), v) for k, v in params.items()))]


def sibling(comp: pd.DataFrame, e: pd.Series, method: str, variant: str) -> pd.Series | None:
    """The entry of ``comp`` in ``e``'s column (dataset, metric, setting) for ``method``/``variant``."""
    if comp.empty:
        return None
    same_beta = (comp["beta"].isna() & (e["beta"] != e["beta"])) | ((comp["beta"] - e["beta"]).abs() < 1e-9)
    hit = comp[(comp["dataset"] == e["dataset"]) & (comp["metric"] == e["metric"])
               & (comp["partition"] == e["partition"]) & (comp["num_clients"] == e["num_clients"]) & same_beta
               & (comp["method"].map(canonical) == method) & (comp["variant"] == variant)]
    return hit.iloc[0] if len(hit) else None


def param_of(text: object, name: str) -> object:
    """Hyperparameter ``name`` as a row's ``params`` (JSON text) records it, or None."""
    try:
        obj = json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        return None
    return obj.get(name) if isinstance(obj, dict) else None


def _same(recorded: object, wanted: object) -> bool:
    if isinstance(wanted, bool) or isinstance(recorded, bool) or not isinstance(wanted, int | float):
        return recorded == wanted
    return isinstance(recorded, int | float) and math.isclose(float(recorded), float(wanted), rel_tol=1e-9)


def agrees(ours: float, paper: float, paper_std: float, values: pd.Series) -> str | None:
    """The evidence rule (module doc): the text of what the evidence cell's per-seed ``values`` show
    when they close at least half of ``ours − paper`` and reach the paper, else None."""
    v = pd.to_numeric(values, errors="coerce").dropna()
    if len(v) < 2 or ours != ours or paper != paper:
        return None
    m, s_e, s_p = float(v.mean()), float(v.std(ddof=1)), 0.0 if paper_std != paper_std else float(paper_std)
    gap, moved = float(ours - paper), m - float(paper)
    two_se = 2 * math.sqrt((s_e ** 2 + s_p ** 2) / len(v))
    if abs(moved) > abs(gap) / 2:
        return None
    if abs(moved) <= AGREE_WITHIN:
        basis = f"within {AGREE_WITHIN:g} points"
    elif abs(moved) <= two_se:
        basis = f"within 2 SE = {two_se:.2f}"
    else:
        return None
    return f"{m:.2f} over {len(v)} seeds: {moved:+.2f} from the paper, {basis}; ours {gap:+.2f}"


#: An extra condition on a grid point's rows: (holds, text) — e.g. :func:`collapsed`.
Condition = Callable[[pd.DataFrame], "tuple[bool, str]"]


def collapsed(rows: pd.DataFrame) -> tuple[bool, str]:
    """Whether the rows' predictor scores at the level of a one-class predictor: the mean of the
    predicted-class entropy their params record (``pred_entropy``, one per seed) is at most
    :data:`COLLAPSED`; no recorded entropy, no claim."""
    recorded = [param_of(p, "pred_entropy") for p in rows["params"].unique()]
    vals = [float(x) for r in recorded if isinstance(r, list) for x in r]
    if not vals:
        return False, "no predicted-class entropy recorded"
    h = sum(vals) / len(vals)
    if h > COLLAPSED:
        return False, f"predicted-class entropy {h:.2f} > {COLLAPSED:g}"
    return True, f"predicted-class entropy {h:.2f} (≤ {COLLAPSED:g}: one class for most nodes)"


def _describe(params: Mapping[str, object]) -> str:
    return ", ".join(f"{k} = {v:g}" if isinstance(v, int | float) and not isinstance(v, bool) else f"{k} = {v}"
                     for k, v in params.items())


@dataclass(frozen=True)
class EvidenceCell:
    """A cause's check (:class:`~pace_nb.analysis.causes.Cause`): the evidence cells of ``method`` run
    with each hyperparameter setting of ``grid`` (the rest at their defaults) in the entry's setting
    and variant; it holds where a stored grid point passes :func:`agrees` (and ``condition``, when
    given), quoting the closest one. ``configs/pace_evidence.toml`` runs every grid point in the
    settings of its cause's scope."""

    method: str
    grid: tuple[Mapping[str, object], ...]
    condition: Condition | None = None

    def __post_init__(self):
        if not self.grid:
            raise ValueError("an evidence cell names at least one hyperparameter setting")

    def __call__(self, ev: Evidence, table_id: str, e: pd.Series) -> str | None:
        metric, best = str(e["metric"]), None
        for params in self.grid:
            rows = ev.cell(e, self.method, str(e["variant"]), params)
            if rows.empty or metric not in rows:
                continue
            values = rows.groupby("seed")[metric].mean()
            said = agrees(float(e["ours_mean"]), float(e["paper_mean"]), float(e.get("paper_std", math.nan)), values)
            extra = self.condition(rows) if self.condition is not None and said else (True, "")
            if said and extra[0]:
                dist = abs(float(values.mean()) - float(e["paper_mean"]))
                text = " ".join([method_label(self.method), _describe(params)]).rstrip() + f": {said}" + \
                    (f"; {extra[1]}" if extra[1] else "")
                best = min(best or (dist, text), (dist, text))
        return None if best is None else best[1] + " (evidence cell)"
