"""Benchmark: the one-round controls whose local loss is not plain CE, before and after a revision.

    PACE_NB_DATA=DIR python3 benchmarks/bench_local_losses.py [--before 777671c] [--dataset PubMed]
        [--clients 10] [--methods fedrcl,fedaux1r,fedprox] [--repeat 2]

Workload: ``run_protocol`` of one method on one federation (Louvain, data seed 2024) × the five paper
run seeds, the Local models trained beforehand (untimed), one thread. Each measurement runs in its own
process: *before* imports the package of git revision ``--before`` (``git archive`` into a temporary
directory), *now* this checkout; the two alternate, ``--repeat`` times each, and the best CPU time
(``time.process_time``) is kept — on a shared machine the wall clock would count the neighbours.
Prints, per method, both times, their ratio and the largest difference of any row's accuracy between
the two revisions (points), so a change that should only be faster shows how far its numbers moved.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, time
sys.meta_path = [f for f in sys.meta_path if not type(f).__module__.startswith("__editable__")]
sys.path.insert(0, sys.argv[4])  # the revision's package, ahead of an editable install of this checkout
import pace_nb
assert pace_nb.__file__.startswith(sys.argv[4]), pace_nb.__file__
import torch
torch.set_num_threads(1)
from pace_nb.core.config import PAPER_SEEDS
from pace_nb.methods.protocol import federation, run_protocol
from pace_nb.nn.training import TrainConfig, train_local
ds, k, method = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fg = federation(ds, num_clients=k)
local = train_local(fg, PAPER_SEEDS, TrainConfig(), device="cpu", progress=False)
t0 = time.process_time()
rows = run_protocol(fg, partition="louvain", num_clients=k, seeds=PAPER_SEEDS, methods=[method], local=local,
                    device="cpu", progress=False, data_seed=2024)
sec = time.process_time() - t0
import pandas as pd
rows = pd.DataFrame(rows)
print(json.dumps({"seconds": sec, "acc": rows["acc"].tolist()}))
"""


def measure(pythonpath: str, dataset: str, clients: int, method: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD, dataset, str(clients), method, pythonpath], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="777671c", help="git revision to compare with (default %(default)s)")
    ap.add_argument("--dataset", default="PubMed")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--methods", default="fedrcl,fedaux1r,fedprox")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before, "pace_nb"], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        print(f"{args.dataset}, Louvain K = {args.clients}, 5 run seeds, one thread; CPU seconds, best of {args.repeat}")
        print("| method | before " + args.before + " s | now s | before / now | max |Δ acc| (points) |")
        print("|---|---|---|---|---|")
        for method in args.methods.split(","):
            best: dict[str, dict] = {}
            for _ in range(args.repeat):
                for label, path in (("before", tmp), ("now", str(ROOT))):
                    r = measure(path, args.dataset, args.clients, method)
                    if label not in best or r["seconds"] < best[label]["seconds"]:
                        best[label] = r
            b, n = best["before"], best["now"]
            delta = max((abs(x - y) for x, y in zip(b["acc"], n["acc"], strict=True)), default=0.0)
            print(f"| {method} | {b['seconds']:.1f} | {n['seconds']:.1f} | {b['seconds'] / n['seconds']:.2f}× | {delta:.2f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
