"""On-disk cache of trained Local models, so that configs sharing a setting train Local once.

Local's models depend only on the federation, the run seeds, the training config, the device and
the code that trains them; several configs train the same ones (e.g. ``pace_ablation``'s Table 6
and ``pace_main``, both Louvain at data seed 2024). :func:`load` / :func:`save` keep them as

    cache_dir()/local/<key>.npz    every tensor of the LocalModels (``np.load(allow_pickle=False)``)
    cache_dir()/local/<key>.json   the key's fields, the arrays' sha256 (written after the NPZ)

``key`` (:func:`cache_key`) hashes :func:`~pace_nb.experiments.cells.local_key`'s fields, the
cell's raw-data fingerprint, torch's version and :func:`code_fingerprint` (every source file of
the package): changed code or data gives another key, so a stale model is never served, and a
served one is bit for bit what training would give (CPU training is deterministic). An entry that
fails its checksum or does not match its key warns and is retrained. ``PACE_NB_LOCAL_CACHE``:
``off`` disables the cache, a path moves it. Entries are safe to delete (each is recomputed).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from pace_nb.core.io import atomic_write_json, atomic_write_npz
from pace_nb.data.graph_cache import array_checksum
from pace_nb.nn.training import LocalModels, TrainConfig

CACHE_VERSION = 2
ENV = "PACE_NB_LOCAL_CACHE"


def cache_folder() -> Path | None:
    """Where Local models are cached: ``$PACE_NB_LOCAL_CACHE`` (``off`` = nowhere) > ``cache_dir()/local``."""
    env = os.environ.get(ENV, "")
    if env.lower() in ("off", "0", "none", "false"):
        return None
    if env:
        return Path(env)
    from pace_nb.core.config import cache_dir

    return cache_dir() / "local"


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 (16 hex) of every ``.py`` file of the installed package, by relative path."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cache_key(local_fields: str, data: str) -> str:
    """The entry's key: ``local_fields`` (:func:`~pace_nb.experiments.cells.local_key`), the raw-data
    fingerprint ``data``, torch's version, the package's code and this format's version."""
    text = json.dumps({"local": local_fields, "data": data, "torch": torch.__version__, "code": code_fingerprint(),
                       "v": CACHE_VERSION}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _arrays(local: LocalModels) -> dict[str, np.ndarray]:
    out = {f"params/{k}": v.detach().cpu().numpy() for k, v in local.params.items()}
    for s, w0 in enumerate(local.init):
        out.update({f"init/{s}/{k}": v.detach().cpu().numpy() for k, v in w0.items()})
    return out


def _paths(key: str, folder: Path) -> tuple[Path, Path]:
    return folder / f"{key}.npz", folder / f"{key}.json"


def load(key: str, seeds: tuple[int, ...], num_clients: int, config: TrainConfig) -> LocalModels | None:
    """The cached Local models of ``key``, verified (checksum, seeds, clients, config, shapes); None when
    absent or the cache is off; a defective entry warns, is removed and gives None (retrain)."""
    folder = cache_folder()
    if folder is None:
        return None
    npz, meta = _paths(key, folder)
    if not npz.exists() or not meta.exists():
        return None
    try:
        info = json.loads(meta.read_text(encoding="utf-8"))
        if (info.get("version") != CACHE_VERSION or info.get("key") != key or tuple(info.get("seeds", ())) != seeds
                or info.get("num_clients") != num_clients or info.get("config") != dataclasses.asdict(config)):
            raise ValueError("its manifest does not match the setting")
        with np.load(npz, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        if array_checksum(arrays) != info.get("sha256"):
            raise ValueError("checksum mismatch")
        params = {k.split("/", 1)[1]: torch.from_numpy(v.copy()) for k, v in arrays.items() if k.startswith("params/")}
        init = [{k.split("/", 2)[2]: torch.from_numpy(v.copy()) for k, v in arrays.items()
                 if k.startswith(f"init/{s}/")} for s in range(len(seeds))]
        b = len(seeds) * num_clients
        if not params or any(v.shape[0] != b for v in params.values()) or any(set(w) != set(params) for w in init):
            raise ValueError("its arrays do not have the setting's shapes")
    except Exception as exc:
        warnings.warn(f"Local model cache {npz.name} is corrupted or mismatched ({exc}); training Local again",
                      RuntimeWarning, stacklevel=2)
        for p in (meta, npz):
            p.unlink(missing_ok=True)
        return None
    return LocalModels(seeds=seeds, num_clients=num_clients, init=init, params=params, config=config)


def save(key: str, local: LocalModels) -> bool:
    """Keep ``local`` under ``key`` (NPZ, then its manifest, each written atomically); False when the
    cache is off or its folder cannot be written (a warning: the grid goes on without it)."""
    folder = cache_folder()
    if folder is None:
        return False
    npz, meta = _paths(key, folder)
    arrays = _arrays(local)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_npz(npz, **arrays)
        atomic_write_json(meta, {"version": CACHE_VERSION, "key": key, "seeds": list(local.seeds),
                                 "num_clients": local.num_clients, "config": dataclasses.asdict(local.config),
                                 "sha256": array_checksum(arrays)})
    except OSError as exc:
        warnings.warn(f"cannot keep Local models in {folder} ({exc}); set ${ENV} to a writable folder or 'off'",
                      RuntimeWarning, stacklevel=2)
        return False
    return True
