"""Helpers of the hostile-input tests: a tiny Planetoid-format raw dataset, CLI error capture."""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from pace_nb.cli import main

#: The tiny "Cora": 560 nodes (PyG's Planetoid reader needs train + 500 validation nodes), 3 classes.
N_TRAIN, N_ALL, N_TEST, N_FEAT, N_CLASS = 20, 530, 30, 6, 3


def write_planetoid(root: Path, name: str = "Cora", seed: int = 0) -> Path:
    """Raw files ``<root>/<name>/raw/ind.<name>.*`` in Planetoid's format (pickles, as upstream)."""
    rng = np.random.default_rng(seed)
    raw = root / name / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    n = N_ALL + N_TEST
    feats = (rng.random((n, N_FEAT)) < 0.4).astype(np.float32)
    labels = np.eye(N_CLASS, dtype=np.int64)[rng.integers(0, N_CLASS, n)]
    test_index = rng.permutation(np.arange(N_ALL, n))
    graph = {i: sorted({(i + 1) % n, (i * 7 + 3) % n} - {i}) for i in range(n)}
    items = {"x": sp.csr_matrix(feats[:N_TRAIN]), "tx": sp.csr_matrix(feats[N_ALL:]), "allx": sp.csr_matrix(feats[:N_ALL]),
             "y": labels[:N_TRAIN], "ty": labels[N_ALL:], "ally": labels[:N_ALL], "graph": graph}
    for ext, obj in items.items():
        (raw / f"ind.{name.lower()}.{ext}").write_bytes(pickle.dumps(obj))
    (raw / f"ind.{name.lower()}.test.index").write_text("\n".join(map(str, test_index)) + "\n")
    return raw


class Planted:
    """Unpickling this object creates ``path`` (the proof that a planted file ran code)."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def cli_error(argv: list[str], capsys, match: str | None = None) -> str:
    """Run ``pace-nb argv``: exit 2, one ``pace-nb: error:`` line, no traceback; returns it."""
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, f"exit {rc}, stderr: {err}"
    assert err.startswith("pace-nb: error:") and "Traceback" not in err and err.count("\n") == 1, err
    if match is not None:
        assert match in err, err
    return err
