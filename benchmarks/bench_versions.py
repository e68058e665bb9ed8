"""The same multi-round workload under two source checkouts, in one run: before → after.

    git worktree add ../pace_nb_before 20e2153        # the code before the speed work (end of wave 2)
    PACE_NB_DATA=... python3 benchmarks/bench_versions.py --before ../pace_nb_before \\
        [--datasets Computers CS] [--methods fedavg] [--rounds 20] [--repeat 2] [--json FILE]

Workload: ``train_federated`` of each method for ``--rounds`` rounds × 3 local epochs on SPEAR's
federation (Dirichlet β = 0.05, K = 10, data seed 2024), run seed 104729, one thread, CPU. Each
run is a fresh Python process that imports ``pace_nb`` from the checkout it measures (``PYTHONPATH``),
so neither version sees the other's code; before and after alternate ``--repeat`` times and the best
time of each is kept (the machine may be shared: load averages are printed). The after code runs with
``optimizer_state="restart"`` — the before code's Adam, restarted every round — so both do the same
arithmetic and the weights can be compared (max |Δ| over every returned weight); the after code's
default (each client's Adam kept across rounds, OpenFGL's behaviour) is timed beside it.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CHILD = r"""
import sys, time, warnings
import torch
torch.set_num_threads(1)
warnings.filterwarnings("ignore")
from pace_nb.methods.baselines import train_federated
from pace_nb.methods.spear import analysis as sa
dataset, method, rounds, out, params = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
fg = sa.federation(dataset, beta=0.05, num_clients=10, seed=2024)
kw = {"method_params": {"optimizer_state": params}} if params != "-" else {}
t0 = time.perf_counter()
run = train_federated(fg, method, rounds=rounds, local_epochs=3, seeds=(104729,), device="cpu", progress=False, **kw)
secs = time.perf_counter() - t0
torch.save({k: v.detach().cpu() for k, v in run.returned.items()}, out)
print(secs)
"""


def _run(checkout: Path, dataset: str, method: str, rounds: int, params: str, out: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": "1", "PACE_NB_PROGRESS": "0"}
    res = subprocess.run([sys.executable, "-c", _CHILD, dataset, method, str(rounds), str(out), params],
                         capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    if res.returncode != 0:
        raise SystemExit(f"{checkout}: {dataset} {method} failed:\n{res.stderr[-2000:]}")
    return float(res.stdout.strip().splitlines()[-1])


def _commit(checkout: Path) -> str:
    """The checkout's short HEAD commit (its path stays out of the output)."""
    res = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return res.stdout.strip() or "(not a git checkout)"


def _max_diff(a: Path, b: Path) -> float:
    import torch

    pa, pb = torch.load(a), torch.load(b)
    return max(float((pa[k] - pb[k]).abs().max()) for k in pa)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, type=Path, help="source checkout of the old code")
    ap.add_argument("--after", type=Path, default=Path(__file__).resolve().parents[1],
                    help="source checkout of the new code (default: this one)")
    ap.add_argument("--datasets", nargs="+", default=["Computers", "CS"])
    ap.add_argument("--methods", nargs="+", default=["fedavg"])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    for c in (args.before, args.after):
        if not (c / "pace_nb" / "__init__.py").is_file():
            ap.error(f"{c} is not a pace_nb source checkout")
    load, results = [os.getloadavg()[0]], []
    with tempfile.TemporaryDirectory() as tmp:
        for ds in args.datasets:
            for m in args.methods:
                best = {"before": float("inf"), "after": float("inf"), "after, Adam kept": float("inf")}
                files = {k: Path(tmp) / f"{ds}-{m}-{i}.pt" for i, k in enumerate(best)}
                for _ in range(args.repeat):
                    for key, checkout, params in (("before", args.before, "-"), ("after", args.after, "restart"),
                                                  ("after, Adam kept", args.after, "keep")):
                        best[key] = min(best[key], _run(checkout, ds, m, args.rounds, params, files[key]))
                    load.append(os.getloadavg()[0])
                diff = _max_diff(files["before"], files["after"])
                rec = {"dataset": ds, "method": m, "rounds": args.rounds, **{f"{k} s": v for k, v in best.items()},
                       "ratio": best["before"] / best["after"], "max_weight_diff": diff}
                results.append(rec)
                print(f"{ds:10s} {m:8s} {args.rounds} rounds × 3 epochs: before {best['before']:7.1f} s   "
                      f"after {best['after']:7.1f} s   before / after {rec['ratio']:.2f}×   "
                      f"(after, Adam kept: {best['after, Adam kept']:.1f} s)   max |Δw| {diff:.1e}", flush=True)
    print(f"checkouts: before {_commit(args.before)}, after {_commit(args.after)}; started {time.strftime('%Y-%m-%d %H:%M')}")
    print("load averages: " + ", ".join(f"{x:.1f}" for x in load))
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "load_average": load}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
