"""Which paths are a user's graph (docs/OWN_DATA.md) and which files make it: read by
:mod:`~pace_nb.data.datasets` (a graph's fingerprint) and :mod:`~pace_nb.data.userdata` (loading).
Below both, so neither imports the other back."""
from __future__ import annotations

import os
from pathlib import Path

#: The files of a graph folder (``edges.csv`` marks one).
FOLDER_FILES = ("edges.csv", "features.csv", "features.npy", "labels.csv", "clients.csv", "split.csv")


def is_graph_path(value) -> bool:
    """Whether ``value`` names an existing graph file (``*.npz``) or folder (holding ``edges.csv``)."""
    if not isinstance(value, (str, os.PathLike)):
        return False
    p = Path(value).expanduser()
    return (p.is_file() and p.suffix.lower() == ".npz") or (p.is_dir() and (p / "edges.csv").is_file())


def graph_files(path: Path) -> list[Path]:
    """The files of the graph at ``path``: the NPZ itself, or the folder's files that exist."""
    return [path] if path.is_file() else [path / f for f in FOLDER_FILES if (path / f).is_file()]
