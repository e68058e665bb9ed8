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

The floor's arithmetic on the default workload (Cora, F = 1433, C = 7, H = 64, B = 50):
|θ| = 50 · (1433·64 + 64 + 7·64 + 7) = 4.61 M values, so the parameter term is
4 bytes · (present·64 + B·(7·64 + 7 + 64) + 8 |θ|) ≈ 152 MiB — Adam's 7 passes over θ and the gradient
write dominate; the activations (N = 13,540 rows) add 2 · 4 · N · (5·64 + 2·7) ≈ 34 MiB and the sparse
operands (246,080 feature non-zeros, 57,260 propagation entries per direction) ≈ 16 MiB: about
203 MiB per epoch, i.e. ≈ 20 ms at 10 GB/s.

The trainer before a change runs in the same process: ``--before REV`` unpacks ``pace_nb/nn`` of that
git revision (``git archive``) as a frozen copy and times its ``train_models`` on the same workload,
so the old and new trainer and the floor come from one run on one machine state. Times are CPU
seconds of this process (``time.process_time``; best of ``--repeat``): on a shared machine the wall
clock would count the neighbours.

    PACE_NB_DATA=... python3 benchmarks/trainer_floor.py [--dataset Cora] [--clients 10] [--repeat 3] [--before 39676ed]
        [--uniform]
"""
from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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


def frozen_training(rev: str, into: str):
    """``pace_nb/nn`` of git revision ``rev`` imported as the package ``nn_<rev>`` (its imports of
    ``pace_nb.nn.*`` rewritten to itself; everything else is this checkout's ``pace_nb``)."""
    name = "nn_" + "".join(ch for ch in rev if ch.isalnum())
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "pace_nb/nn"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    src, dst = Path(into) / "pace_nb" / "nn", Path(into) / name
    dst.mkdir()
    for f in src.glob("*.py"):
        (dst / f.name).write_text(f.read_text().replace("pace_nb.nn.", f"{name}.").replace("pace_nb.nn ", f"{name} "))
    sys.path.insert(0, into)
    return importlib.import_module(f"{name}.training")


def epoch_ms(fg, seeds, repeat: int, training=None, e1: int = 10, e2: int = 60, **train_kw) -> float:
    """Best-of-``repeat`` CPU milliseconds per epoch of ``training.train_models`` (default: this
    checkout's trainer; set-up cancelled out)."""
    from pace_nb.core.config import model_seed
    from pace_nb.nn.gcn import init_params, stack_params

    if training is None:
        from pace_nb.nn import training
    k = fg.num_clients
    init = stack_params([init_params(fg.num_features, fg.num_classes, 64, s) for s in seeds for _ in range(k)])
    mseeds = [model_seed(s, i) for s in seeds for i in range(k)]
    client_of = [i for _ in seeds for i in range(k)]

    def run(epochs: int) -> float:
        t0 = time.process_time()
        training.train_models(fg.clients, init, mseeds, client_of, training.TrainConfig(epochs=epochs), device="cpu",
                              progress=False, **train_kw)
        return time.process_time() - t0

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
    ap.add_argument("--before", default="39676ed", help="git revision of the old trainer ('' to skip; default %(default)s)")
    ap.add_argument("--uniform", action="store_true",
                    help="also time the current trainer with dropout_draw='uniform' (a uniform per mask entry; "
                         "the default draws the p = 1/2 masks from random bits)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    fg = build_federated(args.dataset, scheme=args.partition, num_clients=args.clients, seed=2024)
    seeds = tuple(PAPER_SEEDS)
    from pace_nb.experiments.provenance import triad_bandwidth

    bw = triad_bandwidth()  # the same triad the grid records in every cell's provenance
    fb = floor_bytes(fg, len(seeds))
    with tempfile.TemporaryDirectory() as tmp:
        old = frozen_training(args.before, tmp) if args.before else None
        times = {}
        for _ in range(2):  # alternate old and new twice, keep each one's best
            runs = [("before " + args.before, old, {}), ("now", None, {})]
            runs += [("now, uniform dropout", None, {"dropout_draw": "uniform"})] if args.uniform else []
            for label, mod, kw in runs:
                if label.startswith("before") and mod is None:
                    continue
                ms = epoch_ms(fg, seeds, args.repeat, mod, **kw)
                times[label] = min(times.get(label, ms), ms)
    floor_ms = 1000 * fb["total"] / bw
    print(f"{args.dataset} {args.partition} K={args.clients} × {len(seeds)} seeds = {args.clients * len(seeds)} models, "
          f"1 thread, CPU time")
    print(f"  bandwidth (triad, measured now): {bw / 1e9:.1f} GB/s")
    for key, v in fb.items():
        print(f"  floor bytes, {key:<16} {v / 2**20:8.1f} MiB  → {1000 * v / bw:6.2f} ms")
    for label, ms in times.items():
        print(f"  trainer {label:<16} {ms:7.2f} ms per epoch; floor {floor_ms:.2f} ms; measured / floor = {ms / floor_ms:.2f}")
    if args.before and "now" in times:
        t_b = times["before " + args.before]
        for label in [k for k in times if k.startswith("now")]:
            print(f"  before {args.before} / {label} = {t_b / times[label]:.2f}×")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
