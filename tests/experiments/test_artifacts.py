"""Stored figure data (experiments.artifacts): round trips, reading order, damage, no pickle."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import pace_nb.core.config as config
from pace_nb.experiments import artifacts as A
from pace_nb.viz import frames as views

FRAME = pd.DataFrame({"seed": [1, 1, 2], "acc": [0.5, 0.25, 1.0 / 3], "params": ['{"a": 1}', "{}", '{"b": [1, 2]}']})


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """A stand-in for the shipped results/ (the second reading store)."""
    d = tmp_path / "shipped"
    d.mkdir()
    monkeypatch.setattr(config, "shipped_results_dir", lambda: d)
    return d


def _counting(value):
    calls = []
    return calls, (lambda: calls.append(1) or value)


def test_frames_and_arrays_round_trip_and_are_read_not_recomputed(tmp_path, shipped):
    user = tmp_path / "user"
    calls, compute = _counting(FRAME)
    first = A.cached("01_x", "curves", {"dataset": "demo", "seeds": [1, 2]}, compute, user)
    again = A.cached("01_x", "curves", {"seeds": [1, 2], "dataset": "demo"}, compute, user)  # key order irrelevant
    assert len(calls) == 1
    pd.testing.assert_frame_equal(first, again)
    np.testing.assert_array_equal(again["acc"].to_numpy(), FRAME["acc"].to_numpy())  # float text round-trips exactly
    arrays = {"z": np.arange(12, dtype=np.float32).reshape(4, 3), "m": np.array([True, False, True, True])}
    calls, compute = _counting(arrays)
    A.cached("01_x", "logits", {"dataset": "demo"}, compute, user)
    got = A.cached("01_x", "logits", {"dataset": "demo"}, compute, user)
    assert len(calls) == 1 and got["z"].dtype == np.float32 and got["m"].dtype == bool
    np.testing.assert_array_equal(got["z"], arrays["z"])
    calls, compute = _counting(FRAME)  # other parameters: another entry
    A.cached("01_x", "curves", {"dataset": "demo", "seeds": [1]}, compute, user)
    assert len(calls) == 1
    meta = [json.loads(p.read_text()) for p in (user / "artifacts" / "01_x").glob("*.json")]
    assert sorted(m["name"] for m in meta) == ["curves", "curves", "logits"]
    assert all(m["version"] == A.ARTIFACT_VERSION for m in meta)


def test_reading_order_user_then_shipped_and_writes_go_to_the_user_store(tmp_path, shipped):
    user = tmp_path / "user"
    A.ArtifactStore(shipped).put("02_y", "spectra", {"dataset": "Cora"}, FRAME)
    calls, compute = _counting(FRAME.assign(acc=0.0))
    got = A.cached("02_y", "spectra", {"dataset": "Cora"}, compute, user)
    assert not calls and got["acc"].tolist() == FRAME["acc"].tolist()  # the shipped entry, no compute
    assert not (user / "artifacts").exists()  # reading writes nothing
    A.ArtifactStore(user).put("02_y", "spectra", {"dataset": "Cora"}, FRAME.assign(acc=9.0))
    assert A.cached("02_y", "spectra", {"dataset": "Cora"}, compute, user)["acc"].tolist() == [9.0] * 3
    fresh = A.cached("02_y", "spectra", {"dataset": "Cora"}, compute, user, recompute=True)
    assert calls == [1] and fresh["acc"].tolist() == [0.0] * 3
    assert [s.root for s in A.reading_stores(shipped)] == [shipped]  # given explicitly: the only store


@pytest.mark.parametrize("damage", ["flip", "truncate", "manifest", "pickle"])
def test_damaged_entries_warn_and_are_recomputed(tmp_path, shipped, damage):
    user = tmp_path / "user"
    store = A.ArtifactStore(user)
    value = {"z": np.ones(3)} if damage == "pickle" else FRAME
    store.put("03_z", "paths", {"dataset": "demo"}, value)
    meta_path = next((user / "artifacts" / "03_z").glob("*.json"))
    data_path = meta_path.with_suffix(".npz" if damage == "pickle" else ".csv")
    if damage == "flip":
        raw = bytearray(data_path.read_bytes())
        raw[5] ^= 1
        data_path.write_bytes(bytes(raw))
    elif damage == "truncate":
        data_path.write_bytes(data_path.read_bytes()[:10])
    elif damage == "manifest":
        meta_path.write_text("{not json")
    else:  # an object array only loads with pickle: it must never be unpickled
        import hashlib
        import io

        buf2 = io.BytesIO()
        np.savez(buf2, z=np.array([{"x": 1}], dtype=object))
        data_path.write_bytes(buf2.getvalue())
        meta = json.loads(meta_path.read_text())
        meta["sha256"] = hashlib.sha256(buf2.getvalue()).hexdigest()
        meta_path.write_text(json.dumps(meta))
    calls, compute = _counting(value)
    with pytest.warns(RuntimeWarning, match="damaged"):
        A.cached("03_z", "paths", {"dataset": "demo"}, compute, user)
    assert calls == [1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # repaired: read cleanly
        A.cached("03_z", "paths", {"dataset": "demo"}, compute, user)
    assert calls == [1]


def test_unwritable_store_keeps_the_value_and_says_so(tmp_path, shipped):
    blocker = tmp_path / "file"
    blocker.write_text("x")  # a file where the store's folder would be
    calls, compute = _counting(FRAME)
    with pytest.warns(RuntimeWarning, match="not stored"):
        got = A.cached("04_w", "rows", {}, compute, blocker)
    assert calls == [1] and got is FRAME
    with pytest.raises(TypeError, match="DataFrame or a mapping"):
        A.ArtifactStore(tmp_path).put("04_w", "bad", {}, [1, 2])


def test_receiver_logits_survive_storage():
    g = torch.Generator().manual_seed(0)
    zl = [torch.randn(n, 3, generator=g) for n in (4, 6)]
    lg = views.ReceiverLogits(zl, [z * 2 for z in zl], [torch.arange(n) % 3 for n in (4, 6)],
                              [torch.arange(n) < 2 for n in (4, 6)], [torch.arange(n) >= 2 for n in (4, 6)], {0: 0.25})
    back = views.ReceiverLogits.from_arrays(lg.to_arrays())
    assert back.alpha_star == {0: 0.25}
    for a, b in zip(lg.z_external + lg.y + lg.val_mask, back.z_external + back.y + back.val_mask, strict=True):
        assert torch.equal(a, b)
    pd.testing.assert_frame_equal(views.alpha_paths(lg, 5), views.alpha_paths(back, 5))


def test_entries_list_the_manifests_and_the_store_readme_shows_them(tmp_path, shipped):
    from pace_nb.analysis.store_readme import store_readme

    store = A.ArtifactStore(tmp_path)
    assert store.entries().empty
    store.put("02_y", "spectra", {"dataset": "Cora", "seeds": [1, 2, 3]}, FRAME)
    store.put("01_x", "logits", {"dataset": "demo"}, {"z": np.zeros(4)})
    (tmp_path / "artifacts" / "01_x" / "broken-0.json").write_text("{")  # damaged: left out of the listing
    e = store.entries()
    assert e[["notebook", "name", "format"]].values.tolist() == [["01_x", "logits", "npz"], ["02_y", "spectra", "csv"]]
    text = store_readme(pd.DataFrame(), {}, artifacts=e)
    assert "| `02_y` | spectra | Cora | 3 | csv |" in text and "| `01_x` | logits | demo | – | npz |" in text


def test_recompute_environment_computes_and_overwrites(tmp_path, shipped, monkeypatch):
    user = tmp_path / "user"
    calls, compute = _counting(FRAME)
    A.cached("05_v", "umap", {"dataset": "Cora"}, compute, user)
    monkeypatch.setenv(A.RECOMPUTE_ENV, "1")  # what `pace-nb figures --recompute` sets in the kernel
    A.cached("05_v", "umap", {"dataset": "Cora"}, compute, user)
    assert calls == [1, 1]
    monkeypatch.delenv(A.RECOMPUTE_ENV)
    A.cached("05_v", "umap", {"dataset": "Cora"}, compute, user)
    assert calls == [1, 1]


def test_figures_recompute_reaches_every_kernel_and_forces(tmp_path, monkeypatch):
    import os

    import papermill

    import pace_nb.notebooks as nbr

    seen = []

    def fake_papermill(src, out, **kw):  # what the kernel would see in its environment
        seen.append(os.environ.get(A.RECOMPUTE_ENV))
        Path(out).write_text("{}")

    monkeypatch.setattr(nbr, "ensure_kernel", lambda *a, **k: None)
    monkeypatch.setattr(papermill, "execute_notebook", fake_papermill)
    kw = dict(datasets=["demo"], figures_dir=tmp_path / "f", build_dir=tmp_path / "b", results_dir=str(tmp_path / "r"))
    nbr.run_notebooks(["04"], **kw)
    assert [r.status for r in nbr.run_notebooks(["04"], **kw)] == ["skipped"]
    assert [r.status for r in nbr.run_notebooks(["04"], recompute=True, **kw)] == ["executed"]  # implies force
    assert seen == [None, "1"] and os.environ.get(A.RECOMPUTE_ENV) is None


def test_relative_store_and_data_paths_reach_the_kernel_absolute(tmp_path, monkeypatch):
    """The kernel runs in notebooks/: a relative --results / --data-root must not be re-read from there."""
    import papermill

    import pace_nb.notebooks as nbr

    got = {}
    monkeypatch.setattr(nbr, "ensure_kernel", lambda *a, **k: None)
    monkeypatch.setattr(papermill, "execute_notebook",
                        lambda src, out, parameters, **kw: got.update(parameters) or Path(out).write_text("{}"))
    monkeypatch.chdir(tmp_path)
    nbr.run_notebooks(["06"], datasets=["demo"], figures_dir="f", build_dir="b", results_dir="store", data_root="raw")
    assert got["results_dir"] == str(tmp_path / "store") and got["data_root"] == str(tmp_path / "raw")
