"""REPRODUCTION.md: every registered paper table from a results store, with agreement summaries.

Pure functions of the store's contents (rows, per-cell manifests, and the cells each shipped
config expands to); no timestamps and no machine paths, so the same store gives the same
bytes. The tables themselves are :mod:`pace_nb.analysis.tables` (ours beside the paper's);
the causes of known gaps are the tables' footnotes (:mod:`pace_nb.analysis.gap_notes`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Mapping, Sequence

import pandas as pd

from pace_nb.analysis import causes as cz
from pace_nb.analysis import verdicts as vd
from pace_nb.analysis.causes import LIST_ABOVE
from pace_nb.analysis.draws import DRAW_TABLES, DRAWS_FOLDER, data_seeds, draw_spread, split_draws
from pace_nb.analysis.draws_table import draws_table
from pace_nb.analysis.evidence import EVIDENCE_FOLDER
from pace_nb.analysis.tables import NOT_RUN, build_tables, canonical_method, render_markdown
from pace_nb.analysis.spear_comparison import comparison_label, is_comparison

#: Metrics reported in percentage points: only these are scored against the 1 / 2 / 5 point bands
#: (ratios such as mean α, counts, bytes and seconds are shown in the tables but not scored).
POINT_METRICS: frozenset[str] = frozenset({"acc", "f1_weighted", "f1_macro", "delta_acc", "gap_acc",
                                           "gap_f1_weighted", "max_drop_pts", "alpha_zero_pct",
                                           "upload_pct", "return_pct"})
BANDS: tuple[float, ...] = (1.0, 2.0, 5.0)
#: The PACE paper's numbered tables, summarised together in the agreement table.
PACE_MAIN_TABLES = tuple(str(i) for i in range(1, 13))


def scored(comp: pd.DataFrame) -> pd.DataFrame:
    """The entries of one comparison frame that are scored: a point metric with a paper value."""
    if comp.empty:
        return comp
    return comp[comp["metric"].isin(POINT_METRICS) & comp["paper_mean"].notna()]


def agreement(comp: pd.DataFrame, methods: Sequence[str] | None = None) -> dict:
    """Counts and shares of scored entries within each band of the paper (|ours − paper| ≤ b).

    ``methods``: only entries of these methods (canonical ids, e.g. ``("local", "pace")``).
    Shares are over the entries that were run; ``None`` when none was run."""
    s = scored(comp)
    if methods is not None and len(s):
        s = s[s["method"].map(canonical_method).isin(set(methods))]
    ran = s[(s["status"] == "ok") & s["diff"].notna()] if len(s) else s
    out: dict[str, int | float | None] = {"scored": int(len(s)), "run": int(len(ran))}
    for b in BANDS:
        out[f"within_{b:g}"] = (float((gaps(ran).abs() <= b).mean()) if len(ran) else None)
    return out


def gaps(comp: pd.DataFrame) -> pd.Series:
    """Ours − paper per entry, scored: for an upper-bound entry (``bound``) only the excess over the
    bound counts (at or below it: 0)."""
    d = pd.to_numeric(comp["diff"], errors="coerce")
    if "bound" in comp:
        d = d.where(~comp["bound"].fillna(False).astype(bool), d.clip(lower=0))
    return d


def far_cells(table_id: str, comp: pd.DataFrame, above: float = LIST_ABOVE,
              spread: pd.DataFrame | None = None, evidence: cz.Evidence | None = None) -> pd.DataFrame:
    """Scored, run entries with |ours − paper| > ``above`` (an upper bound: the excess), each with its
    :func:`~pace_nb.analysis.verdicts.verdict` (``status``, the ``kinds`` that explain it, ``labels``,
    ``text``, the ``measurement`` it shows) and, when ``spread``
    (:func:`~pace_nb.analysis.draws.draw_spread` of ``comp``) has them, the range of our means over the
    stored draws."""
    if spread is not None:
        comp = comp.join(spread)
    s = scored(comp)
    far = s[(s["status"] == "ok") & (gaps(s).abs() > above)] if len(s) else s
    draws = [f"{e.draw_min:.2f}–{e.draw_max:.2f} ({int(e.n_draws)})" if e.get("n_draws", 0) else ""
             for _, e in far.iterrows()]
    found = [vd.verdict(table_id, e, comp, evidence) for _, e in far.iterrows()]
    return pd.DataFrame({"table": table_id, "row": far.get("row", []), "col": far.get("col", []),
                         "ours": far.get("ours_mean", []), "paper": far.get("paper_mean", []),
                         "diff": gaps(far) if len(far) else [], "draws": draws,
                         "status": [v.status for v in found], "kinds": [v.kinds for v in found],
                         "labels": [v.labels for v in found], "text": [v.text() for v in found],
                         "measurement": [v.measurement for v in found]})


def _share(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.0f}%"


def _md_table(header: Sequence[str], rows: Sequence[Sequence]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + \
           ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]


def config_runs(cells: pd.DataFrame, configs: Mapping[str, Sequence[Mapping]]) -> pd.DataFrame:
    """Per shipped config: cells it expands to, cells in the store, their summed wall time
    (the cells' manifests), and the datasets of the cells not in the store."""
    keys = cells["setting_key"] if "setting_key" in cells else cells.get("key")  # cells with a data fingerprint too
    have = dict(zip(keys, cells["wall_seconds"], strict=True)) if len(cells) and "wall_seconds" in cells else {}
    recs = []
    for name, cfg_cells in configs.items():
        keys = [c["key"] for c in cfg_cells]
        stored = [k for k in keys if k in have]
        secs = [have[k] for k in stored if have[k] is not None and have[k] == have[k]]
        missing = sorted({c["dataset"] for c in cfg_cells if c["key"] not in have})
        recs.append({"config": name, "cells": len(keys), "stored": len(stored),
                     "wall_seconds": float(sum(secs)) if secs else math.nan, "timed": len(secs),
                     "not_stored": ", ".join(missing)})
    return pd.DataFrame(recs, columns=["config", "cells", "stored", "wall_seconds", "timed", "not_stored"])


def time_by_method(cell_rows: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """Where the wall time goes: per method, the seconds its pooled rows record (one variant per
    seed, summed over seeds and cells), the runs (seeds) they cover and the seconds per run,
    beside the method's own statement of its budget (:meth:`~pace_nb.methods.contract.Method.budget`);
    per cell kind the rest of the cells' wall time ("Local training + setup" for protocol
    cells: federation, Local, evaluation)."""
    columns = ["phase", "seconds", "cells", "runs", "per_run", "budget"]
    if cell_rows.empty or cells.empty:
        return pd.DataFrame(columns=columns)
    pooled = cell_rows[cell_rows["receiver"] == -1]
    per_seed = pooled.drop_duplicates(["cell", "dataset", "seed", "method"])  # +CNLL repeats native's time
    per_seed = per_seed[per_seed["seconds"].notna()]
    spent = per_seed.groupby(["cell", "method"])["seconds"].sum()
    runs = per_seed.groupby("method").size()
    wall = cells.set_index("key")["wall_seconds"].astype(float)
    kind = cells.set_index("key")["kind"] if "kind" in cells else pd.Series("protocol", index=wall.index)
    recs = []
    for method, g in spent.groupby(level="method"):
        n = int(runs.get(method, 0))
        recs.append({"phase": comparison_label(method), "seconds": float(g.sum()), "cells": int(len(g)), "runs": n,
                     "per_run": float(g.sum()) / n if n else math.nan, "budget": method_budget(str(method))})
    used = spent.groupby(level="cell").sum().reindex(wall.index).fillna(0.0)
    rest = (wall - used).dropna()
    for k, g in rest.groupby(kind.reindex(rest.index)):
        label = "Local training + setup (rest of protocol cells)" if k == "protocol" else f"{k} cells (rest)"
        recs.append({"phase": label, "seconds": float(g.sum()), "cells": int(len(g)), "runs": 0, "per_run": math.nan,
                     "budget": ""})
    out = pd.DataFrame(recs, columns=columns)
    return out.sort_values(["seconds", "phase"], ascending=[False, True], kind="stable").reset_index(drop=True)


def method_budget(name: str) -> str:
    """The registered method's :meth:`~pace_nb.methods.contract.Method.budget` at its defaults
    (the configuration the store runs); ``""`` for names no longer registered."""
    from pace_nb.core.errors import UnknownNameError
    from pace_nb.methods.contract import make

    try:
        return make(name).budget()
    except UnknownNameError:
        return ""


def _num(v: float, fmt: str = "{:.2f}") -> str:
    return "–" if v is None or v != v else fmt.format(v)


def build_report(rows: pd.DataFrame, cells: pd.DataFrame, configs: Mapping[str, Sequence[Mapping]], *,
                 store_label: str = "results/", cell_rows: pd.DataFrame | None = None,
                 tables: Sequence[str] | None = None, draws: Mapping[int, pd.DataFrame] | None = None,
                 draw_cells: pd.DataFrame | None = None, analysis: Analysis | None = None) -> str:
    """The text of REPRODUCTION.md (deterministic: no time stamps, no paths but ``store_label``).

    ``rows``: the store's rows (:meth:`ResultsStore.load`); ``cells``: :meth:`ResultsStore.cells`;
    ``configs``: config name → the cells it expands to (``Cell.describe()`` dicts); ``cell_rows``:
    rows with a ``cell`` column (per-cell timing; optional); ``draws``: data seed → rows of other
    mask draws of some settings (:func:`~pace_nb.analysis.draws.split_draws`), ``draw_cells``
    their cells and the evidence cells (counted for their configs only)."""
    an = analysis if analysis is not None else analyse(rows, tables, draws)
    comps, far_frame = an.comps, an.far
    out = ["# Reproduction report: PACE and SPEAR", "",
           f"Generated by `pace-nb report` from the results store `{store_label}` "
           f"({len(cells)} cells, {len(rows)} rows). Regenerate it with the same command; do not edit by hand.",
           f"Every registered table of both papers follows: each cell is ours (mean ± sample std over seeds) / "
           f"the paper's (ours − paper). A setting without results in the store is marked \"{NOT_RUN}\" — "
           f"never filled in.", "", vd.count_line(far_frame), "", vd.two_kinds_line(far_frame), ""]
    # -- configs and wall time
    runs = config_runs(_concat_cells(cells, draw_cells), configs)
    out += ["## Configs in the store", "",
            "Wall time: the summed wall time of the config's stored cells (their manifests), on the machines "
            f"their manifests record: {manifest_machines(cells, draw_cells)}.", ""]
    out += _md_table(["config", "cells stored / total", "wall time (s)", "datasets with cells not in the store"],
                     [[f"`{r.config}`", f"{r.stored} / {r.cells}", _num(r.wall_seconds, "{:.0f}"),
                       r.not_stored or "–"] for r in runs.itertuples()])
    # -- agreement
    out += ["", "## Agreement with the papers", "",
            "Scored: entries in percentage points with a paper value (accuracy, F1, Δ, byte and α = 0 shares); "
            "shares are over the entries run. \"Local/PACE\": the same for the rows of Local and PACE only.", ""]
    agree_rows = []
    for tid, comp in comps.items():
        a, lp = agreement(comp), agreement(comp, ("local", "pace"))
        agree_rows.append([tid, a["scored"], a["run"], *(_share(a[f"within_{b:g}"]) for b in BANDS),
                           f"{_share(lp['within_1'])} of {lp['run']}"])
    pace = [comps[t] for t in PACE_MAIN_TABLES if t in comps and len(comps[t])]
    if len(pace) > 1:  # the must-show line: every PACE table 1–12 together
        both = pd.concat(pace, ignore_index=True)
        a, lp = agreement(both), agreement(both, ("local", "pace"))
        agree_rows.append(["**PACE 1–12**", a["scored"], a["run"], *(_share(a[f"within_{b:g}"]) for b in BANDS),
                           f"{_share(lp['within_1'])} of {lp['run']}"])
    out += _md_table(["table", "scored", "run", "within 1", "within 2", "within 5", "Local/PACE within 1"],
                     agree_rows)
    bounds = bound_lines(comps)
    if bounds:
        out += ["", "Upper bounds (scored by the excess over the bound only):", ""] + [f"* {b}" for b in bounds]
    out += ["", f"### Entries off by more than {LIST_ABOVE:g} points", "", vd.legend(), ""]
    if far_frame.empty:
        out.append("None among the entries run.")
    else:
        out += _md_table(["table", "row", "column", "ours", "paper", "ours − paper", "our draws", "status: causes"],
                         [[r.table, r.row, r.col, _num(r.ours), _num(r.paper), f"{r.diff:+.2f}", r.draws or "–",
                           r.text] for r in far_frame.itertuples()])

    out += draws_table(an, level="###")
    out += ["", "### Declared causes", "",
            "Each applies only inside its scope (tables; methods, variants, datasets, partitions, client counts "
            "when named; the sign of ours − paper) and only where its evidence is found in the store for that "
            "entry. Text that admits no cause is not one: the tables' other footnotes are implementation notes.", ""]
    out += [f"* {d}" for d in cz.declared(far_frame)]
    # -- provenance
    out += ["", "## Provenance", "",
            "The commits the store's cells were computed from (each new cell's manifest records the package "
            "version, git commit and whether the tree had uncommitted changes, torch / PyG / NumPy versions, "
            "device and thread count, and the memory bandwidth measured before the process's first cell; cells "
            "stored before that was recorded say \"not recorded\" or –).", ""]
    out += _md_table(["commit", "cells", "device · threads", "torch · PyG · NumPy", "memory bandwidth"],
                     [list(r) for r in commit_table(_concat_cells(cells, draw_cells))])
    # -- time
    if cell_rows is not None:
        t = time_by_method(cell_rows, cells)
        out += ["", "## Where the time goes", "",
                "Per method: the seconds its result rows record (summed over seeds and cells) and per run (one "
                "seed of one cell); the rest of each cell's wall time is Local training and setup (protocol cells) "
                "or the SPEAR cell itself. \"Budget\": what one run pays in the method's own terms; the one-shot "
                "baselines run their released (or, for OASIS, paper's) budgets, no more.", ""]
        out += _md_table(["phase", "seconds", "cells", "s per run", "budget"],
                         [[r.phase, f"{r.seconds:.1f}", r.cells, _num(r.per_run, "{:.1f}"), r.budget or "–"]
                          for r in t.itertuples()]) if len(t) else ["(no timed cells)"]
    # -- tables
    out += ["", "## Tables", ""]
    for tid, comp in comps.items():
        notes = cz.footnotes(tid, far_frame)
        out += [render_markdown(tid, comp).rstrip()] + ([""] if notes else []) + [f"* {n}" for n in notes] + [""]
    return "\n".join(out).rstrip() + "\n"


def manifest_machines(*frames: pd.DataFrame | None) -> str:
    """:func:`~pace_nb.experiments.provenance.machines` of the cells' manifests (several stores' cells)."""
    from pace_nb.experiments.provenance import machines

    return machines(r for f in frames if f is not None and len(f) for r in f.get("provenance", [None] * len(f)))


@dataclass(frozen=True)
class Analysis:
    """Every table's comparison (``comps``) and the entries more than :data:`LIST_ABOVE` points off
    with their causes (``far``, :func:`far_cells`), of one store and its draws."""

    comps: dict[str, pd.DataFrame]
    far: pd.DataFrame
    spreads: dict[str, pd.DataFrame]  # table → :func:`~pace_nb.analysis.draws.draw_spread` of its entries


def analyse(rows: pd.DataFrame, tables: Sequence[str] | None = None,
            draws: Mapping[int, pd.DataFrame] | None = None, evidence: pd.DataFrame | None = None) -> Analysis:
    """:class:`Analysis` of a store's rows, its other draws (data seed → rows) and its evidence cells'
    rows (``evidence``: :mod:`pace_nb.analysis.evidence`; without them no cause that waits for one applies)."""
    comps = build_tables(rows if len(rows) else None, list(tables) if tables else None)
    drawn = [t for t in comps if t in DRAW_TABLES]  # each draw's tables, built once
    draw_comps = {s: build_tables(r, drawn) for s, r in (draws or {}).items()} if drawn else {}
    ev = cz.Evidence(rows if len(rows) else None, comps, evidence)
    spreads = {tid: draw_spread(tid, comp, {s: c[tid] for s, c in draw_comps.items() if tid in c})
               for tid, comp in comps.items()}
    far = [far_cells(tid, comp, spread=spreads[tid], evidence=ev) for tid, comp in comps.items()]
    return Analysis(comps, pd.concat(far, ignore_index=True) if far else
                    pd.DataFrame(columns=["table", "status", "kinds", "labels", "text", "measurement"]), spreads)


def bound_lines(comps: Mapping[str, pd.DataFrame]) -> list[str]:
    """One line per run upper-bound entry: ours against the paper's bound (:func:`~pace_nb.analysis.tables.bound_verdict`)."""
    from pace_nb.analysis.tables import TABLES, bound_verdict

    out = []
    for tid, comp in comps.items():
        if "bound" not in comp or comp.empty:
            continue
        for _, e in comp[comp["bound"] & (comp["status"] == "ok")].iterrows():
            where = f"{e['row']} {e['col']}"
            if e["dataset"] == "all":  # the bound is on the worst dataset: name it
                same = comp[(comp["variant"] == e["variant"]) & (comp["dataset"] != "all")
                            & ((comp["ours_mean"] - e["ours_mean"]).abs() < 1e-9)]
                where = f"{e['col']}, worst dataset {same['dataset'].iloc[0]}" if len(same) else where
            out.append(f"{TABLES[tid].title.split(':')[0]} ({tid}), {where}: ours {e['ours_mean']:.2f} "
                       f"± {e['ours_std']:.2f} (n = {int(e['n_seeds'])}) vs ≤ {e['paper_mean']:.2f}: {bound_verdict(e)}")
    return out


def commit_table(cells: pd.DataFrame) -> list[tuple[str, int, str, str, str]]:
    """Per commit (:func:`~pace_nb.experiments.provenance.commit_label`, "not recorded" for old cells):
    how many cells, the devices/threads, software versions and memory bandwidths they record."""
    from pace_nb.experiments.provenance import NOT_RECORDED, bandwidth_span, commit_label

    recs = cells["provenance"].tolist() if len(cells) and "provenance" in cells else [None] * len(cells)
    groups: dict[str, list] = {}
    for r in recs:
        groups.setdefault(commit_label(r if isinstance(r, Mapping) else None), []).append(r)
    out = []
    for label in sorted(groups, key=lambda k: (k == NOT_RECORDED, k)):
        rs = [r for r in groups[label] if isinstance(r, Mapping)]
        dev = ", ".join(sorted({f"{r.get('device')} · {r.get('threads')}" for r in rs})) or "–"
        sw = ", ".join(sorted({f"{r.get('torch')} · {r.get('torch_geometric')} · {r.get('numpy')}" for r in rs})) or "–"
        out.append((label if label == NOT_RECORDED else f"`{label}`", len(groups[label]), dev, sw,
                    bandwidth_span(rs) or "–"))
    return out


# -- reading a store and the shipped configs (the only I/O here; the CLI writes the file) ------
def config_cells(config_paths: Sequence) -> dict[str, list[dict]]:
    """Config file stem → the cells it expands to (``Cell.describe()``), in the given order."""
    from pathlib import Path

    from pace_nb.experiments.grid import expand, load_config

    return {Path(p).stem: [c.describe() for c in expand(load_config(p), fingerprints=False)] for p in config_paths}


def _store_cells(store) -> pd.DataFrame:
    cells = store.cells()
    if len(cells) and "wall_seconds" not in cells:
        cells["wall_seconds"] = math.nan
    return cells


def _sub_store(store, folder: str):
    """The results store of its own under ``<store>/<folder>``, or None when it holds no cells."""
    from pace_nb.experiments.store import ResultsStore

    root = store.root / folder
    return ResultsStore.for_reading(root) if (root / "cells").is_dir() else None


def _draws_store(store):
    """The mask draws' store, ``<store>/draws`` (:data:`~pace_nb.analysis.draws.DRAWS_FOLDER`), or None."""
    return _sub_store(store, DRAWS_FOLDER)


def _evidence_store(store):
    """The evidence cells' store, ``<store>/evidence`` (:data:`~pace_nb.analysis.evidence.EVIDENCE_FOLDER`), or None."""
    return _sub_store(store, EVIDENCE_FOLDER)


def _concat_cells(*frames: pd.DataFrame | None) -> pd.DataFrame:
    """The cells of several stores as one frame (empty ones left out)."""
    kept = [f for f in frames if f is not None and len(f)]
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame(columns=["key", "wall_seconds"])


def report_from_store(store, config_paths: Sequence = (), tables: Sequence[str] | None = None) -> str:
    """:func:`build_report` of a :class:`~pace_nb.experiments.store.ResultsStore` (and its mask draws,
    ``<store>/draws``, and evidence cells, ``<store>/evidence``) and config files."""
    return report_and_analysis(store, config_paths, tables)[0]


def report_and_analysis(store, config_paths: Sequence = (), tables: Sequence[str] | None = None,
                        label: str | None = None) -> tuple[str, Analysis]:
    """REPRODUCTION.md's text of a store and the one :func:`analyse` of it it was built from (README's
    block is built from the same: :func:`~pace_nb.analysis.readme_block.outputs_from_store`);
    ``label``: the store as the user named it (default :func:`~pace_nb.core.config.store_label`)."""
    from pace_nb.core.config import store_label

    frames = [store.rows_of(k).assign(cell=k) for k in store.keys()]
    cell_rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["cell", "receiver"])
    rows, dstore, estore = store.load(), _draws_store(store), _evidence_store(store)
    draws = {}
    if dstore is not None:
        protocol = rows[(rows["method"] != "spear") & ~is_comparison(rows)] if len(rows) else rows
        draws = split_draws(dstore.load(), exclude=set(data_seeds(protocol)) if len(protocol) else set())
    an = analyse(rows, tables, draws, estore.load() if estore is not None else None)
    others = _concat_cells(*(_store_cells(s) for s in (dstore, estore) if s is not None))
    text = build_report(rows, _store_cells(store), config_cells(config_paths), store_label=label or store_label(store.root),
                        cell_rows=cell_rows, tables=tables, draws=draws, draw_cells=others, analysis=an)
    return text, an

