"""``pace-nb grid CONFIG``: run an experiment grid into the results store (resumable).

The config (TOML or YAML; see configs/*.toml) is validated as a whole before any work.
Finished cells are skipped, each new cell is written atomically when it finishes, so an
interrupted grid (Ctrl-C, kill -9) resumes where it stopped without duplicate rows.
Datasets whose raw files are absent are reported as "not run" (``--strict``: an error).
With ``--keep-going`` a failing cell is reported and the others run; the exit status is then 1
and the failed cells are listed. Several ``pace-nb grid`` processes on one results store share
the work: each cell is claimed while it is computed (a lock the OS drops if its process dies),
so a second process started on the same config takes the cells the first has not reached.
``--workers N`` starts N such processes on this machine, each on one thread, worker i beginning
at the i/N-th cell (settings stay whole, so their method groups share one Local training).
"""
from __future__ import annotations

import argparse
import sys


def register(sub) -> None:
    p = sub.add_parser("grid", help="run an experiment grid into the results store (resumable)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", metavar="CONFIG", help="grid config file (.toml, .yaml)")
    p.add_argument("--results", default=None, metavar="DIR",
                   help="results store (default $PACE_NB_RESULTS, else <repo>/data/results)")
    p.add_argument("--dry-run", action="store_true", help="validate and list the cells; run nothing")
    p.add_argument("--strict", action="store_true", default=None,
                   help="fail when a dataset's raw files are missing (default: report it as not run)")
    p.add_argument("--data-root", default=None, help="raw data root (default $PACE_NB_DATA, else ./data)")
    p.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:0 … (default: config or auto)")
    p.add_argument("--json", default=None, metavar="FILE", help="write the per-cell report as JSON")
    p.add_argument("--keep-going", action="store_true",
                   help="report a failing cell as failed and run the others (default: stop at the error)")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run cells as Ray tasks (needs pip install -e .[ray]): no ADDRESS = a private local "
                        "runtime; 'auto', HOST:PORT or ray://HOST:PORT = join a running cluster (docs/RAY.md)")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="run N single-threaded grid processes on this store (default 1; e.g. 2 on a 2-core CPU)")
    p.add_argument("--worker-start", type=float, default=0.0, help=argparse.SUPPRESS)  # set for the spawned workers
    p.add_argument("--ray-workers", type=int, default=None, metavar="N",
                   help="with --ray: CPUs of the local runtime / cells in flight on a cluster (default: all)")
    p.set_defaults(func=run, interrupted=lambda args: "interrupted; every finished cell is saved in the results "
                   "store, rerun the same command to resume")


def run(args) -> int:
    from pace_nb.experiments.grid import load_config
    from pace_nb.experiments.runner import run_grid
    from pace_nb.core.io import atomic_write_json
    from pace_nb.core.errors import ConfigError
    from pace_nb.experiments.store import ResultsStore

    from pace_nb.core.config import resolve_device
    from pace_nb.core.io import check_output_dir, check_output_file

    cfg = load_config(args.config)
    if args.json:
        check_output_file(args.json, "--json")
    if args.results:
        check_output_dir(args.results, "--results")
    if args.device is not None:
        resolve_device(args.device)
    executor = None
    if args.ray_workers is not None and args.ray is None:
        raise ConfigError("--ray-workers needs --ray (e.g. --ray --ray-workers 2)")
    if args.workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {args.workers}")
    if args.workers > 1 and args.ray is not None:
        raise ConfigError("--workers runs local processes; with --ray use --ray-workers")
    if args.ray is not None:
        from pace_nb.experiments.ray import make_executor

        executor = make_executor(args.ray, args.ray_workers)
    store = ResultsStore(args.results)
    workers = _spawn_workers(args, store) if args.workers > 1 and not args.dry_run else []
    if workers:
        _one_thread()
    try:
        report = run_grid(cfg, store, executor=executor, dry_run=args.dry_run, strict=args.strict,
                          data_root=args.data_root, device=args.device, keep_going=args.keep_going,
                          start=args.worker_start, progress=not workers)
    finally:
        codes = [w.wait() for w in workers]
    if workers:
        _settle(report, store)
        if any(codes):
            print(f"pace-nb: worker exit codes {codes}; rerun the same command to finish", file=sys.stderr)
    frame = report.frame()
    print(f"grid {cfg.path} → {store.root}: {len(frame)} cells; ran {report.count('ran')}, "
          f"already done {report.count('done')}, planned {report.count('planned')}, not run {report.count('not run')}, "
          f"failed {report.count('failed')}"
          + (f", left to another process {report.count('skipped')}" if report.count("skipped") else ""))
    if len(frame):
        show = frame.assign(seconds=frame["seconds"].map(lambda s: "" if s is None or s != s else f"{s:.1f}"),
                            rows=frame["rows"].map(lambda r: "" if r is None or r != r else str(int(r))))
        print(show[["key", "status", "rows", "seconds", "label"]].to_string(index=False, max_colwidth=70))
    if args.json:
        atomic_write_json(args.json, {"config": cfg.path, "results": str(store.root),
                                      "cells": frame.astype(object).where(frame.notna(), None).to_dict("records")})
    failed = frame[frame["status"].astype(str).str.startswith("failed")] if len(frame) else frame
    if workers and any(codes) and not len(failed):
        return 1
    if len(failed):
        print(f"pace-nb: {len(failed)} cell(s) failed (nothing stored for them; rerun to retry):", file=sys.stderr)
        for _, rec in failed.iterrows():
            print(f"  {rec['key']} {rec['label']}: {rec['status']}", file=sys.stderr)
        return 1
    return 0


def _one_thread() -> None:
    """Each grid worker computes on one thread (N workers on N cores)."""
    import torch

    torch.set_num_threads(1)


def _spawn_workers(args, store) -> list:
    """Start workers 1..N-1 as ``pace-nb grid`` processes on the same config and store (this process is
    worker 0); each prints only its errors, the report is this process's."""
    import os
    import subprocess

    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PACE_NB_PROGRESS": "0"}
    base = [sys.executable, "-m", "pace_nb.cli", "grid", args.config, "--results", str(store.root)]
    for flag, value in (("--data-root", args.data_root), ("--device", args.device)):
        if value is not None:
            base += [flag, value]
    base += ["--strict"] if args.strict else []
    base += ["--keep-going"] if args.keep_going else []
    return [subprocess.Popen(base + ["--worker-start", str(i / args.workers)], env=env, stdout=subprocess.DEVNULL)
            for i in range(1, args.workers)]


def _settle(report, store) -> None:
    """After the workers exit: a cell another worker was computing is done when the store holds it."""
    from pace_nb.experiments.runner import DONE_ELSEWHERE, RUNNING_ELSEWHERE

    for rec in report.records:
        if rec["status"] == RUNNING_ELSEWHERE and store.has(rec["key"]):
            rec["status"] = DONE_ELSEWHERE
