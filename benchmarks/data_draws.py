"""How much one data draw moves the methods: the Dirichlet partition (PACE Table 12, β = 0.5) or,
for Louvain and METIS (whose partitions are deterministic), the clients' 20/40/40 masks.

OpenFGL draws both with NumPy's global state and never seeds it (its ``seed_everything`` is never
called), so the paper's caches are one unseeded draw each (``benchmarks/openfgl_splits.py``
checks a shipped split cache); ours is data seed 2024. This runs ``--methods`` (default Local +
PACE, rank 6) on ``--draws`` data seeds and prints, per draw, pooled test accuracy (mean over
``--seeds`` of the paper's run seeds), the mean share of each client's majority class, and the
share of edges kept inside clients — then the spread over draws beside the paper's value, so a
gap can be read against the draw-to-draw spread.

    PACE_NB_DATA=... python3 benchmarks/data_draws.py [--scheme dirichlet|louvain|metis]
        [--datasets Cora CiteSeer] [--clients 10] [--draws 10] [--seeds 2] [--beta 0.5]
        [--methods local,pace] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


#: The PACE table of each scheme and K (the paper's Louvain Tables 1/8/9, METIS 11, Dirichlet 12).
TABLE_OF = {"louvain": {10: "1", 20: "8", 30: "9"}, "metis": {10: "11"}, "dirichlet": {10: "12"}}


def draw_facts(fg) -> dict:
    """Mean majority-class share of the clients and the share of edges kept inside clients."""
    import torch

    shares = [float(torch.bincount(c.y.long()).max()) / len(c.y) for c in fg.clients]
    kept = sum(int(c.edge_index.shape[1]) for c in fg.clients) / max(int(fg.data.edge_index.shape[1]), 1)
    return {"majority_share": sum(shares) / len(shares), "edges_kept": kept}


def main(argv=None) -> int:
    import pandas as pd
    import torch

    from pace_nb.analysis.paper_values import paper_values
    from pace_nb.core.schema import method_label
    from pace_nb.core.config import PAPER_SEEDS
    from pace_nb.data.federation import build_federated
    from pace_nb.methods.protocol import run_protocol

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=["Cora", "CiteSeer"])
    ap.add_argument("--draws", type=int, default=10, help="data seeds 2024, 2025, …")
    ap.add_argument("--seeds", type=int, default=2, help="how many of the paper's run seeds")
    ap.add_argument("--scheme", default="dirichlet", choices=sorted(TABLE_OF))
    ap.add_argument("--beta", type=float, default=0.5, help="Dirichlet concentration (dirichlet only)")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--methods", default="local,pace", help="comma-separated protocol methods")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    table = TABLE_OF[args.scheme].get(args.clients)
    paper = paper_values("pace", table=table) if table else paper_values("pace").iloc[0:0]
    beta = args.beta if args.scheme == "dirichlet" else None
    recs = []
    for d in args.datasets:
        for ds in range(2024, 2024 + args.draws):
            fg = build_federated(d, scheme=args.scheme, num_clients=args.clients, seed=ds, beta=beta)
            rows = run_protocol(fg, seeds=PAPER_SEEDS[: args.seeds], methods=methods, progress=False)
            pooled = rows[(rows.receiver == -1) & (rows.variant.isin(["native", "full"]))]
            acc = pooled.groupby("method").acc.mean()
            recs.append({"dataset": d, "data_seed": ds, **{m: acc[m] for m in methods}, **draw_facts(fg)})
            print(f"{d} data seed {ds}: " + "  ".join(f"{method_label(m)} {acc[m]:.2f}" for m in methods) +
                  f"  majority share {recs[-1]['majority_share']:.3f}  edges kept {recs[-1]['edges_kept']:.3f}", flush=True)
    frame = pd.DataFrame(recs)
    print()
    for d, g in frame.groupby("dataset", sort=False):
        for m in methods:
            label = method_label(m)
            pv = paper[(paper.dataset == d) & (paper.method == m) & (paper.variant.isin(["native", "full"]))
                       & (paper.metric == "acc")]
            ref = float(pv.value.iloc[0]) if len(pv) else float("nan")
            print(f"{d:9s} {label:12s} draws: mean {g[m].mean():.2f}  std {g[m].std():.2f}  min {g[m].min():.2f}  "
                  f"max {g[m].max():.2f}   paper {ref:.2f}   seed 2024 {g[m].iloc[0]:.2f}")
        if "local" in g and args.scheme == "dirichlet":
            print(f"{d:9s} corr(Local, majority share) over draws: {g['local'].corr(g['majority_share']):+.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(recs, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
