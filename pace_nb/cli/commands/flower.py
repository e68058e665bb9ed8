"""``pace-nb flower``: a one-shot method as Flower apps, one round (docs/FLOWER.md).

``--method`` is PACE, SPEAR or any registered one-shot method (e.g. fedcvae): the clients run
its client phase, the server its server phase and evaluation (the in-process rows, the same).
A multi-round method is refused with the reason. ``--param METHOD.NAME=VALUE`` sets the method's
hyperparameter (e.g. ``fedcvae.epochs=50``, ``spear.T=3``); ``--rank`` / ``--variant`` set its
shared options ``ranks`` / ``variants`` (PACE's), one value each: a Flower run is one configuration.

  simulate   Flower's simulation engine (Ray; ``--engine inprocess`` runs the same apps without Ray)
  deploy     a loopback deployment: SuperLink + K SuperNodes as processes on 127.0.0.1
  export     write the per-client partition files and the Flower app project to --workdir
             (for a deployment you start yourself, one SuperNode per data holder)

Each client reads only its own partition file. PACE's server holds no data; SPEAR and the
one-shot baselines are evaluated, as in the papers, on the complete graph, which only the
ServerApp's evaluator file holds. ``--compare`` also runs the in-process protocol on the same
partition and seeds and prints both (the rows are the same).
"""
from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING

from pace_nb.core.errors import ConfigError
from pace_nb.cli.commands._graph import add_graph_argument, resolve_source

if TYPE_CHECKING:
    from pace_nb.flower.server import FlowerOutcome


def _drop(text: str, k: int) -> tuple[int, ...]:
    """``--drop 1,3`` → (1, 3): distinct client ids in [0, K), at least one client left."""
    items = [s.strip() for s in str(text).split(",") if s.strip()]
    try:
        ids = [int(s) for s in items]
    except ValueError:
        raise ConfigError(f"--drop must be comma-separated client ids, got {text!r}") from None
    bad = sorted({i for i in ids if not 0 <= i < k})
    if bad:
        raise ConfigError(f"--drop: client id(s) {bad} outside 0..{k - 1}")
    if len(set(ids)) != len(ids) or len(set(ids)) >= k:
        raise ConfigError(f"--drop: give distinct ids and leave at least one of the {k} clients")
    return tuple(sorted(set(ids)))


def register(sub) -> None:
    p = sub.add_parser("flower", help="a one-shot method (PACE, SPEAR, FedCVAE, ...) on Flower (simulation or loopback deployment)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("simulate", "deploy", "export"),
                   help="simulate (Flower engine), deploy (loopback) or export (files for your own deployment)")
    p.add_argument("--dataset", default="demo", help="dataset name (default: the embedded demo graph)")
    p.add_argument("--clients", type=int, default=10, help="number of clients K = SuperNodes (default 10)")
    p.add_argument("--method", default="pace",
                   help="pace, spear or any registered one-shot method, e.g. fedcvae (default pace)")
    p.add_argument("--param", action="append", default=[], metavar="METHOD.NAME=VALUE",
                   help="a one-shot method's hyperparameter, e.g. fedcvae.epochs=50 (repeatable; VALUE as in TOML)")
    p.add_argument("--partition", default=None,
                   help="louvain | metis | dirichlet | given (the --graph file's clients; default: louvain for PACE, "
                        "dirichlet otherwise)")
    p.add_argument("--beta", type=float, default=None, help="Dirichlet concentration (default 0.05 for dirichlet)")
    p.add_argument("--data-seed", type=int, default=2024, help="partition + masks seed (default 2024)")
    p.add_argument("--seed", type=int, default=None, help="run seed (default: the first paper seed; SPEAR has none)")
    p.add_argument("--rank", type=int, default=None,
                   help="the method's ranks, one value (PACE's carrier rank, 0 = dense; default: the method's, 6)")
    p.add_argument("--variant", default=None, help="the method's variants, one value (PACE's; default: full)")
    p.add_argument("--epochs", type=int, default=100,
                   help="Local / server GCN training epochs (default 100)")
    p.add_argument("--engine", choices=("ray", "inprocess"), default="ray", help="simulate: engine (default ray)")
    p.add_argument("--drop", default="", metavar="K1,K2",
                   help="simulate: these client ids drop out before uploading (the server runs on the others)")
    p.add_argument("--timeout", type=float, default=900.0, help="bound on the whole run, seconds (default 900)")
    p.add_argument("--compare", action="store_true", help="also run the in-process protocol and print both")
    p.add_argument("--workdir", default=None,
                   help="deploy/export: a new or empty folder for partitions, app, logs (default: temporary); "
                        "deploy removes only what it wrote there")
    p.add_argument("--keep", action="store_true", help="deploy: keep the work folder (logs) afterwards")
    p.add_argument("--insecure", action="store_true",
                   help="deploy: no TLS and no SuperNode authentication (default: both, with demo credentials)")
    p.add_argument("--probe", action="store_true",
                   help="deploy: also start a SuperNode with an unregistered key and one trusting another CA; "
                        "both must be refused (their last log lines are printed)")
    p.add_argument("--data-root", default=None, help="raw data root (default $PACE_NB_DATA, else ./data)")
    p.add_argument("--json", default=None, metavar="FILE", help="write rows, wire sizes and timings as JSON")
    add_graph_argument(p)
    p.set_defaults(func=run)


