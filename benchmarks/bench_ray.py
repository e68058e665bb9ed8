"""Serial vs Ray wall time of a grid (default configs/quick.toml) and where Ray's overhead goes.

    PACE_NB_DATA=DIR python3 benchmarks/bench_ray.py [--config configs/quick.toml]
        [--workers 2] [--json FILE] [--skip-serial]

Every run starts from an empty private results store (a temporary folder) in the same
process, after the dataset/partition caches were warmed (``warm_graphs_s``).  Serial runs
twice: with torch's default threads and with one thread (what each Ray worker uses: Ray
sets OMP_NUM_THREADS to the task's CPUs).  The Ray run is timed end to end (runtime start
+ grid).  Then, on the same warm
runtime, probes isolate the overhead:

* ``runtime_start_s``   ``ray.init`` of a private local runtime (loopback, no dashboard)
* ``cold_worker_s``     a task on a brand-new worker process: process start + ``import torch`` +
                        ``pace_nb.experiments.grid`` (``import_s``, timed inside the worker) + scheduling
* ``ray_grid_overhead_s`` grid wall time minus its slowest cell (cells run in parallel)
* ``task_roundtrip_ms`` one no-op task on a warm worker (scheduling + result), median of 50
* ``graph_put_s``       ``ray.put`` of the first cell's FederatedGraph (``graph_mb`` of tensors)
* ``graph_fetch_s``     a task that receives that graph minus a no-op task (transfer + unpickle)

The machine may be shared: the load average before and after is printed with the numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _noop(x=None):
    return 0


def _cold_import():
    t = time.perf_counter()
    import torch  # noqa: F401

    import pace_nb.experiments.grid
    import pace_nb.methods.protocol  # noqa: F401
    return time.perf_counter() - t, os.getpid()


def _touch(fg):
    return fg.num_clients


def tensor_megabytes(fg) -> float:
    """Bytes of every tensor of a FederatedGraph (the full graph and the client copies)."""
    import torch

    seen, total = set(), 0
    objs = [fg.data[k] for k in fg.data.keys()] + [v for c in fg.clients for v in vars(c).values()]
    for v in objs:
        if isinstance(v, torch.Tensor) and id(v) not in seen:
            seen.add(id(v))
            total += v.numel() * v.element_size()
    return total / 2**20


def _median_wall(ray, fn, args, n: int) -> float:
    walls = []
    for _ in range(n):
        t = time.perf_counter()
        ray.get(fn.remote(*args))
        walls.append(time.perf_counter() - t)
    return statistics.median(walls)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(ROOT / "configs" / "quick.toml"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--skip-serial", action="store_true")
    args = ap.parse_args(argv)
    os.environ.setdefault("PACE_NB_PROGRESS", "0")
    if "PACE_NB_DATA" not in os.environ and (ROOT.parent / "shared" / "data").is_dir():
        os.environ["PACE_NB_DATA"] = str(ROOT.parent / "shared" / "data")

    import torch

    from pace_nb.experiments import ray as dist
    from pace_nb.experiments.grid import expand, load_config
    from pace_nb.experiments.runner import run_grid
    from pace_nb.experiments.store import ResultsStore

    cfg = load_config(args.config)
    cells = expand(cfg)
    tmp = Path(tempfile.mkdtemp(prefix="bench_ray_"))
    out = {"config": args.config, "cells": len(cells), "workers": args.workers, "cpus": os.cpu_count(),
           "torch_threads_driver": torch.get_num_threads(), "load_before": os.getloadavg()}

    t = time.perf_counter()  # warm the dataset/partition caches so that no run pays for them
    for cell in cells:
        if dist.graph_key(cell) is not None:
            dist.build_graph(cell, cfg.raw.get("grid", {}).get("data_root"))
    out["warm_graphs_s"] = time.perf_counter() - t

    threads = torch.get_num_threads()
    for label, nthreads in ([] if args.skip_serial else [("serial", threads), ("serial_1thread", 1)]):
        torch.set_num_threads(nthreads)
        t = time.perf_counter()
        rep = run_grid(cfg, ResultsStore(tmp / label), progress=False)
        out[f"{label}_s"] = time.perf_counter() - t
        out[f"{label}_cell_s"] = [round(r["seconds"], 2) for r in rep.records if r["status"] == "ran"]
    torch.set_num_threads(threads)

    import ray

    t = time.perf_counter()
    dist.connect(dist.RayOptions(workers=args.workers))
    out["runtime_start_s"] = time.perf_counter() - t
    ex = dist.RayExecutor(dist.RayOptions(workers=args.workers))
    t = time.perf_counter()
    rep = run_grid(cfg, ResultsStore(tmp / "ray"), executor=ex, progress=False)
    out["ray_grid_s"] = time.perf_counter() - t
    out["ray_total_s"] = out["runtime_start_s"] + out["ray_grid_s"]
    out["ray_cell_s"] = [round(r["seconds"], 2) for r in rep.records if r["status"] == "ran"]
    out["ray_grid_overhead_s"] = out["ray_grid_s"] - max(out["ray_cell_s"], default=0.0)
    # a brand-new worker process (its own runtime_env forces one): start + import torch + pace_nb
    cold = ray.remote(runtime_env={"env_vars": {"PACE_NB_BENCH_FRESH": "1"}})(_cold_import)
    t = time.perf_counter()
    out["import_s"], _ = ray.get(cold.remote())
    out["cold_worker_s"] = time.perf_counter() - t
    out["driver_build_graphs_s"], out["driver_put_graphs_s"] = ex.stats["build_s"], ex.stats["put_s"]
    out["graphs_shared"] = ex.stats["graphs"]

    noop, touch = ray.remote(_noop), ray.remote(_touch)
    ray.get([noop.remote() for _ in range(args.workers)])  # warm
    out["task_roundtrip_ms"] = 1000 * _median_wall(ray, noop, (), 50)
    fg = dist.build_graph(cells[0], cfg.raw.get("grid", {}).get("data_root"))
    out["graph_mb"] = tensor_megabytes(fg)
    t = time.perf_counter()
    ref = ray.put(fg)
    out["graph_put_s"] = time.perf_counter() - t
    base = _median_wall(ray, noop, (ref,), 1)  # the ref as an argument, also resolved (first fetch)
    out["graph_fetch_s"] = _median_wall(ray, touch, (ref,), 5) - _median_wall(ray, noop, (), 5)
    out["graph_first_task_s"] = base
    ray.shutdown()
    out["load_after"] = os.getloadavg()

    for k, v in out.items():
        print(f"{k:>24}: {v if not isinstance(v, float) else round(v, 3)}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
