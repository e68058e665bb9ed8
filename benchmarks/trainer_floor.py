"""Benchmark: the batched Local trainer's time per epoch beside its memory-traffic floor.

Workload: ``train_models`` on one federation (default Cora, Louvain, K = 10) × the five paper run
seeds = B models, the paper's training config (H = 64, dropout 0.5, Adam, weight decay 5e-4),
one thread. Time per epoch = (t(E₂) − t(E₁)) / (E₂ − E₁), so the layout and optimizer set-up
(built once per call) cancel out; the best of ``--repeat`` runs is kept (the machine is shared).

The floor is the bytes an epoch must move at least, divided by the memory bandwidth measured in
the same run (a STREAM-style triad ``a = b + s·c`` over arrays far larger than the caches, on
one thread, best of 5; it moves 3 × 4 bytes per element). Bytes per epoch, float32:

* parameters, |θ| = B · (F·H + H + C·H + C) values: the forward reads the layer-1 weight rows of
  the features present in each client (``rows_present · H``) and all of layer 2; the backward
  writes the gradient (|θ|); Adam reads θ, ∇θ, m, v and writes θ, m, v (7 |θ|);
* activations, N = Σ_b n_b rows: the forward writes X W₁, the pre-activation, the ReLU, the
  dropout mask and its product (5 · N · H) and the logits twice (2 · N · C); the backward reads
  and writes about as much again (×2);
* the constant sparse operands: X and Xᵀ (index + value, 12 bytes per non-zero) read once each
  in the forward and the backward, P and Pᵀ likewise (two propagations per pass).

Everything else (the dropout draws, small per-model products, kernel launches) is above the
floor by definition, so ``measured / floor`` is the distance the issue asks for.

    PACE_NB_DATA=... python3 benchmarks/trainer_floor.py [--dataset Cora] [--clients 10] [--repeat 3]
"""
from __future__ import annotations

import argparse
import time


def triad_bandwidth(n: int = 1 << 25, reps: int = 5) -> float:
    """Bytes per second of ``a = b + s·c`` on ``n`` float32 elements (12 bytes moved per element)."""
    import torch

    b, c, a = torch.rand(n), torch.rand(n), torch.empty(n)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.add(b, c, alpha=3.0, out=a)
        best = min(best, time.perf_counter() - t0)
    return 12 * n / best


def floor_bytes(fg, num_seeds: int, hidden: int = 64) -> dict[str, float]:
    """The per-epoch byte counts of the module docstring, by term."""
    k, f, c = fg.num_clients, fg.num_features, fg.num_classes
    b = k * num_seeds
    theta = b * (f * hidden + hidden + c * hidden + c)
    present = num_seeds * sum(int(((cl.x != 0).sum(0) > 0).sum()) for cl in fg.clients)
    rows = num_seeds * sum(cl.num_nodes for cl in fg.clients)
    nnz_x = num_seeds * sum(int((cl.x != 0).sum()) for cl in fg.clients)
    nnz_p = num_seeds * sum(int(cl.edge_index.shape[1]) + cl.num_nodes for cl in fg.clients)
    out = {
        "params": 4 * (present * hidden + b * (c * hidden + c + hidden) + theta + 7 * theta),
        "activations": 2 * 4 * rows * (5 * hidden + 2 * c),
        "sparse operands": 2 * 12 * (2 * nnz_x + 2 * 2 * nnz_p),
    }
    out["total"] = sum(out.values())
    return out


def epoch_ms(fg, seeds, repeat: int, e1: int = 10, e2: int = 60) -> float:
    """Best-of-``repeat`` milliseconds per epoch of the batched trainer (set-up cancelled out)."""
    from pace_nb.core.config import model_seed
    from pace_nb.nn.gcn import init_params, stack_params
    from pace_nb.nn.training import TrainConfig, train_models

    k = fg.num_clients
    init = stack_params([init_params(fg.num_features, fg.num_classes, 64, s) for s in seeds for _ in range(k)])
    mseeds = [model_seed(s, i) for s in seeds for i in range(k)]
    client_of = [i for _ in seeds for i in range(k)]

    def run(epochs: int) -> float:
        t0 = time.perf_counter()
        train_models(fg.clients, init, mseeds, client_of, TrainConfig(epochs=epochs), device="cpu", progress=False)
        return time.perf_counter() - t0

    run(2)  # warm-up
    best = float("inf")
    for _ in range(repeat):
        best = min(best, (run(e2) - run(e1)) / (e2 - e1))
    return 1000 * best


def main(argv=None) -> int:
    import torch

    from pace_nb.core.config import PAPER_SEEDS
    from pace_nb.data.federation import build_federated

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="Cora")
    ap.add_argument("--partition", default="louvain")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    fg = build_federated(args.dataset, scheme=args.partition, num_clients=args.clients, seed=2024)
    seeds = tuple(PAPER_SEEDS)
    bw = triad_bandwidth()
    fb = floor_bytes(fg, len(seeds))
    ms = epoch_ms(fg, seeds, args.repeat)
    floor_ms = 1000 * fb["total"] / bw
    print(f"{args.dataset} {args.partition} K={args.clients} × {len(seeds)} seeds = {args.clients * len(seeds)} models, "
          f"1 thread")
    print(f"  bandwidth (triad, measured now): {bw / 1e9:.1f} GB/s")
    for key, v in fb.items():
        print(f"  floor bytes, {key:<16} {v / 2**20:8.1f} MiB  → {1000 * v / bw:6.2f} ms")
    print(f"  measured: {ms:.2f} ms per epoch; floor {floor_ms:.2f} ms; measured / floor = {ms / floor_ms:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
