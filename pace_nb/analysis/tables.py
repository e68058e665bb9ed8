"""The papers' tables with ours beside the paper's: pure functions of result rows.

For every table, :func:`comparison` returns a long frame (one line per reported number:
setting, ``ours_mean``/``ours_std``/``n_seeds`` over seeds, ``paper_mean``/``paper_std``,
``diff`` = ours − paper, ``status`` "ok" / "not run"); :func:`render_markdown` and
:func:`render_latex` lay it out like the paper (each cell "ours / paper (Δ)"). A setting
missing from the results is shown as "not run" — never filled in.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

from pace_nb.core.errors import unknown
from pace_nb.core.registry import Registry
from pace_nb.core.schema import PACE_VARIANT_LABELS, SETTING, SPEAR_VARIANT_LABELS
from pace_nb.core.io import atomic_write_csv, atomic_write_text
from pace_nb.analysis import spear_comparison as sc
from pace_nb.analysis import spear_tables as st
from pace_nb.analysis.gap_notes import (PACE_BASELINE_NOTES, PACE_DIRICHLET_NOTES, SPEAR_COMPARISON_NOTES,
                                        SPEAR_EFFICIENCY_NOTES, SPEAR_ROBUSTNESS_NOTES, Note, render_notes)
from pace_nb.analysis.paper_values import paper_values
from pace_nb.analysis.summary import summarize
from pace_nb.experiments.store import normalize_rows
from pace_nb.methods.registry import canonical, method_label, ranked

PACE_VARIANTS = PACE_VARIANT_LABELS
SPEAR_VARIANTS = SPEAR_VARIANT_LABELS
METRICS = {"acc": "Acc", "f1_weighted": "W-F1", "f1_macro": "Macro-F1", "alpha_mean": "Mean α",
           "alpha_zero_pct": "α=0 (%)", "upload_pct": "Upload (%)", "return_pct": "Downlink (%)",
           "delta_acc": "ΔAcc (points)", "max_drop_pts": "max drop (points)", "comm_kb": "comm (KB)",
           "comm_mb": "comm (MB)", "seconds": "time (s)", "speedup_vs_fedavg": "speed-up vs FedAvg",
           "kib_client": "upload/client (KB)", "mib_total": "total comm (MB)"}
NOT_RUN = "not run"
#: A paper value whose note says this is an upper bound (SPEAR's robustness: "within 0.6 %").
BOUND_MARK = "(upper bound)"
_SUMMARY = {"acc": ("acc_mean", "acc_std"), "f1_weighted": ("f1w_mean", "f1w_std"),
            "f1_macro": ("f1m_mean", "f1m_std"), "alpha_mean": ("alpha_mean", None),
            "upload_pct": ("upload_ratio", None), "return_pct": ("return_ratio", None),
            "seconds": ("seconds", None)}


def canonical_method(name: str) -> str:
    """The registry's one id of a method name or alias (``FedAux-1R`` / ``fedaux`` → ``fedaux1r``)."""
    return canonical(name)


