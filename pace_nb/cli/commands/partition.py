"""``pace-nb partition``: split a dataset among K clients (Louvain / METIS / Dirichlet)."""
from __future__ import annotations

import argparse

from pace_nb.core.config import DATA_SEED
from pace_nb.cli.commands._graph import add_graph_argument, resolve_source


def register(sub) -> None:
    p = sub.add_parser("partition", help="split a dataset among K clients; --json writes node ids and masks",
                       description=__doc__)
    p.add_argument("--dataset", default="demo", help="dataset name (see `pace-nb datasets`; default demo)")
    p.add_argument("--scheme", default="louvain",
                   help="partition scheme: louvain | metis | dirichlet | given (the --graph file's clients; default louvain)")
    p.add_argument("--clients", type=int, default=10, help="number of clients K (default 10)")
    p.add_argument("--beta", type=float, default=None, help="Dirichlet concentration (dirichlet scheme only)")
    p.add_argument("--seed", type=int, default=DATA_SEED, help=f"data seed for partition and masks (default {DATA_SEED})")
    p.add_argument("--resolution", type=float, default=1.0, help="Louvain resolution (default 1.0)")
    p.add_argument("--delta", type=int, default=20, help="Louvain size slack delta (default 20)")
    p.add_argument("--data-root", default=None, help="raw-data root (default: $PACE_NB_DATA, else ./data)")
    p.add_argument("--no-cache", action="store_true", help="rebuild instead of using the partition cache")
    p.add_argument("--json", metavar="FILE", default=None,
                   help='write {"clients": [[global ids]], "masks": {...}, "config": {...}}')
    add_graph_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pace_nb.core.io import atomic_write_json, check_output_file
    from pace_nb.data.federation import build_federated

    if args.json:
        check_output_file(args.json, "--json")
    fg = build_federated(resolve_source(args).dataset, args.scheme, args.clients, args.seed, data_root=args.data_root,
                         cache=not args.no_cache, resolution=args.resolution, delta=args.delta, beta=args.beta)
    cfg = fg.config
    extra = f"beta={cfg['beta']}" if cfg["scheme"] == "dirichlet" else \
        f"resolution={cfg['resolution']:g} delta={cfg['delta']}" if cfg["scheme"] == "louvain" else ""
    print(f"{fg.dataset}: {int(fg.data.num_nodes)} nodes, {fg.num_classes} classes -> {fg.num_clients} clients "
          f"({cfg['scheme']} {extra}, seed {cfg['seed']}, split {'/'.join(f'{r:g}' for r in cfg['ratios'])})")
    table = fg.summary()
    print(table.to_string(index=False))
    kept = int(table["edges"].sum())
    total = int(fg.data.edge_index.shape[1]) // 2
    print(f"edges kept inside clients: {kept}/{total} ({100 * kept / max(total, 1):.1f} %); "
          f"labels = per-class node counts")
    if args.json:
        atomic_write_json(args.json, fg.to_json_dict(), indent=None)
        print(f"wrote {args.json}")
    return 0
