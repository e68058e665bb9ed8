"""Provenance of a stored cell: what code and software computed it, on which device.

Written by the grid into every new cell's manifest entry (``"provenance"``, see
:meth:`~pace_nb.experiments.store.ResultsStore.append`); cells stored before it was recorded have
none and are reported as "not recorded" (:func:`commit_label`), never guessed.

The record includes the machine's memory bandwidth, measured once per process before its first cell
(:func:`memory_bandwidth`): the batched trainer is bound by memory traffic, so cell seconds from two
machines (or two days of one shared machine) compare only beside it.
"""
from __future__ import annotations

import functools
import os
import subprocess
import time
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Mapping

#: Fields of a provenance record (every one present; ``None`` when it could not be read).
FIELDS: tuple[str, ...] = ("package_version", "git_commit", "git_dirty", "torch", "torch_geometric", "numpy",
                           "device", "threads", "cpus", "memory_gbps")
NOT_RECORDED = "not recorded"


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


@functools.cache
def git_state(root: Path | None) -> tuple[str | None, bool | None]:
    """``(commit, dirty)`` of the checkout at ``root``: HEAD's hash and whether tracked files differ
    from it (untracked files are not counted); ``(None, None)`` outside a git checkout. Read once per
    process (the grid reads it before its first cell): the code a process runs is the code it loaded,
    whatever is committed while it runs."""
    if root is None:
        return None, None
    head = _git(root, "rev-parse", "HEAD")
    if not head:
        return None, None
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return head.strip(), (None if status is None else bool(status.strip()))


def _version(module: str) -> str | None:
    try:
        return str(__import__(module).__version__)
    except Exception:  # not installed, or no __version__
        return None


def provenance(device: Any = "auto") -> dict[str, Any]:
    """The provenance of a cell computed now in this process on ``device`` (``"auto"`` resolved as
    :func:`~pace_nb.core.config.resolve_device` does): package version, git commit and dirtiness of
    the source checkout, torch / PyG / NumPy versions, the device, torch's intra-op thread count and
    the CPUs this process may run on."""
    import torch

    import pace_nb
    from pace_nb.core.config import repo_root, resolve_device

    commit, dirty = git_state(repo_root())
    try:
        dev: str | None = str(resolve_device(device))
    except Exception:  # an unusable device string fails the cell itself, not its record
        dev = str(device) if device is not None else None
    return {"package_version": pace_nb.__version__, "git_commit": commit, "git_dirty": dirty,
            "torch": torch.__version__, "torch_geometric": _version("torch_geometric"), "numpy": _version("numpy"),
            "device": dev, "threads": int(torch.get_num_threads()), "cpus": _cpus(),
            "memory_gbps": memory_bandwidth()}


def triad_bandwidth(n: int = 1 << 25, reps: int = 5) -> float:
    """Bytes per second of the STREAM triad ``a = b + s·c`` on ``n`` float32 elements (12 bytes moved
    per element; best of ``reps``, CPU time of this process, torch's current thread count). The default
    arrays (3 × 128 MiB) are larger than a CPU's caches."""
    import torch

    b, c, a = torch.full((n,), 0.5), torch.full((n,), 0.25), torch.empty(n)
    best = float("inf")
    for _ in range(reps):
        t0 = time.process_time()
        torch.add(b, c, alpha=3.0, out=a)
        best = min(best, time.process_time() - t0)
    return 12 * n / max(best, 1e-9)


@functools.cache
def memory_bandwidth() -> float | None:
    """This machine's single-threaded memory bandwidth in GB/s (:func:`triad_bandwidth` on one thread,
    one decimal), measured once per process; ``None`` where it cannot be measured."""
    import torch

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        return round(triad_bandwidth() / 1e9, 1)
    except (RuntimeError, MemoryError):  # pragma: no cover - no room for the arrays
        return None
    finally:
        torch.set_num_threads(threads)


def _cpus() -> int | None:
    """The CPUs this process may run on (its affinity where the OS has one, else the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def machine_label(record: Mapping[str, Any] | None) -> str:
    """``"cpu (2 CPUs), 1 thread"`` of a manifest's provenance: what its device and thread count (and,
    in newer manifests, the CPUs the process had) record; :data:`NOT_RECORDED` for a cell without one.
    The memory bandwidth is not part of it (:func:`bandwidths` lists it): it varies run to run."""
    if not record or record.get("device") is None:
        return NOT_RECORDED
    cpus, threads = record.get("cpus"), record.get("threads")
    return (f"{record['device']}" + (f" ({cpus} CPU{'s' if cpus != 1 else ''})" if cpus else "")
            + (f", {threads} thread{'s' if threads != 1 else ''}" if threads is not None else ""))


def _gbps(records: Iterable[Mapping[str, Any] | None]) -> tuple[list[float], int]:
    """The memory bandwidths the records hold, and how many records hold none."""
    recs = list(records)
    got = [float(r["memory_gbps"]) for r in recs
           if isinstance(r, Mapping) and isinstance(r.get("memory_gbps"), (int, float))]
    return got, len(recs) - len(got)


def _span(got: list[float]) -> str | None:
    if not got:
        return None
    lo, hi = min(got), max(got)
    return f"{lo:.1f} GB/s" if lo == hi else f"{lo:.1f}–{hi:.1f} GB/s"


def bandwidth_span(records: Iterable[Mapping[str, Any] | None]) -> str | None:
    """``"12.3–12.5 GB/s"`` (or one value) of the bandwidths the records measured; ``None`` when none has one."""
    return _span(_gbps(records)[0])


def bandwidths(records: Iterable[Mapping[str, Any] | None]) -> str:
    """The memory bandwidths the records measured: ``"12.3–12.5 GB/s (40 cells)"``, plus the cells
    without one (``"not recorded (37 cells)"``); ``"not recorded"`` when none has one."""
    got, missing = _gbps(records)
    span = _span(got)
    if span is None:
        return NOT_RECORDED
    out = f"{span} ({len(got)} cell{'s' if len(got) != 1 else ''})"
    return out + (f"; {NOT_RECORDED} ({missing} cell{'s' if missing != 1 else ''})" if missing else "")


def machines(records: Iterable[Mapping[str, Any] | None]) -> str:
    """One phrase for the machines a store's cells record: each :func:`machine_label` with its cell
    count, most cells first (``"cpu, 1 thread (180 cells); not recorded (37 cells)"``)."""
    counts: dict[str, int] = {}
    for r in records:
        label = machine_label(r if isinstance(r, Mapping) else None)
        counts[label] = counts.get(label, 0) + 1
    order = sorted(counts, key=lambda k: (k == NOT_RECORDED, -counts[k], k))
    return "; ".join(f"{k} ({counts[k]} cell{'s' if counts[k] != 1 else ''})" for k in order) or "no cells"


def commit_label(record: Mapping[str, Any] | None) -> str:
    """``"<12-hex commit>"`` (``" (dirty)"`` appended when the tree had changes) of a manifest's
    provenance, :data:`NOT_RECORDED` for a cell without one."""
    if not record:
        return NOT_RECORDED
    if not record.get("git_commit"):
        return "no git checkout"
    return str(record["git_commit"])[:12] + (" (dirty)" if record.get("git_dirty") else "")
