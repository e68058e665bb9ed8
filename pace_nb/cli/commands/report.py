"""``pace-nb report``: write REPRODUCTION.md from the results store (no training).

Every registered table of both papers, ours beside the paper's with the differences, a
per-table agreement summary (share of entries within 1 / 2 / 5 points; entries off by more
than 2 points with every cause shown for that entry, or "unexplained", and the count of each),
settings "not run" marked as such, the wall time of each shipped config, the commits the cells
were computed from, and where the time goes per method. The output has no time
stamps: the same store gives the same file (``--check`` compares instead of writing).
Without ``--out`` it also rewrites the block of README.md between its ``pace-nb report`` markers
(the reproduction and SPEAR sections), so no number there is typed by hand; ``--check`` compares
that block too.

The committed REPRODUCTION.md is the report of the shipped store ``results/``: without ``--out``
the shipped store is read (whatever your own ``data/results`` holds), and ``--check`` compares
the committed file with it. To report on another store give both: ``--results DIR --out FILE``.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("report", help="write REPRODUCTION.md (every table, agreement summary) from the results store",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default=None, metavar="DIR",
                   help="results store (default: the shipped results/ for the committed REPRODUCTION.md; with "
                        "--out: $PACE_NB_RESULTS, else data/results when it holds cells, else results/)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="output file (default <repo>/REPRODUCTION.md, made from the shipped store only)")
    p.add_argument("--configs", default=None, metavar="DIR",
                   help="grid configs whose cells and wall time are reported (default the shipped configs/)")
    p.add_argument("--store-readme", action="store_true",
                   help="also write the store's README.md (configs and cells it holds, wall times); for the "
                        "maintainer of the shipped store")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 when FILE differs from what the store generates")
    p.set_defaults(func=run)


def _store(args, committed: bool):
    """The store to report: for the committed REPRODUCTION.md only the shipped one."""
    from pace_nb.core.config import shipped_results_dir, store_note, user_store_in_use
    from pace_nb.core.errors import ConfigError
    from pace_nb.experiments.store import ResultsStore

    if not committed:
        store = ResultsStore.for_reading(args.results, must_exist=True)  # a missing store: the error line only
        print(store_note(args.results), file=sys.stderr)
        return store
    shipped = shipped_results_dir()
    if shipped is None:
        raise ConfigError("no shipped results store (results/) in this checkout; pass --results DIR --out FILE")
    other = user_store_in_use(args.results)
    if other is not None and (args.results or os.environ.get("PACE_NB_RESULTS")):
        raise ConfigError(f"REPRODUCTION.md is the report of the shipped store {shipped} only; to report on "
                          f"{other} pass --out FILE as well (e.g. --out {other / 'REPRODUCTION.md'})")
    if other is not None:
        print(f"note: REPRODUCTION.md reports the shipped store {shipped}; your store {other} is not in it "
              f"(pace-nb report --results {other} --out FILE)", file=sys.stderr)
    return ResultsStore.for_reading(str(shipped), must_exist=True)


def run(args) -> int:
    from pace_nb.analysis.readme_block import outputs_from_store
    from pace_nb.core.config import SHIPPED_HINT, configs_dir as configs_dir_default, repo_root
    from pace_nb.core.errors import ConfigError
    from pace_nb.core.io import atomic_write_text, check_output_file

    root = repo_root()
    if args.out:
        out = Path(args.out)
    elif root is not None:
        out = root / "REPRODUCTION.md"
    else:
        raise ConfigError(f"REPRODUCTION.md and the shipped results store come with a clone of the repository only "
                          f"({SHIPPED_HINT}); to report on a store pass --results DIR --out FILE")
    if not args.check:
        check_output_file(out, "--out")
    configs_dir = Path(args.configs) if args.configs else configs_dir_default()
    if not configs_dir.is_dir() and args.configs:
        raise ConfigError(f"--configs {configs_dir} is not a folder")
    paths = sorted(configs_dir.glob("*.toml"))
    store = _store(args, committed=args.out is None)
    # a user's report names the store as they named it; the committed one the shipped store, `results/`
    named = (args.results or os.environ.get("PACE_NB_RESULTS")) if args.out is not None else None
    text, block = outputs_from_store(store, paths, label=named or None)
    outputs = [(out, text)]
    readme = root / "README.md" if root is not None and args.out is None else None
    if readme is not None and readme.is_file():  # the README's generated block (the shipped store's only)
        from pace_nb.analysis.readme_block import splice

        outputs.append((readme, splice(readme.read_text(encoding="utf-8"), block)))
    if args.store_readme:
        from pace_nb.analysis.store_readme import readme_from_store

        outputs.append((store.root / "README.md", readme_from_store(store, paths)))
    if args.check:
        stale = [p for p, t in outputs if not (p.is_file() and p.read_text(encoding="utf-8") == t)]
        for p, _ in outputs:
            print(f"{p}: {'differs from the store ' + str(store.root) if p in stale else 'up to date'}")
        if stale:
            print(f"pace-nb: {', '.join(map(str, stale))} stale; run the same command without --check to "
                  "regenerate it", file=sys.stderr)
        return 1 if stale else 0
    for p, t in outputs:
        atomic_write_text(p, t)
    print(f"report of {store.root} ({len(store.keys())} cells) written to {', '.join(str(p) for p, _ in outputs)}")
    return 0
