"""``pace-nb spear``: SPEAR (training-free PPR prototypes + shrinkage) and its ablations.

SPEAR has no trainable parameters, so its only randomness is the **data seed**: each seed
gives another Dirichlet partition and other train/val/test masks. ``--seeds`` are data
seeds (comma separated; default 2024,2025,2026); mean ± sample std (ddof = 1) are over them.
``--methods`` runs SPEAR's comparison (its Tab. 1/3) instead: SPEAR beside the trained
baselines, each scored by the server's global model on the complete graph.

One data seed is one cell, the same cell as a ``[[spear]]`` section of a grid config with
``seed_batch = 1`` (configs/spear_comparison.toml for ``--methods all``). With ``--store DIR``
every finished data seed is written to that results store when it finishes, and a rerun of
the same command reads it instead of computing it again (resume after Ctrl-C). Without
``--store`` nothing is written.
"""
from __future__ import annotations

import argparse
import re
import sys
import warnings
from typing import TYPE_CHECKING

from pace_nb.cli.commands._graph import add_graph_argument, resolve_source
from pace_nb.cli.options import add_seeds, int_list, interrupted_note, split_list
from pace_nb.core.errors import ConfigError
from pace_nb.core.validation import check_clients, check_seeds

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_SEEDS = (2024, 2025, 2026)
ABLATION = ("full", "no_shrinkage", "no_ppr", "no_both")


def register(sub) -> None:
    p = sub.add_parser("spear", help="SPEAR (training-free PPR prototypes) and its ablations",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="demo", help="dataset name (default: the embedded demo graph)")
    p.add_argument("--beta", type=float, default=0.05, help="Dirichlet label-skew concentration (default 0.05)")
    p.add_argument("--clients", type=int, default=10, help="number of clients K (default 10)")
    add_seeds(p, DEFAULT_SEEDS, "data seeds: partition + masks")
    p.add_argument("--T", type=int, default=None, help="PPR steps (default 2)")
    p.add_argument("--a", type=float, default=None, help="PPR propagation weight a in [0, 1) (default 0.5)")
    p.add_argument("--gamma", type=float, default=None, help="shrinkage variance ratio gamma (default 0.1)")
    p.add_argument("--ablation", action=argparse.BooleanOptionalAction, default=True,
                   help="also run w/o shrinkage, w/o PPR, w/o both (default on)")
    p.add_argument("--methods", default=None,
                   help="comma-separated methods for SPEAR's comparison (Tab. 1/3), e.g. spear,fedavg,dense,fedcvae,"
                        "fedsd2c,ghost,oasis; 'all' = SPEAR + its 13 baselines (default: SPEAR's ablation only)")
    p.add_argument("--rounds", type=int, default=100, help="rounds of the multi-round baselines (default 100)")
    p.add_argument("--run-seed", type=int, default=None,
                   help="run seed of trained methods: initialization, dropout, sampling (default: first paper seed)")
    p.add_argument("--data-root", default=None, help="raw data root (default $PACE_NB_DATA, else ./data)")
    p.add_argument("--store", default=None, metavar="DIR",
                   help="write each finished data seed to the results store DIR; a rerun resumes from it")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument("--json", default=None, metavar="FILE", help="write summary + per-seed rows as JSON")
    add_graph_argument(p, partition=True)
    p.set_defaults(func=run, interrupted=_interrupted)


