"""``pace-nb spear``: SPEAR (training-free PPR prototypes + shrinkage) and its ablations.

SPEAR has no trainable parameters, so its only randomness is the **data seed**: each seed
gives another Dirichlet partition and other train/val/test masks. ``--seeds`` are data
seeds (default 2024 2025 2026); mean ± std (population std, ddof = 0) are over them.
"""
from __future__ import annotations

import argparse

import pandas as pd

from pace_nb.core.errors import ConfigError
from pace_nb.core.validation import check_clients, check_seeds
from pace_nb.cli.commands._graph import add_graph_argument, resolve_source

DEFAULT_SEEDS = (2024, 2025, 2026)


def _seeds(values: list[str]) -> list[int]:
    try:
        out = [int(s) for v in values for s in str(v).split(",") if s.strip()]
    except ValueError as exc:
        raise ConfigError(f"--seeds takes integers (space or comma separated): {exc}") from None
    if not out:
        raise ConfigError("--seeds needs at least one seed")
    return list(check_seeds(out, "--seeds"))


def register(sub) -> None:
    p = sub.add_parser("spear", help="SPEAR (training-free PPR prototypes) and its ablations",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="demo", help="dataset name (default: the embedded demo graph)")
    p.add_argument("--beta", type=float, default=0.05, help="Dirichlet label-skew concentration (default 0.05)")
    p.add_argument("--clients", type=int, default=10, help="number of clients K (default 10)")
    p.add_argument("--seeds", nargs="+", default=[str(s) for s in DEFAULT_SEEDS],
                   help="data seeds: partition + masks (default 2024 2025 2026)")
    p.add_argument("--T", type=int, default=2, help="PPR steps (default 2)")
    p.add_argument("--a", type=float, default=0.5, help="PPR propagation weight a in [0, 1) (default 0.5)")
    p.add_argument("--gamma", type=float, default=0.1, help="shrinkage variance ratio gamma (default 0.1)")
    p.add_argument("--ablation", action=argparse.BooleanOptionalAction, default=True,
                   help="also run w/o shrinkage, w/o PPR, w/o both (default on)")
    p.add_argument("--methods", default=None,
                   help="comma-separated methods for SPEAR's comparison (Tab. 1/3), e.g. spear,fedavg,dense,fedcvae,"
                        "fedsd2c,ghost,oasis; 'all' = SPEAR + its 13 baselines (default: SPEAR's ablation only)")
    p.add_argument("--rounds", type=int, default=100, help="rounds of the multi-round baselines (default 100)")
    p.add_argument("--run-seed", type=int, default=None,
                   help="run seed of trained methods: initialization, dropout, sampling (default: first paper seed)")
    p.add_argument("--data-root", default=None, help="raw data root (default $PACE_NB_DATA, else ./data)")
    p.add_argument("--json", default=None, metavar="FILE", help="write summary + per-seed rows as JSON")
    add_graph_argument(p, partition=True)
    p.set_defaults(func=run)


def _federation(args, source, seed: int):
    """The Dirichlet federation of one data seed, or the graph's own clients (``--partition given``)."""
    if getattr(args, "partition", "dirichlet") == "given":
        from pace_nb.cli.commands._graph import given_federation

        fg = given_federation(source, seed, show=seed == _seeds(args.seeds)[0])
        args.clients = fg.num_clients
        return fg
    from pace_nb.methods.spear import analysis as sa

    return sa.federation(source.dataset, beta=args.beta, num_clients=args.clients, seed=seed, data_root=args.data_root)


def _setting(args) -> str:
    return "the graph's given clients" if getattr(args, "partition", "dirichlet") == "given" else \
        f"Dirichlet beta={args.beta}"


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean ± population std of acc over data seeds, one row per method × variant (table order kept)."""
    g = rows.groupby(["method", "variant"], sort=False)["acc"]
    out = pd.DataFrame({"acc_mean": g.mean(), "acc_std": g.std(ddof=0), "n_seeds": g.size()}).reset_index()
    labels = rows.drop_duplicates("variant").set_index("variant")["label"]
    out.insert(2, "label", out["variant"].map(labels))
    return out


def _records(frame: pd.DataFrame) -> list[dict]:
    """JSON-safe records (NaN → null)."""
    return frame.astype(object).where(pd.notna(frame), None).to_dict("records")


def comparison_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per method (table order kept): acc mean ± population std over data seeds, mean upload per
    client (KiB), mean total communication (MiB, upload + return), mean wall time (s)."""
    per_client = rows["bytes_up"] / rows["num_clients"]
    frame = rows.assign(kib_client=per_client / 1024, mib_total=(rows["bytes_up"] + rows["bytes_down"]) / 2**20)
    g = frame.groupby("method", sort=False)
    return pd.DataFrame({"acc_mean": g["acc"].mean(), "acc_std": g["acc"].std(ddof=0), "kib_client": g["kib_client"].mean(),
                         "mib_total": g["mib_total"].mean(), "seconds": g["seconds"].mean(),
                         "n_seeds": g.size()}).reset_index()


