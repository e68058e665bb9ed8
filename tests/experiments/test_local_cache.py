"""The on-disk Local-model cache: grids of different configs (and processes) share one Local training,
with every stored row bit for bit a fresh run's; a damaged entry is retrained, never served."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import pace_nb.nn.training as training
from pace_nb.experiments import local_cache
from pace_nb.experiments.grid import expand, parse_config
from pace_nb.experiments.runner import run_grid
from pace_nb.experiments.store import ResultsStore

A = ('[grid]\nseeds = [104729, 130363]\n[[experiment]]\ndatasets = ["demo"]\nclients = [3]\n'
     'methods = ["local", "pace"]\ntrain = { epochs = 4 }\n')
B = ('[grid]\nseeds = [104729, 130363]\n[[experiment]]\ndatasets = ["demo"]\nclients = [3]\n'
     'methods = ["local", "fedavg", "fedprox"]\ntrain = { epochs = 4 }\n')


@pytest.fixture
def counted(monkeypatch):
    calls: list[int] = []
    real = training.train_local
    monkeypatch.setattr(training, "train_local", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    return calls


def _rows(store, cfg):
    return {c.methods: store.rows_of(c.key).drop(columns="seconds").to_csv(index=False)
            for c in expand(parse_config(cfg)) if store.has(c.key)}


def test_a_second_config_reads_local_from_the_cache_with_identical_rows(tmp_path, counted, monkeypatch):
    run_grid(parse_config(A), ResultsStore(tmp_path / "a"), progress=False, device="cpu")
    assert len(counted) == 1 and len(list(local_cache.cache_folder().glob("*.npz"))) == 1
    cached = ResultsStore(tmp_path / "b")
    run_grid(parse_config(B), cached, progress=False, device="cpu")
    assert len(counted) == 1  # config B's Local came from config A's training
    monkeypatch.setenv("PACE_NB_LOCAL_CACHE", "off")
    fresh = ResultsStore(tmp_path / "fresh")
    run_grid(parse_config(B), fresh, progress=False, device="cpu")
    assert len(counted) == 2  # with the cache off, Local is trained
    assert _rows(cached, B) == _rows(fresh, B) and _rows(cached, B)


def test_round_trip_is_bitwise_and_checked(fg_local):
    key, local = fg_local
    assert local_cache.save(key, local)
    back = local_cache.load(key, local.seeds, local.num_clients, local.config)
    assert back is not None
    for k, v in local.params.items():
        assert torch.equal(back.params[k], v) and back.params[k].dtype == v.dtype
    for w, w_back in zip(local.init, back.init, strict=True):
        assert all(torch.equal(w[k], w_back[k]) for k in w)


@pytest.fixture
def fg_local():
    from demo_graphs import demo_fg

    local = training.train_local(demo_fg(), (104729, 130363), training.TrainConfig(epochs=2), device="cpu",
                                 progress=False)
    return local_cache.cache_key("setting", "data"), local


def test_a_mismatched_setting_is_not_served(fg_local):
    key, local = fg_local
    local_cache.save(key, local)
    with pytest.warns(RuntimeWarning, match="does not match"):
        assert local_cache.load(key, local.seeds, local.num_clients, training.TrainConfig(epochs=3)) is None
    assert not (local_cache.cache_folder() / f"{key}.npz").exists()  # removed: the next run retrains


def test_a_corrupted_entry_warns_and_is_retrained(tmp_path, counted):
    run_grid(parse_config(A), ResultsStore(tmp_path / "a"), progress=False, device="cpu")
    (npz,) = local_cache.cache_folder().glob("*.npz")
    with np.load(npz) as z:
        arrays = {k: z[k].copy() for k in z.files}
    first = sorted(arrays)[0]
    arrays[first].flat[0] += 1.0  # one flipped value, a well-formed file
    np.savez(npz, **arrays)
    with pytest.warns(RuntimeWarning, match="corrupted or mismatched"):
        run_grid(parse_config(B), ResultsStore(tmp_path / "b"), progress=False, device="cpu")
    assert len(counted) == 2
    npz.write_bytes(b"not a zip")
    with pytest.warns(RuntimeWarning, match="corrupted or mismatched"):
        run_grid(parse_config(B), ResultsStore(tmp_path / "c"), progress=False, device="cpu")
    assert len(counted) == 3
    info = json.loads(npz.with_suffix(".json").read_text())
    assert info["seeds"] == [104729, 130363] and info["config"]["epochs"] == 4  # rewritten after retraining


def test_the_key_follows_code_data_and_setting():
    k = local_cache.cache_key("setting", "data")
    assert k == local_cache.cache_key("setting", "data")
    assert len({k, local_cache.cache_key("setting", "other data"), local_cache.cache_key("other", "data")}) == 3
    assert len(local_cache.code_fingerprint()) == 16


def test_changed_code_gives_another_key(monkeypatch):
    k = local_cache.cache_key("setting", "data")
    monkeypatch.setattr(local_cache, "code_fingerprint", lambda: "0" * 16)
    assert local_cache.cache_key("setting", "data") != k


def test_the_cache_can_be_turned_off_or_moved(monkeypatch, tmp_path, fg_local):
    key, local = fg_local
    monkeypatch.setenv("PACE_NB_LOCAL_CACHE", "off")
    assert local_cache.cache_folder() is None and not local_cache.save(key, local)
    assert local_cache.load(key, local.seeds, local.num_clients, local.config) is None
    monkeypatch.setenv("PACE_NB_LOCAL_CACHE", str(tmp_path / "elsewhere"))
    assert local_cache.save(key, local) and (tmp_path / "elsewhere" / f"{key}.json").exists()
