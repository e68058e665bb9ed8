"""Integrity faults a hostile or careless user can cause: each must be survived (issue 13).

One test per fault; the bad inputs that must become one ``pace-nb: error:`` line are in
``test_hostile_inputs.py``.
"""
from __future__ import annotations

import hashlib
import io
import json
import multiprocessing as mp

import numpy as np
import pandas as pd
import pytest
import torch
from torch_geometric.data import Data

from fake_results import make_rows
from hostile_helpers import Planted, cli_error, write_planetoid
from pace_nb.cli import main
from pace_nb.core.errors import BusyError, ConfigError, DataCorruptionError, NumericalError
from pace_nb.data import datasets as D
from pace_nb.data import federation as F
from pace_nb.data import graph_cache
from pace_nb.experiments import store as S
from pace_nb.experiments.store import ResultsStore

RUN = ["run", "--dataset", "demo", "--clients", "3", "--seeds", "104729", "--methods", "local", "--device", "cpu",
       "--no-progress"]


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("PACE_NB_CACHE", str(d))
    D._load_cached.cache_clear()
    F._build_named.cache_clear()
    yield d
    D._load_cached.cache_clear()
    F._build_named.cache_clear()


# -- 1. results never mixed or overwritten silently -------------------------------------------
def test_run_writes_no_store_unless_asked(tmp_path, monkeypatch, tmp_cache, capsys):
    monkeypatch.setenv("PACE_NB_RESULTS", str(tmp_path / "grid-store"))
    assert main(RUN) == 0
    assert not ResultsStore(tmp_path / "grid-store").keys()


def test_run_cells_keyed_by_data_seed_and_params_record_it(tmp_path, tmp_cache, capsys):
    store = tmp_path / "s"
    assert main(RUN + ["--data-seed", "7", "--store", str(store)]) == 0
    assert main(RUN + ["--data-seed", "2024", "--store", str(store)]) == 0
    st = ResultsStore(store)
    assert len(st.keys()) == 2                                   # the second run did not replace the first
    rows = st.pooled()
    assert sorted(json.loads(p)["data"]["seed"] for p in rows["params"]) == [7, 2024]
    assert all(json.loads(p)["train"]["lr"] == 0.01 for p in rows["params"])
    from pace_nb.analysis.summary import summarize

    with pytest.raises(ConfigError, match="mix 2 runs"):      # never averaged into one fake setting
        summarize(store)


def test_conflicting_duplicate_rows_name_both_cells(tmp_path):
    st = ResultsStore(tmp_path)
    st.append(make_rows(), cell_key="cell-a")
    st.append(make_rows(), cell_key="cell-b")                  # identical copy: collapsed
    assert len(st.load()) == len(make_rows())
    st.append(make_rows(seed_offset=0.5), cell_key="cell-c")  # same identity + params, other numbers
    with pytest.raises(DataCorruptionError, match="cell-a and cell-c.*acc"):
        st.load()


# -- 2./4. processed caches: no code execution, never stale -----------------------------------
def test_planted_processed_file_never_unpickled(tmp_path, tmp_cache):
    root = tmp_path / "raw-root"
    write_planetoid(root)
    marker = tmp_path / "pwned"
    buf = io.BytesIO()
    torch.save(Planted(marker), buf)                             # what torch.load(weights_only=False) would run
    old = tmp_cache / "pyg" / hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:10] / "Cora" / "processed"
    old.mkdir(parents=True)
    for f in ("data.pt", "pre_transform.pt", "pre_filter.pt"):
        (old / f).write_bytes(buf.getvalue())                           # where PyG's processed files used to live
    raw = graph_cache.raw_checksums(root / "Cora" / "raw", D.get_spec("Cora").files)
    npz, meta = graph_cache._paths("Cora", raw)
    npz.parent.mkdir(parents=True)
    with open(npz, "wb") as fh:
        np.save(fh, np.array([Planted(marker)], dtype=object), allow_pickle=True)
    meta.write_text(json.dumps({"version": graph_cache.CACHE_VERSION, "dataset": "Cora", "raw": raw,
                                "sha256": "x", "num_classes": 3}))
    with pytest.warns(RuntimeWarning, match="rebuilding"):
        d = D.load_dataset("Cora", root=root)
    assert not marker.exists()
    assert (d.num_nodes, d.num_classes) == (560, 3)
    D._load_cached.cache_clear()
    again = D.load_dataset("Cora", root=root)                   # now from the verified NPZ
    assert torch.equal(again.x, d.x) and torch.equal(again.edge_index, d.edge_index) and torch.equal(again.y, d.y)
    assert not marker.exists()


