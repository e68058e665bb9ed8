"""The trainer changes still on the table, each measured beside what the trainer does now, in one run.

Every alternative below keeps the numbers bitwise (each section checks it), so the question is only
whether it is faster. One thread, CPU time (``time.process_time``), best of ``--repeat``:

1. **Layer-1 products with the run seeds side by side.** The five seeds' models of one client share
   its features, so ``X [W_1 | … | W_5]`` (rows S·H wide) could replace five products with H-wide rows.
2. **Adam on rows that stay in cache.** A client's layer-1 rows of features it never holds see only
   weight decay; advancing them apart from the rest only pays if ``torch._fused_adam_`` is much
   cheaper per element on cache-resident rows than on the streamed whole.
3. **FedProx's proximal gradient in cache-sized blocks**: ``d = μ (θ − a); ∇ += d`` block by block
   instead of three passes over the whole layer-1 tensor.
4. **CNLL's R′(α) with its α-free parts hoisted** (the observed term, buffers reused; the bisection's
   66 calls now go through :func:`~pace_nb.methods.calibration.derivative_at`).
5. ``--chunks``: **smaller model chunks** (``max_batch``) for a working set nearer the cache, for Local
   and the retraining controls (slow: every method trains twice per repeat).

    PACE_NB_DATA=DIR python3 benchmarks/speed_limits.py [--dataset CS] [--clients 10] [--repeat 3] [--chunks]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch


def best(fn, repeat: int) -> float:
    """Least CPU seconds of ``repeat`` calls of ``fn``."""
    out = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        out = min(out, time.process_time() - t)
    return out


def seed_stacked_products(fg, seeds: int, repeat: int) -> list[tuple[str, float, float, bool]]:
    """(product, ms per seed-by-seed product, ms stacked, bitwise) for X·W, Xᵀ·G and P·G."""
    from pace_nb.nn.gcn import csr_mm, propagation_matrix
    from pace_nb.nn.ragged import ragged_graphs

    g = ragged_graphs([c.x for c in fg.clients], [propagation_matrix(c.edge_index, c.num_nodes) for c in fg.clients])
    gen = torch.Generator().manual_seed(0)
    k, f, n, h = len(fg.clients), g.num_features, g.num_rows, 64
    rows = []
    for name, a, width in (("X·W", g.x, k * f), ("Xᵀ·G", g.xt, n), ("P·G", g.P, n)):
        unit = g.unit_x and a is not g.P
        parts = [torch.randn(width, h, generator=gen) for _ in range(seeds)]
        wide = torch.stack(parts, 1).reshape(width, seeds * h).contiguous()
        apart = best(lambda a=a, unit=unit, parts=parts: [csr_mm(a, p, unit) for p in parts], repeat)
        together = best(lambda a=a, unit=unit, wide=wide: csr_mm(a, wide, unit), repeat)
        out = csr_mm(a, wide, unit).view(-1, seeds, h)
        same = all(torch.equal(csr_mm(a, p, unit), out[:, s]) for s, p in enumerate(parts))
        rows.append((name, 1e3 * apart, 1e3 * together, same))
    return rows


def adam_ns_per_element(numel: int, steps: int = 100) -> float:
    """ns per element of ``steps`` fused Adam steps (the trainer's hyperparameters) on one tensor."""
    gen = torch.Generator().manual_seed(0)
    p = torch.randn(numel, generator=gen) * 0.03
    g, m, v, t = torch.zeros(numel), torch.zeros(numel), torch.zeros(numel), torch.zeros(())
    start = time.process_time()
    for _ in range(steps):
        t += 1
        torch._fused_adam_([p], [g], [m], [v], [], [t], lr=0.01, beta1=0.9, beta2=0.999, weight_decay=5e-4,
                           eps=1e-8, amsgrad=False, maximize=False)
    return 1e9 * (time.process_time() - start) / (steps * numel)


def proximal(numel: int, repeat: int, block: int = 1 << 16) -> tuple[float, float, bool]:
    """(ms of three whole passes, ms block by block, bitwise) for ``∇ += μ (θ − a)``."""
    from pace_nb.core.memory import retained_heap

    gen = torch.Generator().manual_seed(0)
    p, a, g0 = (torch.randn(numel, generator=gen) for _ in range(3))
    mu, g1, g2, buf = 0.01, g0.clone(), g0.clone(), torch.empty(block)

    def whole(grad):
        grad.add_(torch.sub(p, a).mul_(mu))

    def blocked(grad):
        for pp, aa, gg in zip(p.split(block), a.split(block), grad.split(block), strict=True):
            b = buf[:pp.numel()]
            gg.add_(torch.sub(pp, aa, out=b).mul_(mu))

    with retained_heap():  # as in the trainer: the temporaries are not page-faulted in again every call
        whole(g1)
        blocked(g2)
        return 1e3 * best(lambda: whole(g0), repeat), 1e3 * best(lambda: blocked(g0), repeat), torch.equal(g1, g2)


def cnll_derivative(n: int, c: int, calls: int = 2000) -> tuple[float, float, bool]:
    """(µs per R′ call from scratch, µs per call of :func:`~pace_nb.methods.calibration.derivative_at`'s
    function — the bisection's 66 calls — and whether they agree bitwise over 33 α) on ``n`` nodes × ``c`` classes."""
    from pace_nb.methods.calibration import derivative_at, risk_derivative

    rng = np.random.default_rng(0)
    zl, d, y = rng.normal(size=(n, c)), rng.normal(size=(n, c)), rng.integers(0, c, n)
    at = derivative_at(zl, d, y)
    scratch = best(lambda: [risk_derivative(0.3, zl, d, y) for _ in range(calls)], 2)
    hoisted = best(lambda: [at(0.3) for _ in range(calls)], 2)
    same = all(_scratch_derivative(a, zl, d, y) == at(a) for a in np.linspace(0, 1, 33))
    return 1e6 * scratch / calls, 1e6 * hoisted / calls, same


def _scratch_derivative(alpha: float, zl: np.ndarray, d: np.ndarray, y: np.ndarray) -> float:
    """Eq. 15 as written, every part formed anew: the reference the hoisted function must equal."""
    z = zl + alpha * d
    z = z - z.max(axis=-1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=-1, keepdims=True)
    return float(((p * d).sum(axis=-1) - np.take_along_axis(d, y[:, None], axis=-1)[:, 0]).mean())


def chunk_sizes(fg, methods: list[str], sizes: list[int], repeat: int) -> list[tuple[str, int, float, bool]]:
    """(method, max_batch, CPU s, params bitwise those of the first size) for one-round training."""
    from pace_nb.methods.baselines.base import train_federated

    rows, ref = [], {}
    for m in methods:
        for size in sizes:
            got: dict = {}

            def run(m=m, size=size, got=got):
                got["p"] = train_federated(fg, m, progress=False, device="cpu", max_batch=size).trained

            secs = best(run, repeat)
            ref.setdefault(m, got["p"])
            rows.append((m, size, secs, all(torch.equal(ref[m][k], got["p"][k]) for k in ref[m])))
    return rows


def main(argv=None) -> int:
    from pace_nb.core.config import PAPER_SEEDS
    from pace_nb.methods.protocol import federation

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="CS")
    ap.add_argument("--partition", default="louvain")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--chunks", action="store_true", help="also time smaller model chunks (minutes)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    fg = federation(args.dataset, partition=args.partition, num_clients=args.clients)
    seeds = len(PAPER_SEEDS)
    print(f"{args.dataset} {args.partition} K = {args.clients}, {seeds} seeds, 1 thread, CPU time, best of {args.repeat}\n")

    print("1. layer-1 products, seed by seed vs the seeds side by side (ms per epoch's product)")
    print("| product | seed by seed | side by side | ratio | bitwise |\n|---|---|---|---|---|")
    for name, apart, together, same in seed_stacked_products(fg, seeds, args.repeat):
        print(f"| {name} | {apart:.1f} | {together:.1f} | {together / apart:.2f}× | {same} |")

    theta = seeds * args.clients * fg.num_features * 64
    hot, streamed = adam_ns_per_element(1 << 18), adam_ns_per_element(theta)
    print(f"\n2. fused Adam: {hot:.2f} ns per element on 2^18 cache-resident elements, {streamed:.2f} ns streamed over "
          f"the {theta / 1e6:.1f} M layer-1 weights of {seeds * args.clients} models: advancing a row apart saves at "
          f"most {100 * (1 - hot / streamed):.0f} % of its Adam time")

    whole, blocked, same = proximal(theta, args.repeat)
    print(f"\n3. proximal gradient over {theta / 1e6:.1f} M weights: {whole:.1f} ms in three passes, {blocked:.1f} ms in "
          f"cache-sized blocks ({whole / blocked:.2f}×, bitwise {same})")

    print("\n4. CNLL's R′(α) per call: formed from scratch vs α-free parts hoisted")
    print("| nodes × classes | scratch µs | hoisted µs | ratio | bitwise |\n|---|---|---|---|---|")
    for n, c in ((100, 7), (600, 10), (3000, 15)):
        now, new, same = cnll_derivative(n, c)
        print(f"| {n} × {c} | {now:.1f} | {new:.1f} | {now / new:.2f}× | {same} |")

    if args.chunks:
        sizes = [seeds * args.clients, args.clients]
        print(f"\n5. one-round training with chunks of {sizes[0]} (all models) and {sizes[1]} models (CPU s)")
        print("| method | max_batch | s | bitwise |\n|---|---|---|---|")
        for m, size, secs, same in chunk_sizes(fg, ["fedavg", "fedprox", "fedpub", "fedrcl", "fedaux1r"], sizes,
                                               args.repeat):
            print(f"| {m} | {size} | {secs:.2f} | {same} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