def _federation(args):
    from pace_nb.data.federation import build_federated

    from pace_nb.methods.registry import registered

    scheme = args.partition or registered()[args.method].partition  # its paper's protocol
    beta = args.beta if args.beta is not None else (0.05 if scheme == "dirichlet" else None)
    return build_federated(resolve_source(args).dataset, scheme=scheme, num_clients=args.clients, seed=args.data_seed,
                           data_root=args.data_root, beta=beta)


def _reference(fg, settings) -> tuple[list[dict], float]:
    """The in-process protocol on the same federation and seed → (pooled rows, seconds)."""
    from pace_nb.methods.protocol import run_protocol

    t0 = time.perf_counter()
    rows = run_protocol(fg, seeds=(settings.seed,), methods=(settings.method,), train_config=settings.train_config,
                        method_params={settings.method: settings.method_params}, progress=False)
    return rows[rows.receiver == -1].to_dict("records"), time.perf_counter() - t0


def _export(fg, settings, args) -> int:
    from pathlib import Path

    from pace_nb.flower.adapters import make_adapter
    from pace_nb.flower.deploy import write_app
    from pace_nb.flower.partitions import export_evaluation, export_partitions

    if not args.workdir:
        raise ConfigError("export needs --workdir DIR")
    root = Path(args.workdir)
    parts = export_partitions(fg, root / "partitions")
    evaluation = None
    if make_adapter(settings).evaluation == "complete_graph":
        evaluation = export_evaluation(fg, root / "evaluator").resolve()
    app = write_app(root / "app", settings, (root / "outcome.json").resolve(), evaluation, parts.resolve())
    print(f"wrote {fg.num_clients} client partition files to {parts} (give data holder k only client_<k>.npz "
          f"and federation.json) and the Flower app project to {app}"
          + (f"; the ServerApp's evaluator file (the complete graph) to {evaluation}" if evaluation else ""))
    return 0