def test_repaired_raw_file_rebuilds_processed_graph(tmp_path, tmp_cache, capsys):
    root = tmp_path / "raw-root"
    raw = write_planetoid(root)
    good = D.load_dataset("Cora", root=root)
    f = raw / "ind.cora.graph"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])                        # truncated
    with pytest.raises(DataCorruptionError, match="ind.cora|cannot be read"):
        D.load_dataset("Cora", root=root)                       # not the stale cached graph
    cli_error(["partition", "--dataset", "Cora", "--data-root", str(root), "--clients", "3", "--no-cache"],
              capsys, "cannot be read")
    f.write_bytes(data)                                         # repaired
    fixed = D.load_dataset("Cora", root=root)
    assert torch.equal(fixed.edge_index, good.edge_index)


# -- 3. concurrent writers and readers -------------------------------------------------------
def _writer(root, i, n):
    st = ResultsStore(root)
    for j in range(n):
        st.append(make_rows(base=10.0 * i + j, receivers=False), cell_key="shared")


def _reader(root, n, out):
    st, bad = ResultsStore(root), 0
    for _ in range(n):
        try:
            st.load()
        except BusyError:
            pass
        except DataCorruptionError as exc:
            bad += 1
            out.put(str(exc))
    out.put(bad)


def test_concurrent_writers_never_corrupt_a_cell(tmp_path):
    ctx = mp.get_context("fork")
    root = tmp_path / "s"
    ResultsStore(root).append(make_rows(receivers=False), cell_key="shared")
    q = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(root, i, 25)) for i in range(3)]
    procs.append(ctx.Process(target=_reader, args=(root, 60, q)))
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert q.get(timeout=10) == 0                               # no reader was told the cell is corrupted
    rows = ResultsStore(root).load()
    assert len(rows) == 10 and rows["acc"].min() % 1 == pytest.approx(0.1)  # one whole version


def test_reader_waits_for_writer_and_never_says_delete(tmp_path, monkeypatch):
    from filelock import FileLock

    st = ResultsStore(tmp_path)
    st.append(make_rows(), cell_key="c")
    lock = FileLock(str(st.cells_dir / ".c.lock"))
    with lock:                                                   # another process is mid-write: new CSV, old manifest
        (st.cells_dir / "c.csv").write_bytes(make_rows(base=50).to_csv(index=False).encode())
        monkeypatch.setattr(S, "READ_WAIT", 0.2)
        with pytest.raises(BusyError, match="being written") as exc:
            st.load()
        assert "delete" not in str(exc.value)
    st.append(make_rows(base=50), cell_key="c")
    assert st.load()["acc"].min() == pytest.approx(50.1)


# -- 5. NaN training -------------------------------------------------------------------------
def test_nonfinite_loss_stops_training(tmp_cache):
    from pace_nb.data.federation import build_federated
    from pace_nb.nn.training import TrainConfig, train_local

    fg = build_federated("demo", "metis", 2, cache=False)
    with pytest.raises(NumericalError, match="non-finite at epoch 2"):
        train_local(fg, (1,), TrainConfig(epochs=4), extra_loss=lambda s: torch.tensor(float("nan") if s.epoch == 2 else 0.0),
                    device="cpu", progress=False)


