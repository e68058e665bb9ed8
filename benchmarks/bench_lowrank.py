"""Benchmark: PACE's rank-r factors (``pace_nb.methods.pace.lowrank.truncated_svd``) against a full SVD.

    python3 benchmarks/bench_lowrank.py [--rank 6] [--repeat 5]

Workload: one seed's K = 10 weight updates of PACE's first layer, ``[10, 64, F]`` for the feature
widths of Cora, CiteSeer, PubMed, Computers and CS (a low-rank signal plus noise, float32), one thread.
*full SVD* is ``torch.linalg.svd`` in float64 truncated to r (what ``truncated_svd`` computed before);
*now* is ``truncated_svd`` (the Gram matrix of the shorter side, ``eigh`` in float64). Prints, per width,
the best time of ``--repeat`` of each, their ratio, and the largest difference of the two rank-r
products relative to the largest entry (float64 and after the float32 cast of the factors).
"""
from __future__ import annotations

import argparse
import time

import torch

from pace_nb.methods.pace.lowrank import truncated_svd

WIDTHS = {"Cora": 1433, "CiteSeer": 3703, "PubMed": 500, "Computers": 767, "CS": 6805}


def full_svd(mat: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The rank-r factors of a full float64 SVD, cast back (the former ``truncated_svd``)."""
    u, s, vh = torch.linalg.svd(mat.double(), full_matrices=False)
    left = u[..., :rank] * s[..., None, :rank]
    return left.to(mat.dtype).contiguous(), vh[..., :rank, :].transpose(-1, -2).to(mat.dtype).contiguous()


def best(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rank", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    print(f"[10, 64, F] float32, rank {args.rank}, one thread; best of {args.repeat}")
    print("| dataset | F | full SVD ms | now ms | full / now | max rel. diff (float64 product) | max rel. diff (float32 factors) |")
    print("|---|---|---|---|---|---|---|")
    for name, f in WIDTHS.items():
        a = (torch.randn(10, 64, 8, generator=g) @ torch.randn(10, 8, f, generator=g)
             + 0.05 * torch.randn(10, 64, f, generator=g))
        t_old = best(lambda a=a: full_svd(a, args.rank), args.repeat)
        t_new = best(lambda a=a: truncated_svd(a, args.rank), args.repeat)
        old, new = full_svd(a, args.rank), truncated_svd(a, args.rank)
        p_old, p_new = old[0] @ old[1].mT, new[0] @ new[1].mT
        u, s, vh = torch.linalg.svd(a.double(), full_matrices=False)
        exact = (u[..., :args.rank] * s[..., None, :args.rank]) @ vh[..., :args.rank, :]
        a64 = a.double()
        g_new = truncated_svd(a64, args.rank)
        d64 = float((g_new[0] @ g_new[1].mT - exact).abs().max() / exact.abs().max())
        d32 = float((p_new - p_old).abs().max() / p_old.abs().max())
        print(f"| {name} | {f} | {t_old * 1e3:.1f} | {t_new * 1e3:.1f} | {t_old / t_new:.2f}× | {d64:.1e} | {d32:.1e} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
