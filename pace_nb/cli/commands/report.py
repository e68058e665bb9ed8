"""``pace-nb report``: write REPRODUCTION.md from the results store (no training).

Every registered table of both papers, ours beside the paper's with the differences, a
per-table agreement summary (share of entries within 1 / 2 / 5 points; entries off by more
than 2 points with the footnote cause when one exists), settings "not run" marked as such, the
wall time of each shipped config, and where the time goes per method. The output has no time
stamps: the same store gives the same file (``--check`` compares instead of writing).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("report", help="write REPRODUCTION.md (every table, agreement summary) from the results store",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default=None, metavar="DIR",
                   help="results store (default $PACE_NB_RESULTS, else data/results when it holds cells, "
                        "else the shipped results/)")
    p.add_argument("--out", default=None, metavar="FILE", help="output file (default <repo>/REPRODUCTION.md)")
    p.add_argument("--configs", default=None, metavar="DIR",
                   help="grid configs whose cells and wall time are reported (default <repo>/configs)")
    p.add_argument("--store-readme", action="store_true",
                   help="also write the store's README.md (configs and cells it holds, wall times); for the "
                        "maintainer of the shipped store")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 when FILE differs from what the store generates")
    p.set_defaults(func=run)


def run(args) -> int:
    from pace_nb.analysis.report import report_from_store
    from pace_nb.core.config import repo_root
    from pace_nb.core.errors import ConfigError
    from pace_nb.core.io import atomic_write_text, check_output_file
    from pace_nb.experiments.store import ResultsStore

    root = repo_root()
    if args.out is None and root is None:
        raise ConfigError("no source checkout found; pass --out FILE")
    out = Path(args.out) if args.out else root / "REPRODUCTION.md"
    if not args.check:
        check_output_file(out, "--out")
    configs_dir = Path(args.configs) if args.configs else (root / "configs" if root else None)
    if configs_dir is not None and not configs_dir.is_dir():
        raise ConfigError(f"--configs {configs_dir} is not a folder")
    paths = sorted(configs_dir.glob("*.toml")) if configs_dir is not None else []
    store = ResultsStore.for_reading(args.results, must_exist=True)
    text = report_from_store(store, paths)
    outputs = [(out, text)]
    if args.store_readme:
        from pace_nb.analysis.report import readme_from_store

        outputs.append((store.root / "README.md", readme_from_store(store, paths)))
    if args.check:
        stale = [p for p, t in outputs if not (p.is_file() and p.read_text(encoding="utf-8") == t)]
        for p, _ in outputs:
            print(f"{p}: {'differs from the store ' + str(store.root) if p in stale else 'up to date'}")
        if stale:
            print(f"pace-nb: {', '.join(map(str, stale))} stale; run `pace-nb report` to regenerate", file=sys.stderr)
        return 1 if stale else 0
    for p, t in outputs:
        atomic_write_text(p, t)
    print(f"report of {store.root} ({len(store.keys())} cells) written to {', '.join(str(p) for p, _ in outputs)}")
    return 0