def _fmt(v: float, metric: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if metric in ("units", "helped", "tied", "harmed", "receivers", "nonnegative_means"):
        return f"{v:.0f}"
    return f"{v:.3f}" if metric == "alpha_mean" else f"{v:.2f}"


def _pm(m: float, s: float, metric: str) -> str:
    text = _fmt(m, metric)
    return f"{text} ± {_fmt(s, metric)}" if text and s == s and s is not None else text


class _Ours:
    """Lookups of our seed summaries (mean, std, n) for paper entries."""

    def __init__(self, rows: pd.DataFrame | None):
        rows = normalize_rows(rows) if rows is not None and len(rows) else None
        if rows is None:
            self.summary, self._records = pd.DataFrame(columns=list(SETTING)), {}
            return
        rows = rows[~sc.is_comparison(rows)]  # SPEAR's comparison rows: analysis.spear_comparison only
        rows = rows.assign(method=rows["method"].map(canonical_method))
        rows.loc[~rows["method"].map(ranked).astype(bool), "rank"] = 0  # a rank only where it is a carrier rank
        summ = summarize(rows)
        summ["beta"] = summ["beta"].fillna(-1.0)
        self.summary = summ.set_index(list(SETTING)).sort_index()
        self._records = dict(zip(self.summary.index, self.summary.to_dict("records"), strict=True))  # O(1) lookups

    def get(self, dataset, partition, beta, k, method, variant, rank, metric):
        key = (dataset, partition, -1.0 if beta != beta else float(beta), int(k), method, variant, int(rank))
        rec = self._records.get(key)
        if rec is None:
            if (method, variant) == ("local", "cnll"):  # Local + CNLL is Local (α has nothing to add)
                return self.get(dataset, partition, beta, k, "local", "native", 0, metric)
            return math.nan, math.nan, 0
        if metric == "alpha_zero_pct":
            return 100 * rec["alpha_zero_frac"], math.nan, int(rec["n_seeds"])
        mcol, scol = _SUMMARY[metric]
        return rec[mcol], (rec[scol] if scol else math.nan), int(rec["n_seeds"])

    def best_cnll(self, dataset, partition, beta, k, metric):
        """Highest-scoring baseline with +CNLL (Table 4's matched method)."""
        s = self.summary.reset_index()
        s = s[(s.dataset == dataset) & (s.partition == partition) & (s.num_clients == k) & (s.variant == "cnll")
              & ~s.method.isin(["local", "pace"])]
        col = _SUMMARY[metric][0]
        s = s.dropna(subset=[col]) if col in s.columns else s.iloc[0:0]
        if s.empty:
            return None, math.nan, 0
        best = s.loc[s[col].idxmax()]
        return best["method"], best[col], int(best["n_seeds"])


def _entry_ours(ours: _Ours, e: pd.Series) -> tuple[float, float, int]:
    args = (e.dataset, e.partition, e.beta, e.num_clients)
    if e.metric == "delta_acc":  # Table 6: Transport + CNLL minus Transport
        full = ours.get(*args, "pace", "full", e["rank"], "acc")
        tr = ours.get(*args, "pace", "transport", e["rank"], "acc")
        return full[0] - tr[0], math.nan, min(full[2], tr[2])
    if e.metric.startswith("gap_"):  # Table 4: PACE minus the best calibrated baseline
        m = e.metric[4:]
        pace = ours.get(*args, "pace", "full", 6, m)
        best = ours.best_cnll(*args, m)
        return pace[0] - best[1], math.nan, min(pace[2], best[2])
    if e.dataset == "citation-mean":  # Table 5 ratios, averaged over the three datasets
        vals = [ours.get(d, *args[1:], e.method, e.variant, e["rank"], e.metric) for d in ("Cora", "CiteSeer", "PubMed")]
        if any(n == 0 for _, _, n in vals):
            return math.nan, math.nan, 0
        return float(np.mean([v for v, _, _ in vals])), math.nan, min(n for _, _, n in vals)
    if e.metric not in _SUMMARY and e.metric != "alpha_zero_pct":
        return math.nan, math.nan, 0
    return ours.get(*args, e.method, e.variant, e["rank"], e.metric)


def _label_method(e) -> str:
    base = method_label(e.method)
    return base + ("+CNLL" if e.variant == "cnll" else "")


def _m(e) -> str:
    return METRICS.get(e.metric, e.metric)


@dataclass(frozen=True)
class TableDef:
    """How one paper table is laid out: row and column labels of a paper-value entry."""

    paper: str
    table: str
    title: str
    row: Callable[[pd.Series], str]
    col: Callable[[pd.Series], str]
    notes: tuple[Note, ...] = ()  # implementation notes printed under the table (gap_notes.render_notes)


_ROBUST_COLS = {"edge_noise": "edges ρ=0.5", "feature_noise": "features η=0.5"}
_BUILTIN: dict[str, TableDef] = {
    **{t: TableDef("pace", t, title, _label_method, lambda e: f"{e.dataset} {_m(e)}", PACE_BASELINE_NOTES) for t, title in (
        ("1", "PACE Table 1: Louvain, C = 10 (accuracy, weighted-F1)"),
        ("8", "PACE Table 8: Louvain, C = 20"), ("9", "PACE Table 9: Louvain, C = 30"),
        ("11", "PACE Table 11: METIS, C = 10"))},
    "12": TableDef("pace", "12", "PACE Table 12: Dirichlet β = 0.5, C = 10", _label_method,
                   lambda e: f"{e.dataset} {_m(e)}", PACE_DIRICHLET_NOTES),
    "2": TableDef("pace", "2", "PACE Table 2: component ablation (accuracy), C = 10",
                  lambda e: PACE_VARIANTS[e.variant], lambda e: e.dataset),
    "3": TableDef("pace", "3", "PACE Table 3: communication and CNLL utilisation, rank 6, C = 10",
                  lambda e: e.dataset, _m),
    "4": TableDef("pace", "4", "PACE Table 4: matched-CNLL fairness summary, C = 10",
                  lambda e: f"{e.dataset} {METRICS[e.metric.replace('gap_', '')]}",
                  lambda e: "Gap" if e.metric.startswith("gap_") else ("PACE" if e.method == "pace" else "Matched")),
    "5": TableDef("pace", "5", "PACE Table 5: rank study (accuracy; byte ratios averaged over the 3 datasets)",
                  lambda e: "Dense" if e["rank"] == 0 else str(e["rank"]),
                  lambda e: e.dataset if e.metric == "acc" else _m(e)),
    "6": TableDef("pace", "6", "PACE Table 6: Transport vs Transport + CNLL, all settings",
                  lambda e: f"{e.dataset} C={e.num_clients}",
                  lambda e: _m(e) if e.metric == "delta_acc" else
                  f"{'Transport' if e.variant == 'transport' else 'Transport + CNLL'} {_m(e)}"),
    "7": TableDef("pace", "7", "PACE Table 7: matched calibration fairness controls, C = 10",
                  lambda e: f"{method_label(e.method)} {'None' if e.variant == 'native' else 'CNLL'}",
                  lambda e: f"{e.dataset} {_m(e)}", PACE_BASELINE_NOTES),
    "10": TableDef("pace", "10", "PACE Table 10: fixed-class macro-F1, Louvain, C = 10/20/30",
                   lambda e: f"C={e.num_clients} {method_label(e.method)}", lambda e: e.dataset),
    "A": TableDef("pace", "A", "PACE App. A: receiver-seed harm diagnostics (PACE vs Local, citation datasets, C = 10)",
                  lambda e: METRICS.get(e.metric, e.metric.replace("_", " ")), lambda e: e.dataset),
    "spear-ablation": TableDef("spear", "ablation", "SPEAR Tab. 4: ablation (accuracy), Dirichlet β = 0.05, K = 10",
                               lambda e: SPEAR_VARIANTS.get(e.variant, e.variant), lambda e: e.dataset),
    "spear-robustness": TableDef("spear", "robustness",
                                 "SPEAR Tab. 2: robustness (accuracy drop, points), perturbation scope: clients",
                                 lambda e: e.dataset, lambda e: _ROBUST_COLS[e.variant], SPEAR_ROBUSTNESS_NOTES),
    "spear-robustness-global": TableDef("spear", "robustness",
                                        "SPEAR Tab. 2: robustness (accuracy drop, points), perturbation scope: "
                                        "global (evaluation graph perturbed too)",
                                        lambda e: e.dataset, lambda e: _ROBUST_COLS[e.variant], SPEAR_ROBUSTNESS_NOTES),
    "spear-efficiency": TableDef("spear", "efficiency", "SPEAR Tab. 3: communication and time",
                                 lambda e: e.dataset, lambda e: f"{method_label(e.method)} {_m(e)}",
                                 SPEAR_EFFICIENCY_NOTES),
}

#: Table id → :class:`TableDef`; ``pace-nb tables`` renders every registered table.
TABLES: Registry = Registry("table")


def register_table(table_id: str, definition: TableDef) -> TableDef:
    """Register a table layout; its paper values are ``paper_values(definition.paper, table=definition.table)``."""
    TABLES.register(str(table_id), definition)
    return definition


for _tid, _t in sorted(_BUILTIN.items(), key=lambda kv: (kv[1].paper != "pace", int(kv[0]) if kv[0].isdigit() else 99,
                                                         kv[0])):
    register_table(_tid, _t)


register_table("spear-1", TableDef("spear", "main", "SPEAR Tab. 1: accuracy (%), Dirichlet β = 0.05, K = 10, "
                                   "global model on the complete graph", sc.label, lambda e: e.dataset,
                                   notes=SPEAR_COMPARISON_NOTES))
register_table("spear-3", TableDef("spear", "cost", "SPEAR Tab. 3: wall time, upload per client (KiB) and total "
                                   "communication (MiB)", sc.label, lambda e: f"{e.dataset} {_m(e)}",
                                   notes=SPEAR_EFFICIENCY_NOTES))


def _appendix_a(e: pd.Series, rows: pd.DataFrame | None) -> tuple[float, float, int]:
    """App. A counts pooled over the datasets of ``e`` (receiver-seed units, PACE full vs Local)."""
    from pace_nb.analysis import diagnostics as dg

    if rows is None or not len(rows):
        return math.nan, math.nan, 0
    r = normalize_rows(rows)
    r = r[r.dataset.isin(e.dataset.split("+")) & (r.partition == e.partition) & (r.num_clients == e.num_clients)]
    units = dg.receiver_units(r, treatment=("pace", "full", int(e["rank"])))
    if units.empty or set(units.dataset) != set(e.dataset.split("+")):
        return math.nan, math.nan, 0
    stats = {**dg.harm_counts(units, by=None).iloc[0].to_dict(), **dg.worst_receiver(units).iloc[0].to_dict()}
    return float(stats[e.metric]), math.nan, int(units.seed.nunique())


def comparison(table_id: str, rows: pd.DataFrame | None, ours: _Ours | None = None) -> pd.DataFrame:
    """Ours beside the paper's for one table (long form; also the table's CSV). ``ours``: the
    seed summaries of ``rows`` when the caller already built them (:func:`build_tables` does, once)."""
    t = TABLES[table_id]
    paper = paper_values(t.paper, table=t.table)
    if t.paper == "spear" and t.table in ("main", "cost"):  # SPEAR Tab. 1/3: analysis.spear_comparison
        paper = sc.entries(t.table, paper, rows)
        got = sc.scores(paper, rows)
    elif t.paper == "spear":
        paper = st.entries(t.table, paper, rows)
        scope = "global" if table_id.endswith("-global") else "clients"
        spear_rows = st.pooled_rows(rows)
        got = [st.ours(e, spear_rows, scope) for _, e in paper.iterrows()]
    elif t.table == "A":
        got = [_appendix_a(e, rows) for _, e in paper.iterrows()]
    else:
        ours = ours if ours is not None else _Ours(rows)
        got = [_entry_ours(ours, e) for _, e in paper.iterrows()]
    out = paper.rename(columns={"value": "paper_mean", "std": "paper_std"}).drop(columns=["paper"])
    out.insert(0, "col", [t.col(e) for _, e in paper.iterrows()])
    out.insert(0, "row", [t.row(e) for _, e in paper.iterrows()])
    out["ours_mean"], out["ours_std"], out["n_seeds"] = zip(*got, strict=True) if got else ([], [], [])
    out["ours_mean"] = pd.to_numeric(out["ours_mean"], errors="coerce")
    out["diff"] = out["ours_mean"] - out["paper_mean"]
    out["status"] = np.where(out["ours_mean"].isna(), NOT_RUN, "ok")
    out["ours_text"] = ""
    out["bound"] = out["note"].fillna("").astype(str).str.contains(BOUND_MARK, regex=False)  # paper: an upper bound
    if table_id == "4":  # our matched baseline (its name; ``ours_method``: whose rows) beside the paper's
        for i, e in out.iterrows():
            if e.col == "Matched":
                assert ours is not None  # PACE's tables build their seed summaries above
                m, v, n = ours.best_cnll(e.dataset, e.partition, e.beta, e.num_clients, e.metric)
                out.loc[i, ["ours_mean", "ours_std", "n_seeds"]] = [v, math.nan, n]
                out.loc[i, ["ours_text", "ours_method"]] = [f"{method_label(m)}+CNLL" if m else "", m or ""]
        out["diff"] = out["ours_mean"] - out["paper_mean"]
        out["status"] = np.where(out["ours_mean"].isna(), NOT_RUN, "ok")
    return out.reset_index(drop=True)


def bound_verdict(e: pd.Series) -> str:
    """An upper-bound entry against its bound: "≤ bound", or the excess and how many standard errors
    of our mean (``ours_std / √n_seeds``) it is."""
    if e["diff"] != e["diff"]:
        return ""
    if e["diff"] <= 0:
        return "≤ bound"
    n, s = e.get("n_seeds", 0), e.get("ours_std", math.nan)
    se = s / math.sqrt(n) if n and n > 1 and s == s and s > 0 else math.nan
    return f"exceeds by {e['diff']:.2f}" + (f" = {e['diff'] / se:.1f} SE" if se == se else "")


def seeds_note(n, full: int | None) -> str:
    """``" (n = k)"`` when an entry pools fewer seeds (``n``) than its table's most (``full``), else ""."""
    try:
        k = int(n)
    except (TypeError, ValueError):
        return ""
    return f" (n = {k})" if full and 0 < k < full else ""


def full_seeds(comp: pd.DataFrame) -> int | None:
    """The largest seed count among a comparison's entries that were run (None without any)."""
    if "n_seeds" not in comp or "status" not in comp:
        return None
    n = pd.to_numeric(comp.loc[comp["status"] == "ok", "n_seeds"], errors="coerce").max()
    return int(n) if n == n else None


def _cell(e: pd.Series, full: int | None = None) -> str:
    paper = _pm(e.paper_mean, e.paper_std, e.metric) or "–"
    bound = bool(e.get("bound", False))
    paper = f"≤ {paper}" if bound and paper != "–" else paper
    if e.status == NOT_RUN:
        return f"{NOT_RUN} / {paper}"
    ours = _pm(e.ours_mean, e.ours_std, e.metric) + (f" {e.ours_text}" if e.ours_text else "") + \
        seeds_note(e.get("n_seeds"), full)
    if bound:
        verdict = bound_verdict(e)
        return f"{ours} / {paper}" + (f" ({verdict})" if verdict else "")
    diff = f" ({e['diff']:+.2f})" if e["diff"] == e["diff"] else ""
    return f"{ours} / {paper}{diff}"


def layout(comp: pd.DataFrame) -> pd.DataFrame:
    """Paper-shaped grid (rows × columns, paper order) of "ours / paper (Δ)" cells."""
    if comp.empty:
        return pd.DataFrame()
    full = full_seeds(comp)
    cells = comp.assign(cell=[_cell(e, full) for _, e in comp.iterrows()])
    if (cells.col == "Matched").any():  # Table 4: the paper's matched method name
        notes = paper_values("pace", table="4")
        name = {(r.dataset, r.metric): method_label(r.method) + "+CNLL" for r in notes.itertuples()
                if r.variant == "cnll"}
        sel = cells.col == "Matched"
        cells.loc[sel, "cell"] = [c + f" [paper: {name.get((d, m), '?')}]"
                                  for c, d, m in zip(cells.loc[sel, "cell"], cells.loc[sel, "dataset"], cells.loc[sel, "metric"], strict=True)]
    rows = list(dict.fromkeys(cells.row))
    cols = list(dict.fromkeys(cells.col))
    grid = cells.drop_duplicates(["row", "col"]).pivot(index="row", columns="col", values="cell")
    return grid.reindex(index=rows, columns=cols).fillna("")


def render_markdown(table_id: str, comp: pd.DataFrame) -> str:
    grid = layout(comp)
    head = f"### {TABLES[table_id].title}\n\nEach cell: ours (mean ± sample std over seeds; \"(n = k)\" when fewer " \
           f"seeds than the table's others) / paper (ours − paper); \"{NOT_RUN}\" = no such results in the store.\n\n"
    if grid.empty:
        return head + "(no entries)\n"
    lines = ["| | " + " | ".join(grid.columns) + " |", "|---" * (len(grid.columns) + 1) + "|"]
    lines += [f"| {idx} | " + " | ".join(r) + " |" for idx, r in zip(grid.index, grid.values.tolist(), strict=True)]
    notes = render_notes(TABLES[table_id])
    tail = ("\n" + "\n".join(f"* {n}" for n in notes) + "\n") if notes else ""
    return head + "\n".join(lines) + "\n" + tail


_TEX = {"±": r"$\pm$", "≤": r"$\le$", "α": r"$\alpha$", "β": r"$\beta$", "ρ": r"$\rho$", "η": r"$\eta$", "Δ": r"$\Delta$",
        "–": "--", "%": r"\%", "&": r"\&", "_": r"\_", "#": r"\#"}


def _tex(s: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in str(s))


def render_latex(table_id: str, comp: pd.DataFrame) -> str:
    grid = layout(comp)
    if grid.empty:
        return f"% {TABLES[table_id].title}: no entries\n"
    lines = [r"\begin{table}[t]", r"\centering\scriptsize", r"\begin{tabular}{l" + "l" * len(grid.columns) + "}",
             r"\toprule", " & " + " & ".join(_tex(c) for c in grid.columns) + r" \\", r"\midrule"]
    lines += [_tex(idx) + " & " + " & ".join(_tex(c) for c in r) + r" \\" for idx, r in zip(grid.index, grid.values.tolist(), strict=True)]
    notes = "".join(" " + _tex(n) for n in render_notes(TABLES[table_id]))
    lines += [r"\bottomrule", r"\end{tabular}",
              rf"\caption{{{_tex(TABLES[table_id].title)}. Each cell: ours / paper (ours $-$ paper).{notes}}}",
              r"\end{table}"]
    return "\n".join(lines) + "\n"


def select_tables(spec: str | Iterable[str] | None) -> list[str]:
    """``None``/"all" → every table; else ids like "1,2,spear-ablation" ("pace"/"spear" = all of one paper)."""
    if spec is None or spec == "all":
        return list(TABLES)
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if str(s).strip()]
    out = []
    for item in items:
        if item in ("pace", "spear"):
            out += [k for k, t in TABLES.items() if t.paper == item]
        elif item in TABLES:
            out.append(item)
        else:
            raise unknown("table", item, list(TABLES) + ["pace", "spear", "all"])
    return list(dict.fromkeys(out))