def _interrupted(args) -> str:
    if getattr(args, "store", None):
        return interrupted_note(f"finished data seeds are in the store {args.store}; rerun the same command to resume")
    return interrupted_note(None) + " (pass --store DIR to keep finished data seeds)"


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean ± sample std (ddof = 1) of acc over data seeds, one row per method × variant (table order kept)."""
    import pandas as pd

    g = rows.groupby(["method", "variant"], sort=False)["acc"]
    out = pd.DataFrame({"acc_mean": g.mean(), "acc_std": g.std(ddof=1), "n_seeds": g.size()}).reset_index()
    labels = rows.drop_duplicates("variant").set_index("variant")["label"]
    out.insert(2, "label", out["variant"].map(labels))
    return out


def comparison_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per method (table order kept): acc mean ± sample std (ddof = 1) over data seeds, mean upload
    per client (KiB), mean total communication (MiB, upload + return), mean wall time (s)."""
    import pandas as pd

    per_client = rows["bytes_up"] / rows["num_clients"]
    frame = rows.assign(kib_client=per_client / 1024, mib_total=(rows["bytes_up"] + rows["bytes_down"]) / 2**20)
    g = frame.groupby("method", sort=False)
    return pd.DataFrame({"acc_mean": g["acc"].mean(), "acc_std": g["acc"].std(ddof=1), "kib_client": g["kib_client"].mean(),
                         "mib_total": g["mib_total"].mean(), "seconds": g["seconds"].mean(),
                         "n_seeds": g.size()}).reset_index()


def _records(frame: pd.DataFrame) -> list[dict]:
    """JSON-safe records (NaN → null)."""
    import pandas as pd

    return frame.astype(object).where(pd.notna(frame), None).to_dict("records")


def _acc(mean: float, std: float) -> str:
    return f"{mean:6.2f} ± {std:5.2f}" if std == std else f"{mean:6.2f}"  # one seed: no spread


def section(args, seeds: list[int], dataset: str | None = None) -> dict:
    """The ``[[spear]]`` grid section this command line means (one cell per data seed)."""
    from pace_nb.core.config import PAPER_SEEDS

    sec = {"name": "pace-nb spear", "datasets": [dataset or args.dataset], "beta": args.beta, "clients": args.clients,
           "seeds": seeds, "seed_batch": 1}
    sec.update({k: getattr(args, k) for k in ("T", "a", "gamma") if getattr(args, k) is not None})
    if args.methods:
        from pace_nb.methods.registry import spear_comparison

        methods = [m.lower() for m in split_list(args.methods)]
        if not methods:
            raise ConfigError("--methods needs at least one method name (or 'all')")
        sec.update(methods=list(spear_comparison()) if methods == ["all"] else methods, variants=["full"],
                   rounds=args.rounds, run_seed=PAPER_SEEDS[0] if args.run_seed is None else args.run_seed)
    else:
        sec["variants"] = list(ABLATION if args.ablation else ABLATION[:1])
    return sec


def _compute(cfg, cells, store, args):
    """Run the cells into ``store`` (finished ones are read); warnings become one line each."""
    from pace_nb.experiments.runner import run_grid

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = run_grid(cfg, store, strict=True, data_root=args.data_root, progress=not args.no_progress)
    counts: dict[str, int] = {}
    for w in caught:
        counts[str(w.message)] = counts.get(str(w.message), 0) + 1
    for msg, n in counts.items():
        print(f"pace-nb: warning: {msg}" + (f" ({n}×)" if n > 1 else ""), file=sys.stderr)
    return report


def _given_rows(args, source, seeds: list[int], sec: dict) -> pd.DataFrame:
    """Rows on the graph's own clients (``--partition given``): one federation per data seed
    (the seed draws the masks unless the file gives them), computed here, not stored."""
    import pandas as pd

    from pace_nb.cli.commands._graph import given_federation
    from pace_nb.methods.spear import analysis as sa
    from pace_nb.methods.spear.core import SpearConfig

    config = SpearConfig(**{k: sec[k] for k in ("T", "a", "gamma") if k in sec})
    frames = []
    for seed in seeds:
        fg = given_federation(source, seed, show=seed == seeds[0])
        args.clients = fg.num_clients
        if args.methods:
            from pace_nb.methods.oneshot.compare import run_comparison

            frames.append(run_comparison(fg, sec["methods"], rounds=sec["rounds"], run_seed=sec["run_seed"],
                                         spear_config=config))
        else:
            frames.append(sa.ablation(fg, config, tuple(sec["variants"])))
    return pd.concat(frames, ignore_index=True)


