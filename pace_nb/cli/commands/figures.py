"""``pace-nb figures``: execute every notebook with papermill; figures land in ``figures/``.

Executed copies go to the git-ignored ``notebooks/_build/``. A notebook whose inputs (its
file, its parameters, the package source, and for store-reading notebooks the results
store) are unchanged since its last successful run is skipped; ``--force`` reruns it.
``--quick`` runs every notebook on the embedded demo graph (and Cora when its raw files are
present) with two seeds and small sweeps: minutes, not hours; its figures go to the
git-ignored ``figures/quick/`` (never over the committed gallery) unless ``--out`` is given.

The committed gallery ``figures/`` is drawn from the shipped store ``results/`` only: when
another store is read (``--results``, ``$PACE_NB_RESULTS``, or your ``data/results`` holding cells
or figure data), figures go to the git-ignored ``figures/own/`` unless ``--out`` is given.

Figure data: what a notebook plots after training (curves, spectra, α paths, UMAP coordinates,
its own rows) is stored in the results store's ``artifacts/`` and read on the next run, so with
the shipped store ``pace-nb figures`` replots the gallery without training; ``--recompute``
computes it afresh (new entries go to ``--results`` or ``data/results``, never the shipped store).

Drawing the committed gallery also writes its page ``docs/GALLERY.md`` (every figure at full width,
its caption under it) from the captions in ``docs/gallery.toml``.

``--check`` writes nothing: it executes the notebooks on the shipped store into a temporary folder
and exits 1 when a committed figure is not what they draw (pixels that differ, a figure drawn but
not committed or committed but drawn by no notebook, a PNG without its PDF), a figure has no
caption or a caption no figure, or the page is not what the captions generate (:mod:`pace_nb.gallery`).
"""
from __future__ import annotations

import argparse
import sys


#: what executing notebooks needs (the ``notebooks`` extra)
NOTEBOOK_MODULES = ("papermill", "nbformat", "ipykernel", "jupyter_client")


def register(sub) -> None:
    p = sub.add_parser("figures", help="execute every notebook with papermill; figures to figures/",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="small parameters: demo graph (+ Cora when present), 2 seeds, short sweeps")
    p.add_argument("--only", nargs="+", metavar="NAME", default=None,
                   help="notebooks to run: stem, number (03) or a unique part of the name (alpha)")
    p.add_argument("--dataset", nargs="+", default=None, metavar="D",
                   help="run each notebook on these datasets (default: quick → demo [+ Cora]; "
                        "full → each notebook's own default)")
    p.add_argument("--force", action="store_true", help="rerun notebooks even when their inputs are unchanged")
    p.add_argument("--recompute", action="store_true",
                   help="compute every notebook's figure data afresh (training included) instead of reading it "
                        "from the results store; implies --force")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="figures folder (default <repo>/figures from the shipped store, <repo>/figures/own from "
                        "any other store; with --quick <repo>/figures/quick)")
    p.add_argument("--build", default=None, metavar="DIR", help="executed notebooks (default notebooks/_build)")
    p.add_argument("--data-root", default=None, help="raw data root (default $PACE_NB_DATA, else ./data)")
    p.add_argument("--results", default=None, metavar="DIR", help="results store (default $PACE_NB_RESULTS, else data/results when it holds "
                   "cells, else the shipped results/)")
    p.add_argument("--timeout", type=int, default=900, help="per-cell timeout in seconds (default 900)")
    p.add_argument("--json", default=None, metavar="FILE", help="write the run table as JSON")
    p.add_argument("--check", action="store_true",
                   help="write nothing; draw the gallery from the shipped store in a temporary folder and exit 1 "
                        "when a committed figure differs from it (with --only: those notebooks' figures)")
    p.set_defaults(func=run, interrupted=lambda args: "interrupted; notebooks that finished are kept and a "
                   "rerun skips them; the interrupted notebook reruns")


def check(args) -> int:
    """``--check``: the committed gallery against what the shipped store draws."""
    from pace_nb.core.errors import ConfigError
    from pace_nb.gallery import check_gallery

    given = [f"--{o}" for o in ("quick", "out", "build", "dataset", "results", "recompute", "json", "force")
             if getattr(args, o.replace("-", "_"))]
    if given:
        raise ConfigError(f"--check compares the committed gallery with the shipped store and takes no {', '.join(given)}")
    diffs = check_gallery(args.only, data_root=args.data_root, timeout=args.timeout,
                          log=lambda m: print(m, file=sys.stderr, flush=True))
    for d in diffs:
        print(d.line())
    if diffs:
        print(f"pace-nb: {len(diffs)} figure(s) of the gallery stale; regenerate with pace-nb figures"
              + (f" --only {' '.join(args.only)}" if args.only else ""), file=sys.stderr)
        return 1
    print("gallery up to date: every figure is what the shipped store draws")
    return 0


def run(args) -> int:
    import pandas as pd

    from pace_nb.core.config import store_note, user_store_in_use
    from pace_nb.core.extras import check_installed
    from pace_nb.core.io import atomic_write_json, check_output_dir, check_output_file
    from pace_nb.data.datasets import canonical_name
    from pace_nb.notebooks import default_figures_dir, run_notebooks

    check_installed(NOTEBOOK_MODULES, "notebooks", "pace-nb figures")
    datasets = [canonical_name(d) for d in args.dataset] if args.dataset else None  # names only, no paths
    figures_dir = args.out or (str(default_figures_dir() / "quick") if args.quick else None)
    if args.timeout < 1:
        from pace_nb.core.errors import ConfigError

        raise ConfigError(f"--timeout must be a number of seconds >= 1, got {args.timeout}")
    if args.check:
        return check(args)
    other = user_store_in_use(args.results)
    if figures_dir is None and other is not None:  # the committed gallery comes from the shipped store only
        figures_dir = str(default_figures_dir() / "own")
    for folder, what in ((figures_dir, "--out"), (args.build, "--build")):
        if folder:
            check_output_dir(folder, what)
    if args.json:
        check_output_file(args.json, "--json")
    print(store_note(args.results), file=sys.stderr)  # every argument is valid: say what is read
    if other is not None and not args.out:
        print(f"note: reading {other}, not only the shipped store: figures go to {figures_dir} "
              f"(the committed gallery is drawn from the shipped store; --out DIR overrides)", file=sys.stderr)
    runs = run_notebooks(args.only, quick=args.quick, datasets=datasets, force=args.force,
                         figures_dir=figures_dir, build_dir=args.build, data_root=args.data_root,
                         results_dir=args.results, timeout=args.timeout, recompute=args.recompute,
                         log=lambda m: print(m, file=sys.stderr, flush=True))
    table = pd.DataFrame([{"notebook": r.notebook, "dataset": r.dataset, "status": r.status,
                           "seconds": round(r.seconds, 1), "figures": len([f for f in r.figures if f.endswith(".png")])}
                          for r in runs])
    print(table.to_string(index=False))
    total = sum(r.seconds for r in runs)
    print(f"{sum(r.status == 'executed' for r in runs)} executed, {sum(r.status == 'skipped' for r in runs)} "
          f"skipped in {total:.0f} s; executed copies in {runs[0].output.rsplit('/', 1)[0] if runs else '-'}")
    if args.json:
        atomic_write_json(args.json, {"runs": [vars(r) for r in runs]})
    root = default_figures_dir().parent
    if runs and figures_dir is None and (root / "docs" / "gallery.toml").is_file():  # the committed gallery: its page
        from pace_nb.gallery import write_page

        print(f"gallery page {write_page(root)}")
    return 0
