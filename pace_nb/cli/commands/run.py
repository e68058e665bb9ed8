"""``pace-nb run``: the one-shot protocol(s) on one dataset (docs/DESIGN.md §11).

Prints one summary line per method/variant/rank (mean ± sample std over seeds of the pooled
scores, percent), under the evaluation that scored it: each receiver's model on its own test
nodes (Local, PACE, the matched controls) or the server's global model on the complete graph
(SPEAR, the one-shot baselines); ``--json F`` writes ``{"summary": [...], "receivers": [...], "config": {...}}``.
Rows are written to a results store only when asked (``--store DIR``, or ``--results DIR``),
as one cell keyed by a hash of every input that changes a number (dataset, partition and
its parameters, K, data seed, run seeds, methods, variants, ranks, ``--param`` values, training
config). ``--param METHOD.NAME=VALUE`` sets a method hyperparameter; an unknown name or a bad
value is one ``pace-nb: error:`` line naming the valid ones, before any work.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from pace_nb.cli.options import add_seeds, int_list, interrupted_note
from pace_nb.core.config import DATA_SEED, PAPER_SEEDS
from pace_nb.core.errors import ConfigError, unknown
from pace_nb.core.validation import check_clients, check_names, check_seed, check_seeds
from pace_nb.cli.commands._graph import add_graph_argument, given_federation, resolve_source

if TYPE_CHECKING:
    import pandas as pd


#: The options of ``pace-nb run`` that set a method's shared options (its class's ``shared_options``).
SHARED_FLAGS = {"variants": "--variants", "ranks": "--rank"}


def _ranks(text: str) -> list[int]:
    from pace_nb.methods.pace.lowrank import check_ranks

    items = [t.strip() for t in str(text).split(",")]
    try:
        ranks = [int(t) for t in items]
    except ValueError:
        raise ConfigError(f"--rank takes integers >= 1, or 0 for dense, got {text!r}") from None
    return list(check_ranks(ranks, "--rank"))


def register(sub) -> None:
    p = sub.add_parser("run", help="run PACE (+ Local and baselines) on one dataset",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="demo", help="dataset name (default: the embedded demo graph)")
    p.add_argument("--partition", default="louvain",
                   help="louvain | metis | dirichlet | given (the --graph file's clients; default louvain)")
    p.add_argument("--clients", type=int, default=10, help="number of clients K (default 10)")
    p.add_argument("--beta", type=float, default=None, help="Dirichlet concentration (dirichlet partition only)")
    add_seeds(p, PAPER_SEEDS, "run seeds (initialization, dropout)")
    p.add_argument("--data-seed", type=int, default=DATA_SEED, help=f"partition/mask seed (default {DATA_SEED})")
    p.add_argument("--rank", default="6", help="carrier rank(s), e.g. 6 or 2,4,6,8,0 (0 = dense; default 6)")
    p.add_argument("--methods", default="local,pace", help="comma-separated methods (default local,pace)")
    p.add_argument("--variants", default="full",
                   help="PACE variants: full,transport,fixed0.5,mean,raw,direct (default full)")
    p.add_argument("--param", action="append", default=[], metavar="METHOD.NAME=VALUE",
                   help="a method hyperparameter, e.g. fedprox.mu=0.01 (repeatable; VALUE as in TOML)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda[:i] (default auto)")
    p.add_argument("--data-root", default=None, help="raw data root (default $PACE_NB_DATA or ./data)")
    p.add_argument("--store", default=None, metavar="DIR", help="also write the rows to the results store DIR")
    p.add_argument("--results", default=None, metavar="DIR", help="same as --store DIR")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument("--json", default=None, metavar="FILE", help="write summary/receivers/config as JSON")
    add_graph_argument(p)
    p.set_defaults(func=run, interrupted=lambda args: interrupted_note(None))


def _clean(value):
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if hasattr(value, "item"):
        return _clean(value.item())
    return value


def _records(frame: pd.DataFrame) -> list[dict]:
    return [{k: _clean(v) for k, v in rec.items()} for rec in frame.to_dict(orient="records")]


def _fmt(mean, std=None, digits: int = 2) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "-"
    if std is None or (isinstance(std, float) and math.isnan(std)):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def format_summary(summary: pd.DataFrame) -> str:
    import pandas as pd

    """Readable table of :func:`pace_nb.analysis.summary.summarize` output."""
    from pace_nb.methods.registry import ranked

    table = pd.DataFrame({
        "method": summary["method"], "variant": summary["variant"],
        "rank": ["dense" if ranked(m) and r == 0 else ("-" if r == 0 else str(r))
                 for m, r in zip(summary["method"], summary["rank"], strict=True)],
        "accuracy": [_fmt(m, s) for m, s in zip(summary["acc_mean"], summary["acc_std"], strict=True)],
        "weighted-F1": [_fmt(m, s) for m, s in zip(summary["f1w_mean"], summary["f1w_std"], strict=True)],
        "macro-F1": [_fmt(m) for m in summary["f1m_mean"]],
        "mean α": [_fmt(a, digits=3) for a in summary["alpha_mean"]],
        "α=0": [_fmt(100 * a, digits=1) + ("%" if a == a else "") for a in summary["alpha_zero_frac"]],
        "upload %": [_fmt(u) for u in summary["upload_ratio"]],
        "return %": [_fmt(r) for r in summary["return_ratio"]],
        "seeds": summary["n_seeds"],
    })
    return table.to_string(index=False)


def format_summaries(summary: pd.DataFrame) -> str:
    """:func:`format_summary` per evaluation (``summary["evaluation"]``, in the order the methods
    ran), each under a line saying where its rows were scored."""
    from pace_nb.core.schema import EVALUATION_LABELS

    blocks = []
    for where in dict.fromkeys(summary["evaluation"]):
        said = ", then ".join(EVALUATION_LABELS.get(w, w) for w in str(where).split(","))
        blocks.append(f"scored by {said}:\n{format_summary(summary[summary['evaluation'] == where])}")
    return "\n".join(blocks)


def run(args) -> int:
    from pace_nb.analysis.summary import summarize
    from pace_nb.methods.protocol import run_protocol
    from pace_nb.methods.registry import ranked, with_shared_options

    from pace_nb.core.config import resolve_device
    from pace_nb.core.io import check_output_dir, check_output_file
    from pace_nb.nn.training import TrainConfig

    seeds = list(check_seeds(int_list(args.seeds, "--seeds"), "--seeds"))
    check_seed(args.data_seed, "--data-seed")
    ranks = _ranks(args.rank)
    methods = list(check_names(str(args.methods).split(","), "--methods"))
    variants = list(check_names(str(args.variants).split(","), "--variants"))
    _check_known(methods, variants)
    check_clients(args.clients, "--clients")
    if args.beta is not None and not (math.isfinite(args.beta) and args.beta > 0):
        raise ConfigError(f"--beta must be a finite number > 0, got {args.beta}")
    resolve_device(args.device)
    if args.store and args.results and args.store != args.results:
        raise ConfigError(f"--store {args.store} and --results {args.results} name two stores; give one")
    store_dir = args.store or args.results
    if store_dir:
        check_output_dir(store_dir, "--store")
    if args.json:
        check_output_file(args.json, "--json")
    from pace_nb.data.datasets import data_fingerprint

    extra = _method_params(args.param, methods)
    source = resolve_source(args)
    fingerprint = data_fingerprint(source.dataset, args.data_root) if store_dir else ""  # the cell's data version
    fg = given_federation(source, args.data_seed) if str(args.partition).lower() == "given" else None
    if fg is not None:
        args.clients = fg.num_clients
    config = {"dataset": source.name, **source.record, "partition": str(args.partition).lower(), "num_clients": args.clients,
              "beta": args.beta, "seeds": seeds, "data_seed": args.data_seed, "ranks": ranks,
              "methods": methods, "variants": variants, "device": args.device}
    if extra:  # keyed only when given: the keys of runs without --param stay as they were
        config["method_params"] = extra
    rows = run_protocol(source.dataset if fg is None else fg, partition=args.partition, num_clients=args.clients, seeds=seeds,
                        methods=methods, method_params=with_shared_options(extra, methods, variants=tuple(variants),
                                                                           ranks=tuple(ranks)),
                        data_seed=args.data_seed,
                        data_root=args.data_root, device=args.device, progress=not args.no_progress,
                        beta=args.beta)
    summary = summarize(rows, sort=False)
    ds = rows["dataset"].iloc[0] if len(rows) else args.dataset
    print(f"{ds} · {args.partition} · K = {args.clients} · seeds {', '.join(map(str, seeds))} "
          f"(percent; mean ± sample std over seeds)")
    print(format_summaries(summary))
    dense_like = summary[summary["method"].map(ranked).astype(bool) & (summary["rank"] > 0) & (summary["return_ratio"] >= 100)]
    for r in sorted(set(dense_like["rank"])):
        print(f"note: rank {r} is >= the attainable rank of every weight matrix, so every carrier was "
              f"sent dense (communication >= 100 % of the dense model)")
    if store_dir:
        stored, key = _store(rows, store_dir, {**config, "train": asdict(TrainConfig()), "data": fingerprint})
        print(f"rows stored in {stored} (cell {key})")
    if args.json:
        from pace_nb.core.io import atomic_write_json

        payload = {"summary": _records(summary), "receivers": _records(rows[rows["receiver"] >= 0]),
                   "config": config}
        atomic_write_json(Path(args.json), payload, allow_nan=False)
        print(f"wrote {args.json}")
    return 0


def _check_known(methods: list[str], variants: list[str]) -> None:
    """Unknown method or PACE variant names fail here, before any training."""
    from pace_nb.methods.pace.protocol import VARIANTS
    from pace_nb.methods.registry import METHODS

    for m in methods:
        METHODS.key(m)
    known = {v.lower() for v in VARIANTS}
    for v in variants:
        if v.lower() not in known:
            raise unknown("PACE variant", v, VARIANTS)


def _method_params(items: list[str], methods: list[str]) -> dict[str, dict]:
    """``--param METHOD.NAME=VALUE`` options → ``{method id: {name: value}}`` (VALUE read as a TOML
    value, else kept as text); names and values are checked by the method registry."""
    import tomllib

    from pace_nb.methods.registry import METHODS, check_all_method_params, shared_options

    run = {METHODS.key(m) for m in methods if m in METHODS}
    out: dict[str, dict] = {}
    for item in items:
        target, sep, text = item.partition("=")
        method, dot, name = target.strip().partition(".")
        if not sep or not dot or not method or not name:
            raise ConfigError(f"--param {item!r}: expected METHOD.NAME=VALUE, e.g. fedprox.mu=0.01")
        key = METHODS.key(method)
        if key not in run:
            raise ConfigError(f"--param {item!r}: method {key!r} is not among --methods")
        if name.strip() in shared_options(key):
            flag = SHARED_FLAGS.get(name.strip(), f"--{name.strip()}")
            raise ConfigError(f"--param {item!r}: give {key}'s {name.strip()} with {flag} (one value for the whole run)")
        try:
            value = tomllib.loads(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = text.strip()
        out.setdefault(key, {})[name.strip()] = value
    check_all_method_params(out)
    return out


def _store(rows: pd.DataFrame, path, config: dict):
    """One cell keyed by every input that changes a number, the raw data's fingerprint (``data``)
    included (the device is recorded, not keyed)."""
    from pace_nb.experiments.store import ResultsStore, stable_key

    cell = {"command": "run", **config}
    key = "run-" + stable_key({k: v for k, v in cell.items() if k != "device"})
    store = ResultsStore(path)
    store.append(rows, cell_key=key, cell=cell)
    return store.root, key
