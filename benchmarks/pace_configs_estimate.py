"""Benchmark: the PACE configs' summed cell time before → after a code change, estimated from a sample.

Runs a few settings of ``configs/pace_main.toml`` (every method group of each: Local + PACE, the
FedAvg/FedProx/FedNova/FedRCL group, the FedPub/FedTAD/FedGTA/FedAux-1R group) under the package at
``--before`` (a git revision, unpacked with ``git archive`` into a temporary folder) and under this
checkout, each setting in a fresh single-threaded process, in the same run, alternating. A cell's cost is the
CPU seconds of its process (``time.process_time``: on a shared machine the wall clock measures the
neighbours too). Per method group, the before/after ratio (geometric mean over the sampled settings)
then scales the wall time each PACE config's cells of that group recorded in a store (``--store``,
default the shipped ``results/``, its ``draws/`` included):

    estimated after(config) = Σ_groups recorded(config, group) / ratio(group)

A group is told by its methods: a cell with FedRCL or FedProx is the "fedavg" group, one with FedPub,
FedTAD or FedAux-1R the "fedpub" group, any other (Local + PACE, the draws' Local + PACE + FedGTA,
METIS' five) the "local" group. The estimate ignores what the sample does not hold (other datasets'
shapes); the lead re-runs the store for the real ``benchmarks/results/profile_stores.md``.

    PACE_NB_DATA=... python3 benchmarks/pace_configs_estimate.py [--before 39676ed] [--datasets Cora PubMed]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACE_CONFIGS = ("pace_ablation", "pace_draws", "pace_main", "pace_partitions", "quick")

CHILD = r"""
import json, sys, time, torch
torch.set_num_threads(1)
from pace_nb.experiments.grid import load_config, expand
from pace_nb.experiments.cells import LocalReuse, run_cell
cells = [c for c in expand(load_config(sys.argv[1])) if c.dataset == sys.argv[2] and c.partition == "louvain"
         and c.num_clients == int(sys.argv[3])]
reuse, out = LocalReuse(), []
for cell in cells:
    t0 = time.process_time()
    run_cell(cell, device="cpu", reuse=reuse)
    out.append({"methods": list(cell.methods), "cpu": time.process_time() - t0})
print("RESULT " + json.dumps(out))
"""


def group(methods) -> str:
    """The method group a cell belongs to (module doc)."""
    m = set(methods)
    if m & {"fedrcl", "fedprox", "fednova"}:
        return "fedavg"
    if m & {"fedpub", "fedtad", "fedaux1r"}:
        return "fedpub"
    return "local"


def run_setting(package_root: str, dataset: str, clients: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": package_root, "OMP_NUM_THREADS": "1", "PACE_NB_PROGRESS": "0"}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ROOT / "configs" / "pace_main.toml"), dataset, str(clients)],
                          env=env, capture_output=True, text=True, cwd=package_root, check=True)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return {group(c["methods"]): c["cpu"] for c in json.loads(line[len("RESULT "):])}


def recorded(store: str) -> dict[tuple[str, str], float]:
    """Summed recorded wall seconds per (PACE config, method group) in ``store``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from profile_stores import config_times

    from pace_nb.analysis.report import config_cells

    paths = sorted(str(p) for p in (ROOT / "configs").glob("*.toml"))
    methods = {c["key"]: c.get("methods", []) for cs in config_cells(paths).values() for c in cs}
    times = config_times(store, paths)
    out: dict[tuple[str, str], float] = {}
    for _, r in times[times.config.isin(PACE_CONFIGS)].iterrows():
        key = (r.config, group(methods.get(r.key, [])))
        out[key] = out.get(key, 0.0) + float(r.seconds)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default="39676ed", help="git revision of the code before (default: %(default)s)")
    ap.add_argument("--datasets", nargs="+", default=["Cora", "PubMed"])
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--store", default=str(ROOT / "results"))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before, "pace_nb"], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        ratios: dict[str, list[float]] = {}
        for ds in args.datasets:
            before = run_setting(tmp, ds, args.clients)
            after = run_setting(str(ROOT), ds, args.clients)
            for g in before:
                ratios.setdefault(g, []).append(before[g] / after[g])
                print(f"{ds} louvain K={args.clients} {g:>6} group: {before[g]:7.1f} s → {after[g]:7.1f} s CPU "
                      f"({before[g] / after[g]:.2f}×)")
    ratio = {g: math.exp(sum(map(math.log, v)) / len(v)) for g, v in ratios.items()}
    print("ratio per group (geometric mean): " + ", ".join(f"{g} {r:.2f}×" for g, r in sorted(ratio.items())))
    rec = recorded(args.store)
    total_b = total_a = 0.0
    print(f"\n| config | recorded s ({Path(args.store).name}) | estimated after s | ratio |\n|---|---|---|---|")
    for cfg in PACE_CONFIGS:
        b = sum(v for (c, _), v in rec.items() if c == cfg)
        a = sum(v / ratio.get(g, 1.0) for (c, g), v in rec.items() if c == cfg)
        total_b, total_a = total_b + b, total_a + a
        print(f"| `{cfg}` | {b:.0f} | {a:.0f} | {b / a:.2f}× |")
    print(f"| all PACE configs | {total_b:.0f} | {total_a:.0f} | {total_b / total_a:.2f}× |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
