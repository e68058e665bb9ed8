"""Multi-round baselines with and without the per-run layout cache (``train_models(layouts=…)``).

    PACE_NB_DATA=... python3 benchmarks/bench_multiround.py [--dataset Computers] [--methods fedavg fedprox]
        [--rounds 100] [--json FILE]

SPEAR's comparison runs R = 100 rounds of 3 local epochs; each round used to rebuild the
clients' propagation matrices and the padded block layout. *rebuilt* runs each method with the
cache switched off (every round builds them, as before), *cached* with the default (built once
per run). Same process, same federation (Dirichlet β = 0.05, K = 10, data seed 2024, run seed
104729); prints both wall times, their ratio and whether the returned weights are bitwise equal.
The machine may be shared: load averages are printed with the numbers.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path


def _digest(run) -> str:
    h = hashlib.sha256()
    for part in (run.returned, run.trained):
        for k in sorted(part):
            h.update(part[k].detach().cpu().numpy().tobytes())
    return h.hexdigest()


def main(argv=None) -> int:
    import warnings

    import torch

    import pace_nb.methods.baselines.base as base
    from pace_nb.methods.baselines import train_federated
    from pace_nb.methods.spear import analysis as sa

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="Computers")
    ap.add_argument("--methods", nargs="+", default=["fedavg", "fedprox"])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message="clients .* have no training nodes")
    fg = sa.federation(args.dataset, beta=0.05, num_clients=10, seed=2024)
    real = base.train_models
    rebuilt = lambda *a, layouts=None, **kw: real(*a, **kw)  # the cache switched off
    load, out = [os.getloadavg()[0]], {"dataset": args.dataset, "rounds": args.rounds, "methods": {}}
    for m in args.methods:
        res = {}
        for mode, fn in (("rebuilt", rebuilt), ("cached", real)):
            base.train_models = fn
            try:
                t0 = time.perf_counter()
                run = train_federated(fg, m, rounds=args.rounds, local_epochs=3, seeds=(104729,), device=args.device,
                                      progress=False)
                res[mode] = (time.perf_counter() - t0, _digest(run))
            finally:
                base.train_models = real
            load.append(os.getloadavg()[0])
        same = res["rebuilt"][1] == res["cached"][1]
        out["methods"][m] = {"rebuilt_s": res["rebuilt"][0], "cached_s": res["cached"][0],
                             "ratio": res["rebuilt"][0] / res["cached"][0], "bitwise_equal": same}
        print(f"{m:9s} rebuilt {res['rebuilt'][0]:7.1f} s   cached {res['cached'][0]:7.1f} s   "
              f"ratio {res['rebuilt'][0] / res['cached'][0]:.2f}x   weights bitwise equal: {same}", flush=True)
    out["load_average"] = load
    print("load averages: " + ", ".join(f"{x:.1f}" for x in load))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0 if all(v["bitwise_equal"] for v in out["methods"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