# -- 6. grid --keep-going -------------------------------------------------------------------
def test_grid_keep_going_exits_nonzero_listing_failed_cells(tmp_path, tmp_cache, capsys):
    cfg = tmp_path / "g.toml"
    cfg.write_text('[[experiment]]\ndatasets = ["demo"]\nclients = [3, 2000]\nmethods = ["local"]\nseeds = [1]\n'
                   'train = { epochs = 2 }\n')
    rc = main(["grid", str(cfg), "--results", str(tmp_path / "r"), "--keep-going", "--device", "cpu"])
    err = capsys.readouterr().err
    assert rc == 1 and "1 cell(s) failed" in err and "K=2000" in err
    assert len(ResultsStore(tmp_path / "r").keys()) == 1       # the good cell is stored


# -- 7. path traversal ----------------------------------------------------------------------
def test_figures_dataset_cannot_escape_build(tmp_path, monkeypatch, capsys):
    import pace_nb.notebooks as nbr

    monkeypatch.setattr(nbr, "run_notebooks", lambda *a, **k: pytest.fail("ran before validating --dataset"))
    cli_error(["figures", "--dataset", "../../x", "--build", str(tmp_path / "b"), "--out", str(tmp_path / "f")],
              capsys, "unknown dataset")
    assert not list(tmp_path.parent.glob("x*"))


def test_data_name_cannot_escape_partition_cache(tmp_path, tmp_cache):
    data = D.make_demo()
    data = Data(x=data.x, edge_index=data.edge_index, y=data.y)
    data.name = "../../../escaped"
    F.build_federated(data, "metis", 3)
    written = [p for p in tmp_path.rglob("*escaped*")]
    assert written and all(tmp_cache / "partitions" in p.parents for p in written)


# -- partition cache with a valid checksum but invalid content -----------------------------
@pytest.mark.parametrize("defect", ["negative id", "split code 7", "empty client"])
def test_checksum_consistent_bad_partition_cache_is_rebuilt(tmp_cache, defect):
    fg = F.build_federated("demo", "metis", 3)
    npz, meta = F._cache_paths(fg.config)
    with np.load(npz) as z:
        arrays = {k: z[k].copy() for k in z.files}
    if defect == "negative id":
        arrays["nodes"][0] = -5
    elif defect == "split code 7":
        arrays["split"][3] = 7
    else:
        arrays["offsets"][1] = 0
    np.savez(npz, **arrays)
    info = json.loads(meta.read_text())
    meta.write_text(json.dumps({**info, "sha256": graph_cache.array_checksum(arrays)}))
    F._build_named.cache_clear()
    with pytest.warns(RuntimeWarning, match="rebuilding"):
        again = F.build_federated("demo", "metis", 3)
    for a, b in zip(fg.clients, again.clients, strict=True):
        assert torch.equal(a.global_ids, b.global_ids) and torch.equal(a.train_mask, b.train_mask)


# -- results cells: missing columns, stray files --------------------------------------------
def test_cell_with_missing_columns_is_reported(tmp_path):
    st = ResultsStore(tmp_path)
    st.append(make_rows(), cell_key="c")
    frame = pd.read_csv(st.cells_dir / "c.csv").drop(columns=["seed"])
    data = frame.to_csv(index=False).encode()
    (st.cells_dir / "c.csv").write_bytes(data)
    meta = json.loads((st.cells_dir / "c.json").read_text())
    (st.cells_dir / "c.json").write_text(json.dumps({**meta, "sha256": hashlib.sha256(data).hexdigest()}))
    with pytest.raises(DataCorruptionError, match="c.csv lacks column.*seed"):
        st.load()


def test_stray_files_in_cells(tmp_path, capsys):
    st = ResultsStore(tmp_path)
    st.append(make_rows(), cell_key="c")
    (st.cells_dir / "notes.txt").write_text("hello")
    (st.cells_dir / "sub").mkdir()
    assert len(st.load()) == len(make_rows())                   # non-manifest files are ignored
    (st.cells_dir / "stray.json").write_text('["not", "a", "manifest"]')
    with pytest.raises(DataCorruptionError, match="stray.json"):
        st.load()
    cli_error(["tables", "--results", str(tmp_path), "--out", str(tmp_path / "t")], capsys, "stray.json")
