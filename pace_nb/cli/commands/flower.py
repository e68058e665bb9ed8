"""``pace-nb flower``: PACE and SPEAR as Flower apps, one round (docs/FLOWER.md).

  simulate   Flower's simulation engine (Ray; ``--engine inprocess`` runs the same apps without Ray)
  deploy     a loopback deployment: SuperLink + K SuperNodes as processes on 127.0.0.1
  export     write the per-client partition files and the Flower app project to --workdir
             (for a deployment you start yourself, one SuperNode per data holder)

Each client reads only its own partition file; the server holds no data. ``--compare`` also
runs the in-process protocol on the same partition and seeds and prints both.
"""
from __future__ import annotations

import argparse
import json
import time

from pace_nb.core.errors import ConfigError
from pace_nb.cli.commands._graph import add_graph_argument, resolve_source


def register(sub) -> None:
    p = sub.add_parser("flower", help="PACE / SPEAR on Flower (simulation or loopback deployment)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("simulate", "deploy", "export"),
                   help="simulate (Flower engine), deploy (loopback) or export (files for your own deployment)")
    p.add_argument("--dataset", default="demo", help="dataset name (default: the embedded demo graph)")
    p.add_argument("--clients", type=int, default=10, help="number of clients K = SuperNodes (default 10)")
    p.add_argument("--method", choices=("pace", "spear"), default="pace", help="protocol (default pace)")
    p.add_argument("--partition", default=None,
                   help="louvain | metis | dirichlet | given (the --graph file's clients; default: louvain for PACE, "
                        "dirichlet for SPEAR)")
    p.add_argument("--beta", type=float, default=None, help="Dirichlet concentration (default 0.05 for SPEAR)")
    p.add_argument("--data-seed", type=int, default=2024, help="partition + masks seed (default 2024)")
    p.add_argument("--seed", type=int, default=None, help="PACE run seed (default: the first paper seed)")
    p.add_argument("--rank", type=int, default=6, help="PACE carrier rank (0 = dense; default 6)")
    p.add_argument("--variant", default="full", help="PACE variant (default full)")
    p.add_argument("--epochs", type=int, default=100, help="Local training epochs (default 100)")
    p.add_argument("--engine", choices=("ray", "inprocess"), default="ray", help="simulate: engine (default ray)")
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

    scheme = args.partition or ("dirichlet" if args.method == "spear" else "louvain")
    beta = args.beta if args.beta is not None else (0.05 if scheme == "dirichlet" else None)
    return build_federated(resolve_source(args).dataset, scheme=scheme, num_clients=args.clients, seed=args.data_seed,
                           data_root=args.data_root, beta=beta)


def _reference(fg, settings) -> tuple[list[dict], float]:
    """The in-process protocol on the same federation and seed → (pooled rows, seconds)."""
    t0 = time.perf_counter()
    if settings.method == "pace":
        from pace_nb.methods.protocol import run_protocol

        rows = run_protocol(fg, seeds=(settings.seed,), methods=("pace",), train_config=settings.train_config,
                            method_params={"pace": {"variants": (settings.variant,), "ranks": (settings.rank,)}},
                            progress=False)
        pooled = rows[rows.receiver == -1]
        return pooled.to_dict("records"), time.perf_counter() - t0
    from pace_nb.methods.spear.core import run_spear

    r = run_spear(fg, settings.spear_config, settings.spear_variant)
    return [{"acc": 100.0 * r.acc, "alpha": float("nan"), "bytes_up": r.bytes_up, "bytes_down": float("nan"),
             "note": "complete-graph inference (run_spear)"}], time.perf_counter() - t0


def _export(fg, settings, args) -> int:
    from pathlib import Path

    from pace_nb.flower.deploy import write_app
    from pace_nb.flower.partitions import export_partitions

    if not args.workdir:
        raise ConfigError("export needs --workdir DIR")
    root = Path(args.workdir)
    parts = export_partitions(fg, root / "partitions")
    app = write_app(root / "app", settings, (root / "outcome.json").resolve())
    print(f"wrote {fg.num_clients} client partition files to {parts} (give data holder k only client_<k>.npz "
          f"and federation.json) and the Flower app project to {app}")
    return 0


def run(args) -> int:
    from pace_nb.flower.settings import FlowerSettings
    from pace_nb.flower.simulate import require_flwr

    require_flwr()
    if args.json:  # before any work: a bad target must not cost the run
        from pace_nb.core.io import check_output_file

        check_output_file(args.json, "--json")
    if args.action in ("deploy", "export") and args.workdir:
        from pace_nb.flower.deploy import check_workdir

        check_workdir(args.workdir)
    fg = _federation(args)
    kw = {} if args.seed is None else {"seed": args.seed}
    settings = FlowerSettings(method=args.method, num_clients=fg.num_clients, rank=args.rank, variant=args.variant,
                              epochs=args.epochs, timeout=args.timeout, **kw)
    if args.action == "export":
        return _export(fg, settings, args)
    if args.action == "deploy":
        from pace_nb.flower.deploy import deploy

        if args.insecure:
            import sys

            print("pace-nb: warning: --insecure: no TLS and no SuperNode authentication; any process that reaches "
                  "the SuperLink port can join (loopback only)", file=sys.stderr)
        out = deploy(fg, settings, workdir=args.workdir, timeout=args.timeout, keep=args.keep,
                     insecure=args.insecure, probe=args.probe)
    elif args.engine == "ray":
        from pace_nb.flower.simulate import simulate

        out = simulate(fg, settings)
    else:
        import tempfile

        from pace_nb.flower.client import make_client_app
        from pace_nb.flower.inprocess import run_inprocess
        from pace_nb.flower.partitions import export_partitions

        with tempfile.TemporaryDirectory() as tmp:
            out = run_inprocess(make_client_app(str(export_partitions(fg, tmp))), settings)
    if out is None:
        raise ConfigError("the Flower run produced no outcome")
    pooled = out.rows[out.rows.receiver == -1].iloc[0]
    t = out.timings
    print(f"{settings.method.upper()} on Flower ({t['runtime']}): {fg.dataset}, {fg.config.get('scheme')}, "
          f"K={fg.num_clients}, seed {settings.seed}; participants {len(out.wire)}/{fg.num_clients}"
          + (f"; dropped {out.dropped}" if out.dropped else ""))
    print(f"  pooled acc {pooled.acc:.2f}  mean alpha {pooled.alpha:.4f}  bytes up {int(pooled.bytes_up)} "
          f"down {int(pooled.bytes_down)}  (Flower messages: up {int(out.wire.message_up.sum())} "
          f"down {int(out.wire.message_down.sum())})")
    train = out.wire["train_seconds"] if "train_seconds" in out.wire else None
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
        print(f"  in-process: pooled acc {r['acc']:.2f}  mean alpha {r['alpha']:.4f}  bytes up {r['bytes_up']} "
              f"down {r['bytes_down']}  wall {secs:.1f} s" + (f"  [{r['note']}]" if "note" in r else ""))
        doc["reference"] = {"rows": json.loads(json.dumps(ref, default=str)), "seconds": secs}
    if args.json:
        from pace_nb.core.io import atomic_write_json

        atomic_write_json(args.json, json.loads(json.dumps(doc, default=str).replace("NaN", "null")))
    return 0
