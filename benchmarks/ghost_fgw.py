"""GHOST's client phase with its FGW solved in float64 and in float32 (the released precision).

One client of a SPEAR comparison federation (Dirichlet β, K clients, ``--data-seed``) runs
GHOST's ``client_message`` — ``--steps`` generator steps, each with an exact FGW solve over the
client's training nodes — once per precision, in one run, and prints the CPU seconds of each,
the seconds inside the FGW solver, their ratios and the generators' largest weight difference.
``--client -1`` (default) picks the client with the most training nodes (FGW is cubic in them).

    PACE_NB_DATA=DIR python3 benchmarks/ghost_fgw.py --dataset PubMed --steps 100
"""
from __future__ import annotations

import argparse
import time

import torch

from pace_nb.core.config import PAPER_SEEDS
from pace_nb.data.federation import build_federated
from pace_nb.methods.oneshot import ghost
from pace_nb.methods.oneshot.base import OneShotContext
from pace_nb.methods.phases import PublicView
from pace_nb.nn.training import TrainConfig


def timed_client(fg, k: int, dtype: str, steps: int, seed: int) -> tuple[float, float, dict]:
    """(CPU seconds of the client phase, CPU seconds inside ``fgw_loss``, the upload)."""
    method = ghost.Ghost(fgw_dtype=dtype, gen_steps=steps)
    ctx = OneShotContext(PublicView.of(fg), seed, TrainConfig(), torch.device("cpu"))
    inner, spent = ghost.fgw_loss, [0.0]

    def counted(*args, **kwargs):
        t = time.process_time()
        out = inner(*args, **kwargs)
        spent[0] += time.process_time() - t
        return out

    ghost.fgw_loss = counted
    try:
        t0 = time.process_time()
        message = method.client_message(ctx, k, fg.clients[k])
        return time.process_time() - t0, spent[0], message
    finally:
        ghost.fgw_loss = inner


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="PubMed")
    ap.add_argument("--beta", type=float, default=0.05)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--data-seed", type=int, default=2024)
    ap.add_argument("--client", type=int, default=-1)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--dtypes", nargs="+", default=["float64", "float32"], choices=["float64", "float32"],
                    help="precisions to time, one after the other (one each in two processes started together "
                         "uses both cores)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    fg = build_federated(a.dataset, scheme="dirichlet", num_clients=a.clients, seed=a.data_seed, beta=a.beta)
    k = a.client if a.client >= 0 else max(range(fg.num_clients), key=lambda i: int(fg.clients[i].train_mask.sum()))
    n = int(fg.clients[k].train_mask.sum())
    print(f"{a.dataset} β={a.beta} K={a.clients} data seed {a.data_seed}: client {k}, {n} training nodes, "
          f"{a.steps} generator steps", flush=True)
    res = {}
    for dtype in a.dtypes:
        total, fgw, msg = timed_client(fg, k, dtype, a.steps, PAPER_SEEDS[0])
        res[dtype] = (total, fgw, msg)
        print(f"  {dtype}: {total:8.1f} CPU s in all, {fgw:8.1f} in FGW ({fgw / a.steps:.2f} s per call)", flush=True)
    if len(res) < 2:
        return
    (t64, f64, m64), (t32, f32, m32) = res["float64"], res["float32"]
    diff = max(float((m64[name] - m32[name]).abs().max()) for name in m64 if m64[name].is_floating_point())
    print(f"  float64 / float32: {t64 / t32:.2f}x in all, {f64 / f32:.2f}x on the FGW share; "
          f"largest generator weight difference {diff:.3g}")


if __name__ == "__main__":
    main()
