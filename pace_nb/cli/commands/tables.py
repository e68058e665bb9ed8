"""``pace-nb tables``: the papers' tables (markdown, LaTeX, CSV), ours beside the paper's.

Pure function of the results store: a setting that is not in the store is printed as
"not run" (never filled in). Run ``pace-nb grid configs/<...>.toml`` first. Each table is printed
(markdown) and written to ``figures/tables`` of the current folder (``--out DIR`` elsewhere);
nothing is written beside the store that is read.
"""
from __future__ import annotations

import argparse
from pathlib import Path


#: every registered table id, for --help (tests/cli/test_cli_foundation.py checks it against the registry)
TABLE_IDS = ("1..12 (PACE Tables 1-12), A (PACE App. A), spear-1, spear-3 (SPEAR Tab. 1, 3), spear-ablation, "
             "spear-robustness, spear-robustness-global, spear-efficiency")


def register(sub) -> None:
    p = sub.add_parser("tables", help="write the papers' tables, ours beside the paper's values",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default=None, metavar="DIR",
                   help="results store (default $PACE_NB_RESULTS, else <repo>/data/results when it holds cells, "
                        "else the shipped <repo>/results)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output folder (default figures/tables in the current folder; never beside the store read)")
    p.add_argument("--tables", default="all", metavar="IDS",
                   help=f"comma-separated table ids: {TABLE_IDS}, or 'pace' / 'spear' / 'all' (default all)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write every comparison row as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from pace_nb.core.io import atomic_write_json
    from pace_nb.experiments.store import ResultsStore
    from pace_nb.analysis.tables import TABLES, build_tables, select_tables, write_tables

    from pace_nb.core.io import check_output_dir, check_output_file

    ids = select_tables(args.tables)
    store = ResultsStore.for_reading(args.results, must_exist=True)  # a missing folder is an error, not an empty store
    out = Path(args.out) if args.out else Path("figures") / "tables"  # a store that is read is not written to
    check_output_dir(out, "--out")
    if args.json:
        check_output_file(args.json, "--json")
    rows = store.load()
    paths = write_tables(rows, out, ids)
    comps = build_tables(rows, ids)
    from pace_nb.core.config import store_note

    for p in paths:  # the tables themselves, as the markdown files hold them
        if p.name.startswith("table_") and p.suffix == ".md":
            print(p.read_text(encoding="utf-8").rstrip() + "\n")
    print(f"{store_note(args.results)}: {len(rows)} rows; tables written to {out} (markdown, LaTeX, CSV)")
    print(f"{'table':<18} {'values run':>10}  {'mean |ours - paper|':>19}  title")
    for tid, comp in comps.items():
        ok = comp[comp.status == "ok"]
        gap = f"{ok['diff'].abs().mean():.2f}" if len(ok) and ok["diff"].notna().any() else "-"
        print(f"{tid:<18} {len(ok):>4}/{len(comp):<5}  {gap:>19}  {TABLES[tid].title}")
    if args.json:
        atomic_write_json(args.json, {"results": str(store.root), "out": str(out), "files": [str(p) for p in paths],
                                      "tables": {t: c.astype(object).where(c.notna(), None).to_dict("records")
                                                 for t, c in comps.items()}})
    return 0
