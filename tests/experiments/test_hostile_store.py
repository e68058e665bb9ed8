"""A hostile or careless user's store: mixed data versions, shared permissions, FIFOs, files
where folders belong, a store's identity, and a training too large for the machine (issue 28)."""
from __future__ import annotations

import json
import os
import pickle
import stat
import threading

import numpy as np
import pandas as pd
import pytest

from fake_results import make_rows
from hostile_helpers import cli_error, write_planetoid
from pace_nb.core.errors import ConfigError, DataCorruptionError
from pace_nb.data import datasets as D
from pace_nb.experiments.grid import expand, parse_config
from pace_nb.experiments.runner import run_grid
from pace_nb.experiments.store import ResultsStore, stable_key

CORA = '[grid]\nseeds = [1]\n[[experiment]]\ndatasets = ["Cora"]\nmethods = ["local"]\nclients = [3]\n'


def fake_runner(cell) -> pd.DataFrame:
    return make_rows(dataset=cell.dataset, num_clients=cell.num_clients, seeds=list(cell.seeds),
                     methods={("local", "native", 0): 0.0}, receivers=False)


@pytest.fixture
def cora_root(tmp_path, monkeypatch):
    monkeypatch.setenv("PACE_NB_CACHE", str(tmp_path / "cache"))
    D._load_cached.cache_clear()
    return tmp_path / "root", write_planetoid(tmp_path / "root")


# -- data versions -------------------------------------------------------------------------
def test_changed_raw_data_is_a_new_cell_and_mixing_is_an_error(tmp_path, cora_root, capsys):
    root, raw = cora_root
    store = ResultsStore(tmp_path / "store")
    cfg = parse_config(CORA)
    assert run_grid(cfg, store, runner=fake_runner, progress=False, data_root=root).count("ran") == 1
    assert run_grid(cfg, store, runner=fake_runner, progress=False, data_root=root).count("done") == 1
    (old,) = store.keys()
    labels = raw / "ind.cora.ty"  # one test node's label changes: other raw bytes, another fingerprint
    ty = pickle.loads(labels.read_bytes())
    ty[0] = np.roll(ty[0], 1)
    labels.write_bytes(pickle.dumps(ty))
    report = run_grid(cfg, store, runner=fake_runner, progress=False, data_root=root)
    assert report.count("ran") == 1  # not "already done"
    new = report.records[0]["key"]
    assert new != old and sorted(store.keys()) == sorted([old, new])
    cells = {k: store.manifest(k)["cell"] for k in (old, new)}
    assert cells[old]["data"] != cells[new]["data"] and cells[old]["label"] == cells[new]["label"]
    with pytest.raises(DataCorruptionError, match=f"mixed data versions: cells ({old}|{new}) and ({old}|{new})"):
        store.load()
    cli_error(["tables", "--results", str(store.root), "--out", str(tmp_path / "t")], capsys, "mixed data versions")


def test_fingerprint_is_the_raw_files_sha256():
    """Independent of the graph cache: sha256 over the raw files' sha256s, as documented."""
    import hashlib

    root = D.data_root()
    if D.missing_files("Cora", root):
        pytest.skip("Cora raw files absent")
    spec = D.get_spec("Cora")
    raw = {f: hashlib.sha256((D.raw_dir("Cora") / f).read_bytes()).hexdigest() for f in spec.files}
    text = json.dumps({"dataset": "Cora", "raw": raw}, sort_keys=True, separators=(",", ":"))
    assert D.data_fingerprint("cora") == hashlib.sha256(text.encode()).hexdigest()[:16]
    assert D.data_fingerprint("demo") != D.data_fingerprint("Cora")


def test_cells_without_a_fingerprint_still_count_as_done(tmp_path):
    """Cells written before fingerprints (the shipped store's) keep their keys and count as done."""
    cfg = parse_config('[grid]\nseeds = [1]\n[[experiment]]\ndatasets = ["demo"]\nmethods = ["local"]\nclients = [3]\n')
    (cell,) = expand(cfg)
    (legacy,) = expand(cfg, fingerprints=False)
    assert cell.data and not legacy.data and legacy.key == cell.setting_key != cell.key
    assert "data" not in legacy.describe()
    store = ResultsStore(tmp_path)
    store.append(fake_runner(legacy), cell_key=legacy.key, cell=legacy.describe())
    assert run_grid(cfg, store, runner=lambda c: pytest.fail("recomputed"), progress=False).count("done") == 1
    assert store.cells()["setting_key"].tolist() == [legacy.key]


