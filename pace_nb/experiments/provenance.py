"""Provenance of a stored cell: what code and software computed it, on which device.

Written by the grid into every new cell's manifest entry (``"provenance"``, see
:meth:`~pace_nb.experiments.store.ResultsStore.append`); cells stored before it was recorded have
none and are reported as "not recorded" (:func:`commit_label`), never guessed.
"""
from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any
from collections.abc import Mapping

#: Fields of a provenance record (every one present; ``None`` when it could not be read).
FIELDS: tuple[str, ...] = ("package_version", "git_commit", "git_dirty", "torch", "torch_geometric", "numpy",
                           "device", "threads")
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
    the source checkout, torch / PyG / NumPy versions, the device and torch's intra-op thread count."""
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
            "device": dev, "threads": int(torch.get_num_threads())}


def commit_label(record: Mapping[str, Any] | None) -> str:
    """``"<12-hex commit>"`` (``" (dirty)"`` appended when the tree had changes) of a manifest's
    provenance, :data:`NOT_RECORDED` for a cell without one."""
    if not record:
        return NOT_RECORDED
    if not record.get("git_commit"):
        return "no git checkout"
    return str(record["git_commit"])[:12] + (" (dirty)" if record.get("git_dirty") else "")
