"""OpenFGL's train / val / test split, as its code draws it, and a reader of its split caches.

OpenFGL (``local_subgraph_train_val_test_split``) splits each client per class: the client's
local node ids of class c, in ascending order, are shuffled by ``np.random.shuffle`` on NumPy's
*global* state, then the first ``int(0.2·n_c)`` train, the next up to ``int(0.6·n_c)`` validate,
the rest test. OpenFGL never calls its own ``seed_everything``, so the shipped caches
(``glb_{train,val,test}_k.pkl``) are one unseeded draw: no code regenerates them, but their
*semantics* — the per-class sizes — can be checked against ours (:func:`per_class_sizes`), and
``benchmarks/openfgl_splits.py`` does so against a cache on disk.
"""
from __future__ import annotations

import pickletools
from pathlib import Path

import numpy as np

from pace_nb.core.errors import DataCorruptionError

SPLITS = ("train", "val", "test")
#: Opcodes of a pickled flat list of ints (what the caches hold); anything else is refused.
_STRUCTURE = {"PROTO", "FRAME", "EMPTY_LIST", "MEMOIZE", "MARK", "APPENDS", "APPEND", "STOP", "BINPUT", "LONG_BINPUT"}
_INTS = {"BININT", "BININT1", "BININT2", "LONG1", "INT"}


def read_id_list(path: str | Path) -> list[int]:
    """The integers of a pickled list of ints, read opcode by opcode — never unpickled, so nothing
    in the file is executed; any other content is a :class:`DataCorruptionError`."""
    ids = []
    try:
        ops = list(pickletools.genops(Path(path).read_bytes()))
    except (ValueError, EOFError) as exc:
        raise DataCorruptionError(f"{path}: not a pickle ({exc})") from None
    for op, arg, _ in ops:
        if op.name in _INTS:
            ids.append(int(arg))  # type: ignore[arg-type]  # an int opcode always carries its int
        elif op.name not in _STRUCTURE:
            raise DataCorruptionError(f"{path}: unexpected pickle opcode {op.name} (not a plain list of ints)")
    return ids


def openfgl_split(nodes: np.ndarray, y: np.ndarray, rs: np.random.RandomState,
                  ratios: tuple[float, float, float] = (0.2, 0.4, 0.4)) -> dict[str, list[int]]:
    """OpenFGL's split of one client (global ids ``nodes``, labels ``y`` of the whole graph) with
    ``rs`` standing in for NumPy's global state → ``{split: sorted global ids}``."""
    yl = y[nodes]
    out: dict[str, list[int]] = {s: [] for s in SPLITS}
    tr, va = ratios[0], ratios[0] + ratios[1]
    for c in range(int(y.max()) + 1):
        idx = np.flatnonzero(yl == c).tolist()
        rs.shuffle(idx)
        n = len(idx)
        out["train"] += idx[:int(tr * n)]
        out["val"] += idx[int(tr * n):int(va * n)]
        out["test"] += idx[int(va * n):n]
    return {s: sorted(nodes[v].tolist()) for s, v in out.items()}


def per_class_sizes(split: dict[str, list[int] | np.ndarray], y: np.ndarray, num_classes: int) -> dict[str, list[int]]:
    """``{split: [count of class c]}`` of one client's split (global ids)."""
    return {s: np.bincount(y[np.asarray(split[s], dtype=np.int64)], minlength=num_classes).tolist() for s in SPLITS}


def client_split(client) -> dict[str, np.ndarray]:
    """Our split of one :class:`~pace_nb.data.federation.ClientGraph` as global ids per split."""
    nodes = client.global_ids.numpy()
    return {s: nodes[m.numpy()] for s, m in zip(SPLITS, (client.train_mask, client.val_mask, client.test_mask))}
