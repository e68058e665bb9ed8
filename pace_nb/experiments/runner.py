"""The grid loop: run every cell of a config not yet in the store, each written atomically as it arrives.

:func:`run_grid` expands a config (:mod:`experiments.grid`), skips finished cells and cells whose
raw files are missing ("not run"), claims each remaining cell (so several ``pace-nb grid``
processes on one store share the work), computes it with :func:`~pace_nb.experiments.cells.run_cell`
(or an ``executor``'s ``map``, e.g. Ray) and appends its rows with the provenance of the process
that computed it. A rerun skips finished cells, so Ctrl-C or ``kill -9`` loses at most the cells
in flight and never duplicates rows.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable, Iterator

import pandas as pd

from pace_nb.core.config import progress as progress_bar
from pace_nb.core.errors import MissingDataError
from pace_nb.experiments import preflight
from pace_nb.experiments.cells import Cell, LocalReuse, by_setting, run_cell, setting_key
from pace_nb.experiments.grid import GridConfig, expand, load_config
from pace_nb.experiments.provenance import provenance
from pace_nb.experiments.store import ResultsStore

#: Statuses of cells another ``pace-nb grid`` process on the same store finished / is computing.
DONE_ELSEWHERE = "done (by another process)"
RUNNING_ELSEWHERE = "skipped: being computed by another process (rerun to pick it up if it stops)"


@dataclass
class GridReport:
    """What a grid run did: one record per cell (status: done / ran / not run: <why> / planned)."""

    records: list[dict] = field(default_factory=list)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.records, columns=["key", "label", "status", "rows", "seconds"])

    def count(self, status: str) -> int:
        return sum(r["status"].startswith(status) for r in self.records)


def _missing_data(cell: Cell, data_root) -> str | None:
    from pace_nb.data.datasets import DATASETS, get_spec, missing_files, raw_dir

    if cell.dataset not in DATASETS:  # a graph file, checked by expand
        return None if Path(cell.dataset).exists() else f"graph file {cell.dataset} not found"
    if not get_spec(cell.dataset).needs_files:
        return None
    miss = missing_files(cell.dataset, data_root)
    return f"raw files missing in {raw_dir(cell.dataset, data_root)} ({', '.join(miss[:3])}…)" if miss else None


def deferring_map(fn: Callable[[Cell], tuple], cells: Iterable[Cell]) -> Iterator[tuple]:
    """``map(fn, cells)`` for a grid process sharing its store, except that once ``fn`` reports a cell
    :data:`RUNNING_ELSEWHERE`, this process leaves that cell's setting (:func:`~pace_nb.experiments.cells.setting_key`)
    to the other one and comes back to its remaining cells after all the others: the process computing it
    runs the setting's cells next with its Local models in memory, where starting one here would train the
    same Local models a second time, side by side."""
    queue, later, busy = deque(cells), [], set()
    while queue:
        cell = queue.popleft()
        if setting_key(cell) in busy:
            later.append(cell)
            continue
        out = fn(cell)
        if isinstance(out[1], str) and out[1] == RUNNING_ELSEWHERE:
            busy.add(setting_key(cell))
        yield out
    for cell in later:  # their setting's process has most likely done them by now: each is done, skipped or run
        yield fn(cell)


def run_grid(config: GridConfig | str | Path, store: ResultsStore | None = None, executor=None, *,
             dry_run: bool = False, strict: bool | None = None, data_root=None, device: str | None = None,
             progress: bool = True, runner: Callable[[Cell], pd.DataFrame] | None = None,
             known_methods: Iterable[str] | None = None, keep_going: bool = False,
             start: float = 0.0) -> GridReport:
    """Run every cell of ``config`` not yet in ``store``; each result is written as it arrives.

    ``executor.map(fn, cells)`` (default: in-process ``map``) computes cells; ``runner``
    replaces :func:`run_cell` (tests, remote dispatch). Datasets without raw files are
    reported "not run" unless ``strict`` (then :class:`MissingDataError` before any work).
    ``keep_going``: a cell that raises is reported "failed: <error>" and the grid goes on
    (default: the error stops the grid; finished cells stay saved either way).
    ``start`` in [0, 1): begin at that fraction of the cells left to run and wrap around — worker i of
    N processes on one store starts at i/N, so they claim different settings (the method groups of a
    setting stay consecutive and share Local in each process) and meet only at the ends.
    """
    cfg = config if isinstance(config, GridConfig) else load_config(config)
    cells = expand(cfg, known_methods, data_root=data_root)
    grid = cfg.raw.get("grid", {})
    strict = grid.get("strict", False) if strict is None else strict
    data_root = data_root or grid.get("data_root")
    device = device or grid.get("device", "auto")
    from pace_nb.core.config import resolve_device

    if executor is None:  # an unknown or absent device fails before any cell (Ray workers judge their own)
        resolve_device(device)
    preflight.check_memory(cells, data_root, device if executor is None else "cpu")
    store = store or ResultsStore()
    status, todo = {}, []
    for cell in cells:
        why = _missing_data(cell, data_root)
        if why and strict:
            raise MissingDataError(f"{cell.dataset}: {why} (grid is strict; drop the dataset or add its files)")
        rec: dict[str, Any] = dict(key=cell.key, label=cell.label, status="planned", rows=None, seconds=None)
        if why:
            rec.update(status=f"not run: {why}", rows=0)
        elif store.has(cell.key) or preflight.legacy_done(store, cell):
            rec.update(status="done")
        else:
            todo.append(cell)
        status[cell.key] = rec
    report = GridReport(list(status.values()))  # config order; records are updated in place
    todo = by_setting(todo)  # the cells of one setting share Local in-process, however the config lists them
    first = int(float(start) * len(todo)) if todo else 0
    todo = todo[first:] + todo[:first]
    if dry_run:
        return report
    reuse = LocalReuse() if executor is None and runner is None else None  # in-process: groups share Local
    fn = runner or (lambda c, **kw: run_cell(c, data_root=data_root, device=device, progress=False, reuse=reuse, **kw))
    if executor is not None and hasattr(executor, "bind"):  # Ray: share graphs (runner takes fg=), GPUs
        executor.bind(data_root=data_root, device=device, share_graphs=runner is None)

    claims = executor is None  # in-process: grids on one store share the work cell by cell
    provenance(device)  # the checkout's state as this process loaded it (git_state is read once)

    def timed(cell, **kw):
        claim = None
        if claims:  # another `pace-nb grid` on this store may have done or be doing this cell
            claim = None if store.has(cell.key) else store.claim(cell.key)
            if claim is None or store.has(cell.key):
                if claim is not None:
                    claim.release()
                return cell, (DONE_ELSEWHERE if store.has(cell.key) else RUNNING_ELSEWHERE), 0.0, None, None
        t0 = time.perf_counter()
        try:  # provenance is read where the cell runs (a Ray worker's own versions and device)
            return cell, fn(cell, **kw), time.perf_counter() - t0, claim, provenance(device)
        except Exception as exc:  # reported per cell with keep_going
            if claim is not None:
                claim.release()
            if not keep_going:
                raise
            return cell, f"failed: {type(exc).__name__}: {exc}", time.perf_counter() - t0, None, None

    results = executor.map(timed, todo) if executor is not None else deferring_map(timed, todo)
    bar = progress_bar(results, enabled=progress, total=len(todo), desc="grid", unit="cell", leave=True)
    for cell, rows, secs, claim, prov in bar:
        if isinstance(rows, str):  # failed (keep_going) or another process's cell: nothing is stored here
            status[cell.key].update(status=rows.splitlines()[0][:300], rows=0, seconds=secs)
            continue
        try:
            store.append(rows, cell_key=cell.key, cell=cell.describe(), seconds=secs, provenance=prov)
        finally:
            if claim is not None:
                claim.release()
        status[cell.key].update(status="ran", rows=len(rows), seconds=secs)
        if hasattr(bar, "set_postfix_str"):
            bar.set_postfix_str(cell.label[:40])
    return report