def run(args) -> int:
    import tempfile

    import pandas as pd

    from pace_nb.core.io import atomic_write_json, check_output_dir, check_output_file
    from pace_nb.experiments.grid import GridConfig, expand
    from pace_nb.experiments.store import ResultsStore

    seeds = list(check_seeds(int_list(args.seeds, "--seeds"), "--seeds"))
    check_clients(args.clients, "--clients")
    import math

    from pace_nb.core.limits import MAX_ROUNDS, check_count
    from pace_nb.core.validation import check_seed

    if not (math.isfinite(args.beta) and args.beta > 0):
        raise ConfigError(f"--beta must be a finite number > 0, got {args.beta}")
    check_count(args.rounds, "--rounds", MAX_ROUNDS)
    if args.run_seed is not None:
        check_seed(args.run_seed, "--run-seed")
    source = resolve_source(args)  # a --graph file is validated here, before any work
    given = getattr(args, "partition", "dirichlet") == "given"
    if given and args.store:
        raise ConfigError("--store keeps Dirichlet cells; with --partition given the rows are printed "
                          "(and written with --json) only")
    sec = section(args, seeds, source.dataset)
    cfg = GridConfig({"grid": {"name": "pace-nb spear"}, "spear": [sec]}, path="pace-nb spear")
    try:
        cells = expand(cfg)  # validates every name and parameter before any work
    except ConfigError as exc:  # the options are this command's, not a config file's: "[[spear]] T" is --T
        msg = str(exc).removeprefix(f"{cfg.path}: ")
        raise type(exc)(re.sub(r"^\[\[spear\]\] (\w+)", lambda m: "--" + m[1].replace("_", "-"), msg)) from None
    if args.json:
        check_output_file(args.json, "--json")
    if args.store:
        check_output_dir(args.store, "--store")
    if given:
        rows = _given_rows(args, source, seeds, sec)
    else:
        with tempfile.TemporaryDirectory(prefix="pace_nb-spear-") as tmp:
            store = ResultsStore(args.store or tmp)
            report = _compute(cfg, cells, store, args)
            rows = pd.concat([store.rows_of(c.key) for c in cells], ignore_index=True)
    if args.store:
        done = report.count("done")
        print(f"store {store.root}: {report.count('ran')} data seed(s) computed, {done} read (already done)")
    comparison = bool(args.methods)
    summary = comparison_summary(rows) if comparison else summarize(rows)
    table = summary.assign(acc=[_acc(m, s) for m, s in zip(summary.acc_mean, summary.acc_std, strict=True)])
    opts = f"T={sec.get('T', 2)}, a={sec.get('a', 0.5)}, gamma={sec.get('gamma', 0.1)}"
    setting = "the graph's given clients" if given else f"Dirichlet beta={args.beta}"
    head = (f"SPEAR comparison on {rows['dataset'].iloc[0]}: {setting}, K={args.clients}, "
            f"rounds={sec['rounds']} (multi-round), run seed {sec['run_seed']}" if comparison else
            f"SPEAR on {rows['dataset'].iloc[0]}: {setting}, K={args.clients}, {opts}")
    print(f"{head}; data seeds {', '.join(map(str, seeds))} (acc: mean ± sample std over data seeds)")
    cols = ["method", "acc", "kib_client", "mib_total", "seconds", "n_seeds"] if comparison else \
        ["method", "label", "variant", "acc", "n_seeds"]
    print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    if args.json:
        config = {k: v for k, v in sec.items() if k not in ("name", "datasets", "seed_batch")}
        config.update(source.record, partition="given" if given else "dirichlet")
        atomic_write_json(args.json, {"config": {"dataset": rows["dataset"].iloc[0], **config, "std": "sample (ddof=1)",
                                                 "cells": [c.key for c in cells], "store": args.store},
                                      "summary": _records(summary), "rows": _records(rows)})
    return 0