def test_shipped_store_cells_have_their_keys(tmp_path):
    """Every shipped cell's key is still the key of its setting (no migration rewrites them)."""
    from pace_nb.core.config import shipped_results_dir

    shipped = shipped_results_dir()
    if shipped is None:
        pytest.skip("no shipped store")
    store = ResultsStore.for_reading(shipped)
    for key in store.keys()[:40]:
        cell = store.manifest(key)["cell"]
        if cell and "kind" in cell and not cell.get("data"):
            fields = {k: v for k, v in cell.items() if k not in ("key", "label")}
            assert stable_key(fields) == key


# -- permissions ---------------------------------------------------------------------------
@pytest.mark.skipif(not hasattr(os, "fchmod"), reason="POSIX modes")
@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_store_files_follow_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        key = ResultsStore(tmp_path).append(make_rows(), cell_key="c1")
    finally:
        os.umask(old)
    for suffix in (".csv", ".json"):
        assert stat.S_IMODE((tmp_path / "cells" / f"{key}{suffix}").stat().st_mode) == mode


def test_unreadable_manifest_is_not_called_corrupted(tmp_path, monkeypatch):
    import pace_nb.experiments.store as st

    store = ResultsStore(tmp_path)
    store.append(make_rows(), cell_key="c1")

    def denied(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(st, "read_regular_bytes", denied)
    with pytest.raises(ConfigError, match="not damaged") as err:
        store.load()
    assert not isinstance(err.value, DataCorruptionError) and "delete" not in str(err.value)


# -- files that are not what they seem ----------------------------------------------------
@pytest.mark.parametrize("which", ["json", "csv"])
def test_fifo_in_cells_is_refused_without_hanging(tmp_path, capsys, which):
    store = ResultsStore(tmp_path / "store")
    store.append(make_rows(), cell_key="good")
    if which == "json":
        os.mkfifo(store.cells_dir / "planted.json")
    else:
        (store.cells_dir / "good.csv").unlink()
        os.mkfifo(store.cells_dir / "good.csv")
    done = []
    t = threading.Thread(target=lambda: done.append(
        cli_error(["tables", "--results", str(store.root), "--out", str(tmp_path / "t")], capsys, "not a regular file")),
        daemon=True)
    t.start()
    t.join(60)
    if not done:  # unblock the reader before failing
        fd = os.open(store.cells_dir / f"{'planted' if which == 'json' else 'good'}.{which}", os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        pytest.fail("the reader blocked on a FIFO")


def test_cells_path_that_is_a_file_is_an_error(tmp_path, capsys):
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "cells").write_text("not a folder")
    with pytest.raises(ConfigError, match="is a file, not the folder of cells"):
        ResultsStore.for_reading(tmp_path / "store").load()
    cli_error(["tables", "--results", str(tmp_path / "store"), "--out", str(tmp_path / "t")], capsys, "not the folder")


# -- a store's identity --------------------------------------------------------------------
def test_store_identity_names_its_cells(tmp_path):
    a, b = ResultsStore(tmp_path / "a"), ResultsStore(tmp_path / "b")
    assert a.identity() == b.identity()  # both empty
    for s in (a, b):
        s.append(make_rows(), cell_key="c1")
    assert a.identity() == b.identity() and len(a.identity()) == 16
    b.append(make_rows(base=60.0), cell_key="c1")  # the same cell recomputed with other values
    assert a.identity() != b.identity()
    first = a.identity()
    a.append(make_rows(dataset="PubMed"), cell_key="c2")
    assert a.identity() != first
    a.discard("c2")
    assert a.identity() == first


# -- memory estimate before allocating -----------------------------------------------------
def test_too_large_training_is_refused_before_allocating(tmp_path, monkeypatch, capsys):
    import pace_nb.core.limits as limits
    import pace_nb.nn.training as training

    monkeypatch.setattr(limits, "available_memory", lambda device="cpu": 4 << 30)
    monkeypatch.setattr(training, "train_local", lambda *a, **k: pytest.fail("trained before the estimate"))
    # hidden 65536 on the demo graph: 50 models x 39.7 M parameters x 4 bytes x 3 copies = 23.7 GiB
    need = limits.training_bytes(50, 600, 65536, 6)
    assert need == 4 * (65536 * 600 + 65536 + 6 * 65536 + 6) * (3 * 50 + 4)
    (tmp_path / "g.toml").write_text('[[experiment]]\ndatasets = ["demo"]\nmethods = ["local"]\n'
                                     'train = { hidden = 65536 }\n')
    err = cli_error(["grid", str(tmp_path / "g.toml"), "--dry-run", "--results", str(tmp_path / "r")], capsys,
                    f"needs an estimated {need / 2**30:.1f} GiB")
    assert "3.2 GiB" in err  # 80 % of the 4 GiB available
    from pace_nb.methods.protocol import run_protocol
    from pace_nb.nn.training import TrainConfig

    with pytest.raises(ConfigError, match="train.hidden"):
        run_protocol("demo", num_clients=10, methods=["local"], train_config=TrainConfig(hidden=65536), progress=False)
