"""Benchmark: layer 1's dense and sparse feature products, side by side, and where they cross.

    PACE_NB_DATA=DIR python3 benchmarks/bench_sparse_threshold.py [--datasets Computers,PubMed]
        [--partition louvain] [--clients 10] [--repeat 2]

Workload: ``train_local`` (100 epochs, the paper's config) of one federation (data seed 2024) × the
five paper run seeds, one thread, with :data:`pace_nb.nn.gcn.SPARSE_DENSITY` forced so that layer 1
takes the dense per-model product (``torch.mm`` on each client's dense features) or the sparse one
(one ``embedding_bag`` over the block-diagonal CSR features). The two alternate ``--repeat`` times in
one process; the best CPU time (``time.process_time``) of each is kept.

The sparse product's work is proportional to the non-zeros and the dense one's is not, so a dataset of
feature density ``d`` whose sparse/dense time ratio is ``r`` puts the crossover near ``d / r``: the
threshold :data:`~pace_nb.nn.gcn.SPARSE_DENSITY` should sit at or below the smallest such estimate.
"""
from __future__ import annotations

import argparse
import time


def main(argv=None) -> int:
    import torch

    import pace_nb.nn.gcn as gcn
    from pace_nb.core.config import PAPER_SEEDS
    from pace_nb.methods.protocol import federation
    from pace_nb.nn.training import TrainConfig, clear_shared_layouts, train_local

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="Computers,PubMed")
    ap.add_argument("--partition", default="louvain")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    kept = gcn.SPARSE_DENSITY
    print(f"train_local, {args.partition} K = {args.clients}, 5 seeds, 100 epochs, 1 thread, CPU seconds (best of "
          f"{args.repeat}); threshold now {kept}")
    print(f"{'dataset':10s} {'density':>8s} {'dense s':>8s} {'sparse s':>9s} {'sparse/dense':>13s} {'crossover ≈':>12s}")
    try:
        for name in args.datasets.split(","):
            beta = {"beta": 0.5} if args.partition == "dirichlet" else {}
            fg = federation(name, partition=args.partition, num_clients=args.clients, **beta)
            x = fg.data.x
            density = float(torch.count_nonzero(x)) / x.numel()
            best = {"dense": float("inf"), "sparse": float("inf")}
            for _ in range(args.repeat):
                for path, thr in (("dense", 0.0), ("sparse", 1.1)):
                    gcn.SPARSE_DENSITY = thr
                    clear_shared_layouts()  # each path builds its own layout, as a fresh process would
                    t0 = time.process_time()
                    train_local(fg, PAPER_SEEDS, TrainConfig(), device="cpu", progress=False)
                    best[path] = min(best[path], time.process_time() - t0)
            r = best["sparse"] / best["dense"]
            print(f"{name:10s} {density:8.3f} {best['dense']:8.2f} {best['sparse']:9.2f} {r:13.2f} {density / r:12.2f}")
    finally:
        gcn.SPARSE_DENSITY = kept
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
