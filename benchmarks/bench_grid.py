"""Benchmark: wall time of the Local + PACE (full, r=6) grid, per dataset and per phase.

For every dataset (Louvain, K clients, data seed 2024, the run seeds) the steps of
:func:`pace_nb.methods.protocol.run_protocol` (methods ``local`` + ``pace``, variant ``full``, rank 6)
are run one by one and timed:

* ``load``   ``pace_nb.data.datasets.load_dataset`` (raw files → PyG ``Data``; PyG processed cache)
* ``part``   ``build_federated`` on the loaded graph (Louvain + masks, or the partition cache)
* ``train``  ``train_local`` — every client × seed in the batched trainer
* ``l-eval`` eval-mode Local logits of every model + the Local result rows
* ``pace``   ``run_pace``: upload (carriers + sketches), server (RegMean consensus), receiver,
             External logits, CNLL calibration + metrics; its split is printed in a second table

``--cold`` points ``$PACE_NB_CACHE`` at an empty temporary folder, so ``load``/``part`` include
PyG's raw processing and the Louvain partition; by default the repo's caches are used (what a
second run sees).  ``--threads`` defaults to 1 (stable on a shared machine; ``--threads 0`` = torch's
default).  Seconds exclude ``import torch``.  The machine may be shared: the 1-minute
load average before and after each dataset is printed beside its timings.

    PACE_NB_DATA=DIR python3 benchmarks/bench_grid.py [--datasets Cora PubMed ...]
        [--clients 10] [--seeds 104729 ...] [--device auto] [--threads 1] [--cold] [--json F] [--quick]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

DATASETS = ("Cora", "CiteSeer", "PubMed", "Computers", "CS")
PHASES = ("load", "part", "train", "l-eval", "pace")
PACE_STEPS = ("upload", "server", "receive", "ext-logits", "eval")


def _sync(dev) -> None:
    import torch

    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


@contextlib.contextmanager
def _timed_pace_steps(acc: dict[str, float], dev):
    """Wrap the PACE step functions (looked up at call time in their modules) with timers."""
    from pace_nb.methods.pace import protocol as pace
    from pace_nb.nn import training

    targets = [(pace, "upload", "upload"), (pace, "server", "server"), (pace, "receive", "receive"),
               (training, "client_logits", "ext-logits"), (pace, "evaluate_method", "eval")]
    saved = []
    for mod, attr, key in targets:
        fn = getattr(mod, attr)

        def wrapped(*a, _fn=fn, _key=key, **kw):
            t = time.perf_counter()
            out = _fn(*a, **kw)
            _sync(dev)
            acc[_key] += time.perf_counter() - t
            return out

        saved.append((mod, attr, fn))
        setattr(mod, attr, wrapped)
    try:
        yield
    finally:
        for mod, attr, fn in saved:
            setattr(mod, attr, fn)


def run_dataset(name: str, clients: int, seeds: tuple[int, ...], dev) -> dict:
    """Time the phases of Local + PACE(full, r=6) on one dataset; returns one result record."""
    import torch

    from pace_nb.data.datasets import load_dataset
    from pace_nb.data.federation import build_federated
    from pace_nb.analysis.summary import summarize
    from pace_nb.methods.protocol import get_method
    from pace_nb.nn.training import TrainConfig, batched_logits, train_local

    secs: dict[str, float] = {}
    steps: dict[str, float] = defaultdict(float)
    load0 = os.getloadavg()[0]

    def clock(phase, fn):
        t = time.perf_counter()
        out = fn()
        _sync(dev)
        secs[phase] = time.perf_counter() - t
        return out

    data = clock("load", lambda: load_dataset(name))
    fg = clock("part", lambda: build_federated(name, "louvain", clients))
    cfg = TrainConfig()
    local = clock("train", lambda: train_local(fg, seeds, cfg, device=dev, progress=False))

    def local_eval():
        k = fg.num_clients
        flat = batched_logits(local.params, fg.clients, [i for _ in seeds for i in range(k)], device=dev)
        logits = {s: flat[s * k:(s + 1) * k] for s in range(len(seeds))}
        return logits, get_method("local").fn(fg, local, seeds=seeds, device=dev, progress=False,
                                              local_logits=logits, train_config=cfg)

    logits, rows_local = clock("l-eval", local_eval)
    spec = get_method("pace")
    kw = {**spec.defaults, "variants": ("full",), "ranks": (6,)}
    with _timed_pace_steps(steps, dev):
        rows_pace = clock("pace", lambda: spec.fn(fg, local, seeds=seeds, device=dev, progress=False,
                                                  local_logits=logits, train_config=cfg, **kw))
    import pandas as pd

    summ = summarize(pd.concat([rows_local, rows_pace], ignore_index=True)).set_index(["method", "variant"])
    steps["other"] = max(secs["pace"] - sum(steps.values()), 0.0)
    x = data.x
    return {
        "dataset": name, "nodes": int(data.num_nodes), "edges": int(data.edge_index.shape[1]) // 2,
        "features": int(x.shape[1]), "classes": int(data.num_classes),
        "feature_density": float(torch.count_nonzero(x)) / x.numel(),
        "clients": fg.num_clients, "seeds": len(seeds),
        "seconds": secs, "total_s": sum(secs.values()), "pace_steps_s": dict(steps),
        "acc_local": float(summ.loc[("local", "native"), "acc_mean"]),
        "acc_pace": float(summ.loc[("pace", "full"), "acc_mean"]),
        "loadavg_before": load0, "loadavg_after": os.getloadavg()[0],
    }


def _table(records: list[dict]) -> str:
    head = (f"{'dataset':10s} {'nodes':>6s} {'dens%':>6s} " + " ".join(f"{p:>7s}" for p in PHASES)
            + f" {'total':>8s} {'Local':>6s} {'PACE':>6s}  {'load avg':>9s}")
    lines = [head, "-" * len(head)]
    for r in records:
        lines.append(f"{r['dataset']:10s} {r['nodes']:6d} {100 * r['feature_density']:6.2f} "
                     + " ".join(f"{r['seconds'][p]:7.2f}" for p in PHASES)
                     + f" {r['total_s']:8.2f} {r['acc_local']:6.2f} {r['acc_pace']:6.2f}"
                     + f"  {r['loadavg_before']:4.1f}→{r['loadavg_after']:<4.1f}")
    return "\n".join(lines)


def _pace_table(records: list[dict]) -> str:
    keys = PACE_STEPS + ("other",)
    head = f"{'PACE split':10s} " + " ".join(f"{k:>10s}" for k in keys)
    return "\n".join([head] + [f"{r['dataset']:10s} " + " ".join(f"{r['pace_steps_s'][k]:10.2f}" for k in keys)
                               for r in records])


def main(argv=None) -> int:
    from pace_nb.core.config import PAPER_SEEDS

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--seeds", type=int, nargs="+", default=list(PAPER_SEEDS))
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch.set_num_threads (0 = torch's default, 2 here); 1 is the default because on a "
                         "shared, loaded 2-core machine OpenMP barriers of 2 threads stall (measured 4x slower)")
    ap.add_argument("--cold", action="store_true", help="empty temporary $PACE_NB_CACHE (PyG processing + Louvain)")
    ap.add_argument("--json", default=None, help="write the records and the grand total to this file")
    ap.add_argument("--quick", action="store_true", help="Cora only, 2 seeds")
    a = ap.parse_args(argv)
    if a.quick:
        a.datasets, a.seeds = ["Cora"], a.seeds[:2]
    tmp = None
    if a.cold:
        tmp = tempfile.TemporaryDirectory(prefix="bench_grid_cache_")
        os.environ["PACE_NB_CACHE"] = tmp.name
    import torch

    from pace_nb.core.config import resolve_device
    from pace_nb.data.datasets import canonical_name, data_root, missing_files
    from pace_nb.core.errors import PaceNBError

    try:
        names = [canonical_name(d) for d in a.datasets]
    except PaceNBError as exc:
        ap.error(str(exc))
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = resolve_device(a.device)
    seeds = tuple(a.seeds)
    print(f"Local + PACE(full, r=6), Louvain K={a.clients}, {len(seeds)} seeds, device {dev}, "
          f"{torch.get_num_threads()} torch threads, {'cold' if a.cold else 'warm'} caches, "
          f"data root {data_root()}", flush=True)
    records, skipped = [], []
    t_all = time.perf_counter()
    for name in names:
        miss = missing_files(name)
        if miss:
            skipped.append({"dataset": name, "missing": miss})
            print(f"  {name}: skipped (missing raw files: {', '.join(miss)})", flush=True)
            continue
        rec = run_dataset(name, a.clients, seeds, dev)
        records.append(rec)
        print(f"  {name}: {rec['total_s']:.1f} s  (" + ", ".join(f"{p} {rec['seconds'][p]:.1f}" for p in PHASES)
              + f")  Local {rec['acc_local']:.2f}  PACE {rec['acc_pace']:.2f}", flush=True)
    wall = time.perf_counter() - t_all
    grand = sum(r["total_s"] for r in records)
    print()
    if records:
        print(_table(records))
        print()
        print(_pace_table(records))
    for s in skipped:
        print(f"{s['dataset']:10s} skipped: missing {', '.join(s['missing'])}")
    print(f"\ngrand total {grand:.1f} s ({grand / 60:.2f} min) over {len(records)} dataset(s); "
          f"wall {wall:.1f} s; load average now {os.getloadavg()[0]:.1f}")
    if a.json:
        Path(a.json).write_text(json.dumps({
            "clients": a.clients, "seeds": list(seeds), "device": str(dev), "threads": torch.get_num_threads(),
            "cold": a.cold, "records": records, "skipped": skipped, "grand_total_s": grand, "wall_s": wall,
        }, indent=2))
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