def _run_comparison(args) -> int:
    from pace_nb.core.config import PAPER_SEEDS
    from pace_nb.core.io import atomic_write_json
    from pace_nb.methods.oneshot.compare import SPEAR_COMPARISON, run_comparison
    from pace_nb.methods.spear import analysis as sa
    from pace_nb.methods.spear.core import SpearConfig

    source = resolve_source(args)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    methods = list(SPEAR_COMPARISON) if methods == ["all"] else methods
    if args.rounds < 1:
        raise ConfigError(f"--rounds must be >= 1, got {args.rounds}")
    run_seed = PAPER_SEEDS[0] if args.run_seed is None else args.run_seed
    config = SpearConfig(T=args.T, a=args.a, gamma=args.gamma)
    frames = []
    for seed in _seeds(args.seeds):
        fg = _federation(args, source, seed)
        frames.append(run_comparison(fg, methods, rounds=args.rounds, run_seed=run_seed, spear_config=config))
    rows = pd.concat(frames, ignore_index=True)
    summary = comparison_summary(rows)
    print(f"SPEAR comparison on {rows['dataset'].iloc[0]}: {_setting(args)}, K={args.clients}, "
          f"rounds={args.rounds} (multi-round), run seed {run_seed}; data seeds {', '.join(map(str, _seeds(args.seeds)))}")
    table = summary.assign(acc=[f"{m:6.2f} ± {s:5.2f}" for m, s in zip(summary.acc_mean, summary.acc_std)])
    print(table[["method", "acc", "kib_client", "mib_total", "seconds", "n_seeds"]].to_string(
        index=False, float_format=lambda v: f"{v:.2f}"))
    if args.json:
        atomic_write_json(args.json, {"config": {**vars(config), "dataset": args.dataset, "beta": args.beta,
                                                 "clients": args.clients, "seeds": _seeds(args.seeds),
                                                 "methods": methods, "rounds": args.rounds, "run_seed": run_seed},
                                      "summary": _records(summary), "rows": _records(rows)})
    return 0


def run(args) -> int:
    if args.methods:
        return _run_comparison(args)
    from pace_nb.methods.spear import analysis as sa
    from pace_nb.core.io import atomic_write_json
    from pace_nb.methods.spear.core import SpearConfig

    from pace_nb.core.io import check_output_file

    config = SpearConfig(T=args.T, a=args.a, gamma=args.gamma)
    source = resolve_source(args)
    seeds = _seeds(args.seeds)
    check_clients(args.clients, "--clients")
    if args.json:
        check_output_file(args.json, "--json")
    variants = ("full", "no_shrinkage", "no_ppr", "no_both") if args.ablation else ("full",)
    frames = []
    for seed in seeds:
        fg = _federation(args, source, seed)
        frames.append(sa.ablation(fg, config, variants))
    rows = pd.concat(frames, ignore_index=True)
    summary = summarize(rows)
    print(f"SPEAR on {rows['dataset'].iloc[0]}: {_setting(args)}, K={args.clients}, "
          f"T={config.T}, a={config.a}, gamma={config.gamma}; data seeds {', '.join(map(str, _seeds(args.seeds)))}")
    table = summary.assign(acc=[f"{m:6.2f} ± {s:5.2f}" for m, s in zip(summary.acc_mean, summary.acc_std)])
    print(table[["method", "label", "variant", "acc", "n_seeds"]].to_string(index=False))
    if args.json:
        atomic_write_json(args.json, {"config": {**vars(config), "dataset": args.dataset, "beta": args.beta,
                                                 "clients": args.clients, "seeds": _seeds(args.seeds)},
                                      "summary": _records(summary),
                                      "rows": _records(rows)})
    return 0