def run(args) -> int:
    from pace_nb.flower.settings import FlowerSettings
    from pace_nb.flower.simulate import require_flwr
    from pace_nb.methods.registry import method_label

    require_flwr()
    if args.json:  # before any work: a bad target must not cost the run
        from pace_nb.core.io import check_output_file

        check_output_file(args.json, "--json")
    if args.action in ("deploy", "export") and args.workdir:
        from pace_nb.flower.deploy import check_workdir

        check_workdir(args.workdir)
    from pace_nb.flower.adapters import resolve_method

    args.method = resolve_method(args.method)  # unknown or multi-round: one line, before any work
    kw: dict = {} if args.seed is None else {"seed": args.seed}
    settings = FlowerSettings(method=args.method, num_clients=args.clients, epochs=args.epochs, timeout=args.timeout,
                              params=json.dumps(_params(args), sort_keys=True), **kw)
    fg = _federation(args)
    from pace_nb.flower.adapters import make_adapter

    make_adapter(settings).check_federation(fg)  # e.g. an impossible rank: one line before any training
    if fg.num_clients != settings.num_clients:
        from dataclasses import replace

        settings = replace(settings, num_clients=fg.num_clients)
    drop = _drop(args.drop, fg.num_clients) if args.action == "simulate" else ()
    if args.drop and args.action != "simulate":
        raise ConfigError("--drop simulates drop-outs: it applies to `pace-nb flower simulate` only")
    if args.action == "export":
        return _export(fg, settings, args)
    if args.action == "deploy":
        from pace_nb.flower.deploy import deploy

        if args.insecure:
            import sys

            print("pace-nb: warning: --insecure: no TLS and no SuperNode authentication; any process that reaches "
                  "the SuperLink port can join (loopback only)", file=sys.stderr)
        out: FlowerOutcome | None = deploy(fg, settings, workdir=args.workdir, timeout=args.timeout, keep=args.keep,
                     insecure=args.insecure, probe=args.probe)
    elif args.engine == "ray":
        from pace_nb.flower.simulate import simulate

        out = simulate(fg, settings, drop_partitions=drop)
    else:
        import tempfile

        from pathlib import Path

        from pace_nb.flower.client import make_client_app
        from pace_nb.flower.inprocess import run_inprocess
        from pace_nb.flower.partitions import export_evaluation, export_partitions

        with tempfile.TemporaryDirectory() as tmp:
            parts = str(export_partitions(fg, Path(tmp) / "partitions"))
            out = run_inprocess(make_client_app(parts, drop), settings,
                                evaluation=export_evaluation(fg, Path(tmp) / "evaluator"), federation=parts)
    if out is None:
        raise ConfigError("the Flower run produced no outcome")
    pooled = out.rows[out.rows.receiver == -1].iloc[0]
    t = out.timings
    print(f"{method_label(settings.method)} on Flower ({t['runtime']}): {fg.dataset}, {fg.config.get('scheme')}, "
          f"K={fg.num_clients}, seed {int(pooled.seed)}; participants {len(out.wire)}/{fg.num_clients}"
          + (f"; dropped {len(out.dropped)}: " + "; ".join(f"node {d.get('node_id')} ({d.get('kind')} at {d.get('stage')}: "
                                                          f"{d.get('reason')})" for d in out.dropped)
             if out.dropped else ""))
    print(f"  pooled acc {pooled.acc:.2f}  mean alpha {pooled.alpha:.4f}  bytes up {_int(pooled.bytes_up)} "
          f"down {_int(pooled.bytes_down)}  (Flower messages: up {int(out.wire.message_up.sum())} "
          f"down {int(out.wire.message_down.sum())})")
    train = out.wire.get("train_seconds")
    print(f"  wall {t['total']:.1f} s = startup {t['startup']:.1f} s + round {t['round']:.1f} s; compute: server "
          f"{t['server_compute']:.3f} s, clients {t['client_compute']:.2f} s summed"
          + (f" (Local training mean {train.mean():.2f} s, max {train.max():.2f} s)" if train is not None else "")
          + f"; overhead {t['overhead']:.1f} s")
    if "security" in t:
        print(f"  security: {t['security']}")
    for name, line in t.get("probe", {}).items():
        print(f"  probe {name}: {line}")
    doc = out.to_json_dict()
    if args.compare:
        ref, secs = _reference(fg, settings)
        r = ref[0]
        print(f"  in-process: pooled acc {r['acc']:.2f}  mean alpha {r['alpha']:.4f}  bytes up {_int(r['bytes_up'])} "
              f"down {_int(r['bytes_down'])}  wall {secs:.1f} s")
        doc["reference"] = {"rows": json.loads(json.dumps(ref, default=str)), "seconds": secs}
    if args.json:
        from pace_nb.core.io import atomic_write_json

        atomic_write_json(args.json, json.loads(json.dumps(doc, default=str).replace("NaN", "null")))
    return 0


#: The options that set a method's shared options (its class's ``shared_options``), one value each.
SHARED_FLAGS = {"ranks": "rank", "variants": "variant"}


def _params(args) -> dict:
    """The method's hyperparameters: ``--param`` (checked by the registry) and its shared options
    from ``--rank`` / ``--variant`` (given: the method must take that option)."""
    from pace_nb.methods.registry import METHODS, shared_options

    params: dict = {}
    if args.param:
        from pace_nb.cli.commands.run import _method_params

        for item in args.param:
            target = item.partition("=")[0].partition(".")[0].strip()
            if target in METHODS and METHODS.key(target) != args.method:
                raise ConfigError(f"--param {item!r}: method {METHODS.key(target)!r} is not --method {args.method}")
        params = _method_params(args.param, [args.method]).get(args.method, {})
    for name, flag in SHARED_FLAGS.items():
        value = getattr(args, flag)
        if value is None:
            continue
        if name not in shared_options(args.method):
            raise ConfigError(f"--{flag} sets a method's {name}; {args.method} takes none")
        params[name] = [value]
    return params


def _int(v) -> str:
    return str(int(v)) if v == v else "-"
