"""Where each shipped config's time goes, per method, in two results stores side by side.

    python3 benchmarks/profile_stores.py BEFORE_STORE AFTER_STORE [--part 'SPEAR comparison'] [--out FILE]

First, per shipped config (``configs/*.toml``): the cells each store holds and their summed wall time
(the cells' manifests; a store's ``draws/`` and ``evidence/`` folders count too), before and after, and the total.

Per part of the papers (the PACE protocol's one-round methods, SPEAR's own cells, SPEAR's
comparison), dataset and method: the mean seconds per run that the method's pooled rows record,
in each store, and their ratio where both have it. A method a store lacks is "–", never guessed.
A store's timings are what its cells recorded when they ran (the machine's load then is not
known): read the ratios as the change of a method's cost between the two stores' code, on the
same 2-core class of machine, not as a controlled benchmark.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd


def profile(store_dir: str) -> pd.DataFrame:
    """One row per (part, dataset, method, variant): the mean seconds per run its pooled rows record
    (a run = one seed of one cell) and the number of runs. ``part``: the SPEAR comparison, SPEAR's own
    cells, or the PACE protocol (one-round methods; Local's time is in the cells, not the rows)."""
    from pace_nb.analysis.spear_comparison import comparison_label, is_comparison
    from pace_nb.experiments.store import ResultsStore

    rows = ResultsStore.for_reading(store_dir, must_exist=True).load()
    pooled = rows[(rows["receiver"] == -1) & rows["seconds"].notna()].copy()
    comp = is_comparison(pooled)
    pooled["part"] = "PACE protocol"
    pooled.loc[pooled["method"].str.lower().eq("spear") & ~comp, "part"] = "SPEAR cells"
    pooled.loc[comp, "part"] = "SPEAR comparison"
    cnll = pooled["variant"].str.endswith("+cnll") | pooled["variant"].eq("cnll")
    pooled = pooled[~cnll]  # +CNLL rows repeat the native run's time
    g = pooled.groupby(["part", "dataset", "method", "variant"], as_index=False)["seconds"].agg(["mean", "count"])
    g["phase"] = [comparison_label(m) + ("" if v in ("native", "full") else f" [{v}]")
                  for m, v in zip(g["method"], g["variant"], strict=True)]
    return g.rename(columns={"mean": "seconds", "count": "runs"})


def config_times(store_dir: str, config_paths) -> pd.DataFrame:
    """One row per (shipped config, cell of it that ``store_dir``, its ``draws/`` or ``evidence/`` holds): the cell's
    wall time from its manifest (cells matched by setting, as :func:`pace_nb.analysis.report.config_runs` does)."""
    from pace_nb.analysis.report import _concat_cells, _draws_store, _evidence_store, _store_cells, config_cells
    from pace_nb.experiments.store import ResultsStore

    store = ResultsStore.for_reading(store_dir, must_exist=True)
    cells = _store_cells(store)
    for sub in (_draws_store(store), _evidence_store(store)):
        cells = _concat_cells(cells, _store_cells(sub) if sub is not None else None)
    keys = cells["setting_key"] if "setting_key" in cells else cells["key"]
    have = dict(zip(keys, cells["wall_seconds"], strict=True))
    prov = dict(zip(keys, cells["provenance"] if "provenance" in cells else [None] * len(cells), strict=True))
    return pd.DataFrame([{"config": name, "key": c["key"], "seconds": have[c["key"]], "provenance": prov[c["key"]]}
                         for name, cs in config_cells(config_paths).items() for c in cs if c["key"] in have],
                        columns=["config", "key", "seconds", "provenance"])


def config_lines(before: pd.DataFrame, after: pd.DataFrame, config_paths) -> list[str]:
    """Per config: cells and summed wall time in each store, and the ratio over the cells both hold; then
    the memory bandwidth each store's cells record."""
    from pace_nb.analysis.report import config_cells
    from pace_nb.experiments.provenance import bandwidths

    total = {name: len(cs) for name, cs in config_cells(config_paths).items()}
    both = before.merge(after, on=["config", "key"], suffixes=("_before", "_after"))
    lines = ["## Wall time per config", "",
             "Summed wall time of the cells each store holds; the ratio is over the cells both hold.", "",
             "| config | cells | before: cells, wall s | after: cells, wall s | both: cells, before / after |",
             "|---|---|---|---|---|"]

    def row(label, n, b, a, m):
        q = f"{len(m)}, {m.seconds_before.sum() / m.seconds_after.sum():.2f}×" if len(m) else "0, –"
        return f"| {label} | {n} | {len(b)}, {b.seconds.sum():.0f} | {len(a)}, {a.seconds.sum():.0f} | {q} |"

    for name, n in total.items():
        lines.append(row(f"`{name}`", n, before[before.config == name], after[after.config == name],
                         both[both.config == name]))
    tb, ta = before.seconds.sum(), after.seconds.sum()
    lines += [row("all", sum(total.values()), before, after, both),
              "", f"Total wall time: before {tb / 3600:.2f} h, after {ta / 3600:.2f} h.", "",
              "Memory bandwidth (single-threaded triad) the cells' manifests record — the trainer is bound by "
              f"memory traffic, so seconds compare only beside it: before {bandwidths(before.provenance)}; "
              f"after {bandwidths(after.provenance)}.", ""]
    return lines


def side_by_side(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    keys = ["part", "dataset", "method", "variant", "phase"]
    both = before.merge(after, on=keys, how="outer", suffixes=("_before", "_after"))
    both["ratio"] = both["seconds_before"] / both["seconds_after"]
    return both


def main(argv=None) -> int:
    from pace_nb.data.datasets import dataset_order

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--part", nargs="+", default=None, help="only these parts (e.g. 'SPEAR comparison')")
    ap.add_argument("--out", default=None, help="also write the table (markdown) to this file")
    ap.add_argument("--configs", nargs="*", default=None,
                    help="config files of the per-config table (default: configs/*.toml of this checkout)")
    args = ap.parse_args(argv)
    table = side_by_side(profile(args.before), profile(args.after))
    if args.part:
        table = table[table["part"].isin(args.part)]
    paths = args.configs if args.configs is not None else sorted(str(p) for p in Path("configs").glob("*.toml"))
    lines = [f"before: {args.before}   after: {args.after}", ""]
    if paths and not args.part:
        lines += config_lines(config_times(args.before, paths), config_times(args.after, paths), paths)
    lines += ["mean seconds per run (one seed of one cell) that a method's pooled rows record; runs in brackets", ""]
    for part, g in table.groupby("part", sort=True):
        lines += [f"## {part}", "", "| dataset | method | before s (runs) | after s (runs) | before / after |",
                  "|---|---|---|---|---|"]
        g = g.assign(order=[dataset_order(d) for d in g["dataset"]])
        for _, r in g.sort_values(["order", "phase"]).iterrows():
            b = "–" if r.seconds_before != r.seconds_before else f"{r.seconds_before:.1f} ({int(r.runs_before)})"
            a = "–" if r.seconds_after != r.seconds_after else f"{r.seconds_after:.1f} ({int(r.runs_after)})"
            q = "–" if r.ratio != r.ratio else f"{r.ratio:.2f}×"
            lines.append(f"| {r.dataset} | {r.phase} | {b} | {a} | {q} |")
        lines.append("")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
