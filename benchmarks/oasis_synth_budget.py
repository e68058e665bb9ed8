"""OASIS synthesizer budget from its training objective alone (no test labels).

On the Dirichlet federation (β, K, data seed) of ``dataset`` every client with training nodes
trains its synthesizer for ``--steps`` steps at each ``--lrs`` rate
(:meth:`pace_nb.methods.oneshot.oasis.Oasis.train_synthesizer`, teachers = the run seed's Local
GCNs); the table gives the objective (mean of the 20 steps ending there,
:func:`~pace_nb.methods.oneshot.oasis.window_mean`) at each ``--budgets`` value and the gap to the
last step, and :func:`~pace_nb.methods.oneshot.oasis.settled_budget` per rate.

    PACE_NB_DATA=DIR python3 benchmarks/oasis_synth_budget.py [--dataset Cora] [--steps 1000]
        [--lrs 1e-3 3e-3] [--budgets 200 300 500 1000] [--tol 0.05] [--run-seed 104729]
"""
from __future__ import annotations

import argparse

import torch

from pace_nb.methods.oneshot import base, oasis
from pace_nb.methods.spear.analysis import federation
from pace_nb.nn.training import train_local


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="Cora")
    ap.add_argument("--beta", type=float, default=0.05)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--data-seed", type=int, default=2024)
    ap.add_argument("--run-seed", type=int, default=104729)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 3e-3])
    ap.add_argument("--budgets", type=int, nargs="+", default=[200, 300, 500, 1000])
    ap.add_argument("--tol", type=float, default=0.05)
    a = ap.parse_args()
    torch.set_num_threads(1)
    fg = federation(a.dataset, beta=a.beta, num_clients=a.clients, seed=a.data_seed)
    local = train_local(fg, (a.run_seed,), progress=False)
    ctx = base.OneShotContext(fg, a.run_seed, local.config, torch.device("cpu"),
                              [local.model(0, k) for k in range(fg.num_clients)])
    budgets = [b for b in a.budgets if b <= a.steps]
    for lr in a.lrs:
        method = oasis.Oasis(synth_steps=a.steps, synth_lr=lr)
        traces = {k: method.train_synthesizer(ctx, k, c)[3] for k, c in enumerate(fg.clients) if bool(c.train_mask.any())}
        print(f"lr {lr:g}: settled budget (tol {a.tol:g}) = {oasis.settled_budget(list(traces.values()), budgets, a.tol)}")
        print("client " + " ".join(f"{b:>10}" for b in budgets) + "   gap % to step " + str(a.steps))
        for k, t in traces.items():
            v = [oasis.window_mean(t, b) for b in budgets]
            end = oasis.window_mean(t, a.steps)
            print(f"{k:>6} " + " ".join(f"{x:10.3f}" for x in v) + "   "
                  + " ".join(f"{100 * (x - end) / abs(end):8.1f}" for x in v))


if __name__ == "__main__":
    main()