def build_tables(rows: pd.DataFrame | None, tables: str | Iterable[str] | None = None) -> dict[str, pd.DataFrame]:
    """Comparison frames of the selected tables (see :func:`comparison`); the seed summaries
    behind PACE's tables are built once for all of them."""
    selected = select_tables(tables)
    ours = _Ours(rows) if any(_summarized(TABLES[t]) for t in selected) else None
    return {t: comparison(t, rows, ours if _summarized(TABLES[t]) else None) for t in selected}


def _summarized(t) -> bool:
    """Whether :func:`comparison` reads table ``t`` from the seed summaries (:class:`_Ours`)."""
    return t.paper != "spear" and t.table != "A"


def write_tables(rows: pd.DataFrame | None, out_dir: str | Path, tables: str | Iterable[str] | None = None) -> list[Path]:
    """Write ``table_<id>.md/.tex/.csv`` per table and an ``index.md``; returns the paths written."""
    out_dir = Path(out_dir)
    written, index = [], ["# Paper tables: ours beside the paper's\n"]
    for tid, comp in build_tables(rows, tables).items():
        md = render_markdown(tid, comp)
        written += [atomic_write_text(out_dir / f"table_{tid}.md", md),
                    atomic_write_text(out_dir / f"table_{tid}.tex", render_latex(tid, comp)),
                    atomic_write_csv(out_dir / f"table_{tid}.csv", comp)]
        ran = int((comp.status == "ok").sum()) if len(comp) else 0
        index.append(f"* [{TABLES[tid].title}](table_{tid}.md): {ran}/{len(comp)} values run")
    written.append(atomic_write_text(out_dir / "index.md", "\n".join(index) + "\n"))
    return written

