"""One-shot baselines and their variants side by side on SPEAR's comparison federations.

For each ``--datasets`` entry (Dirichlet β, K clients, ``--data-seed``) every ``--runs`` entry
``method`` or ``method:{json hyperparameters}`` is run once through SPEAR's comparison runner
(:func:`pace_nb.methods.oneshot.compare.run_comparison`, the run seed's Local GCNs shared) and
printed as one line: accuracy on the complete graph, upload bytes (sum over clients), wall time.

    PACE_NB_DATA=DIR python3 benchmarks/oneshot_variants.py --datasets Cora CiteSeer PubMed \\
        --runs fedsd2c 'fedsd2c:{"mode": "coreset"}' 'fedsd2c:{"steps": 0}'
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from pace_nb.core.config import PAPER_SEEDS
from pace_nb.data.federation import build_federated
from pace_nb.methods.oneshot.compare import run_comparison


def parse_run(text: str) -> tuple[str, dict]:
    """``"fedsd2c"`` → ("fedsd2c", {}); ``'fedsd2c:{"steps": 0}'`` → ("fedsd2c", {"steps": 0})."""
    name, _, params = text.partition(":")
    return name, (json.loads(params) if params else {})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["Cora"])
    ap.add_argument("--runs", nargs="+", default=["fedsd2c"])
    ap.add_argument("--beta", type=float, default=0.05)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--data-seed", type=int, default=2024)
    ap.add_argument("--run-seed", type=int, default=PAPER_SEEDS[0])
    a = ap.parse_args()
    torch.set_num_threads(1)
    print(f"{'dataset':<10} {'run':<40} {'acc %':>7} {'bytes_up':>12} {'seconds':>8}", flush=True)
    for ds in a.datasets:
        fg = build_federated(ds, scheme="dirichlet", num_clients=a.clients, seed=a.data_seed, beta=a.beta)
        for text in a.runs:
            name, params = parse_run(text)
            t0 = time.perf_counter()
            row = run_comparison(fg, [name], run_seed=a.run_seed, method_params={name: params}).iloc[0]
            print(f"{ds:<10} {text:<40} {row.acc:7.2f} {int(row.bytes_up):>12,} {time.perf_counter() - t0:8.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
