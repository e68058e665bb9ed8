"""One setting's method groups with and without sharing Local (``experiments.cells.LocalReuse``).

    PACE_NB_DATA=DIR python3 benchmarks/bench_local_reuse.py [--dataset Cora] [--clients 10]
        [--seeds 5] [--json FILE]

Runs ``configs/pace_main.toml``'s three method groups for one setting through ``run_grid`` twice,
in one process, each into an empty private store: *separate* (each cell trains Local inside
``run_protocol``, the grid before sharing) and *shared* (``run_grid``'s default: the first
cell trains Local, the next ones reuse it). Prints the wall time of each cell and the total,
the ratio separate / shared, and whether every stored row is identical (all columns but
``seconds``). The order is separate first, then shared; before either, the dataset/partition
caches are warmed and every cell runs once on one seed (untimed). The machine may be shared:
load averages are printed with the numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv=None) -> int:
    from pace_nb.core.config import PAPER_SEEDS
    from pace_nb.experiments.cells import run_cell
    from pace_nb.experiments.grid import expand, load_config, parse_config
    from pace_nb.experiments.runner import run_grid
    from pace_nb.experiments.store import ResultsStore
    from pace_nb.methods.protocol import federation

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="Cora")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=5, help="how many of the paper's seeds")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    main_cfg = load_config(ROOT / "configs" / "pace_main.toml").raw
    exp = dict(main_cfg["experiment"][0], datasets=[args.dataset], clients=[args.clients])
    seeds = list(PAPER_SEEDS[: args.seeds])
    text = (f"[grid]\nseeds = {seeds}\ndata_seed = {main_cfg['grid']['data_seed']}\n[[experiment]]\n"
            + "".join(f"{k} = {json.dumps(v)}\n" for k, v in exp.items()))
    cfg = parse_config(text)
    cells = expand(cfg)
    fg = federation(args.dataset, num_clients=args.clients)  # warm the graph and partition caches
    for cell in cells:  # and every method's code path (one seed, untimed, not stored)
        run_cell(type(cell)(**{**cell.__dict__, "seeds": (seeds[0],)}), device=args.device, fg=fg)
    load = [os.getloadavg()[0]]
    out = {"dataset": args.dataset, "clients": args.clients, "seeds": len(seeds), "cells": {}}
    stores = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("separate", "shared"):
            stores[mode] = ResultsStore(Path(tmp) / mode)
            runner = (lambda c: run_cell(c, device=args.device)) if mode == "separate" else None
            t0 = time.perf_counter()
            report = run_grid(cfg, stores[mode], progress=False, device=args.device, runner=runner)
            out[f"{mode}_s"] = time.perf_counter() - t0
            out["cells"][mode] = [(r["label"].split(" seeds ")[-1], r["seconds"]) for r in report.records]
            load.append(os.getloadavg()[0])
        same = all(stores["separate"].rows_of(c.key).drop(columns="seconds").to_csv(index=False)
                   == stores["shared"].rows_of(c.key).drop(columns="seconds").to_csv(index=False) for c in cells)
    out.update(ratio=out["separate_s"] / out["shared_s"], rows_identical=same, load_average=load)
    for mode in ("separate", "shared"):
        print(f"{mode:9s} {out[mode + '_s']:8.1f} s   " + "  ".join(f"{lab}: {s:.1f} s" for lab, s in out["cells"][mode]))
    print(f"ratio separate / shared: {out['ratio']:.2f}x   rows identical: {same}   load averages: "
          + ", ".join(f"{x:.1f}" for x in load))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
