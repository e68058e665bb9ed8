"""Ray scale-out of the grid (pace_nb.experiments.ray): same rows as serial, crash/failure recovery,
graph sharing, fail-fast addresses, and the install hint when Ray is absent.

One local Ray runtime (2 CPUs, loopback) is shared by the module; the tests that need no
runtime run first.  Skipped with a reason when Ray is not installed (``pip install -e .[ray]``),
except the install-hint tests, which simulate its absence.
"""
from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import socket
import sys
import time

import numpy as np
import pandas as pd
import pytest
import torch

from pace_nb import cli
from pace_nb.experiments import ray as dist
from pace_nb.core.errors import ConfigError
from pace_nb.experiments.grid import expand, parse_config
from pace_nb.experiments.runner import run_grid
from pace_nb.experiments.store import ResultsStore

HAS_RAY = importlib.util.find_spec("ray") is not None
#: seconds the shared local runtime may take to start (several of Ray's 30 s tries on a loaded machine)
RAY_STARTUP_S = 240.0
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="ray not installed: pip install -e .[ray] (CI installs .[test])")

# Two cells (one per run seed) that share ONE FederatedGraph: demo, Louvain K = 4.
TINY = """
[grid]
seeds = [104729, 130363]
data_seed = 2024
seed_batch = 1

[[experiment]]
datasets = ["demo"]
partitions = ["louvain"]
clients = [4]
methods = ["local", "pace"]
pace_variants = ["full"]
ranks = [6]
[experiment.train]
epochs = 20
"""
# Four cheap cells for the fake runners below.
FOUR = TINY.replace("seeds = [104729, 130363]", "seeds = [1, 2, 3, 4]")


def fake_runner(cell, fg=None):
    """Rows a real cell would give, computed from the cell alone (microseconds)."""
    rng = np.random.default_rng(cell.seeds[0])
    return pd.DataFrame({"dataset": cell.dataset, "partition": cell.partition, "num_clients": cell.num_clients,
                         "seed": cell.seeds[0], "method": list(cell.methods), "variant": "native", "rank": 0,
                         "receiver": -1, "acc": rng.random(len(cell.methods)) * 100, "pid": os.getpid()})


def crash_once_runner(cell, fg=None, *, flag: str):
    """Kills its own worker process the first time it sees seed 3 (creates the file ``flag``)."""
    if cell.seeds[0] == 3:
        try:
            fd = os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            os._exit(1)  # a worker dying mid-task (OOM killer, node loss …)
        except FileExistsError:
            pass
    return fake_runner(cell)


def failing_runner(cell, fg=None):
    if cell.seeds[0] == 2:
        raise RuntimeError("simulated numerical failure")
    return fake_runner(cell)


def _cells(text=FOUR):
    return expand(parse_config(text))


# -- no runtime needed -------------------------------------------------------------------
def test_without_ray_clear_install_hint(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(ConfigError, match=r"pip install -e \.\[ray\]"):
        dist.require_ray()
    cfg = tmp_path / "g.toml"
    cfg.write_text(FOUR)
    assert cli.main(["grid", str(cfg), "--ray", "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pace-nb: error:") and "pip install -e .[ray]" in err and "\n" not in err
    assert not (tmp_path / "r" / "cells").exists()  # nothing ran


def test_cli_ray_workers_needs_ray(tmp_path, capsys):
    cfg = tmp_path / "g.toml"
    cfg.write_text(FOUR)
    assert cli.main(["grid", str(cfg), "--ray-workers", "2", "--results", str(tmp_path / "r")]) == 2
    assert "--ray-workers needs --ray" in capsys.readouterr().err


@pytest.mark.parametrize("address, kind", [(None, "local"), ("local", "local"), ("auto", "auto"),
                                           ("10.0.0.5:6379", "gcs"), ("ray://head:10001", "client"),
                                           ("ray://[::1]:10001", "client")])
def test_parse_address(address, kind):
    assert dist.parse_address(address)[0] == kind


@pytest.mark.parametrize("address", ["ray://head", "head:port", "ray://:10001", "head:70000"])
def test_parse_address_rejects_bad(address):
    with pytest.raises(ConfigError, match="bad Ray address"):
        dist.parse_address(address)


def test_options_validated():
    with pytest.raises(ConfigError, match="--ray-workers"):
        dist.RayOptions(workers=0)
    with pytest.raises(ConfigError, match="fraction"):
        dist.RayOptions(gpus_per_task=1.5)


class _FakeRay:
    def __init__(self, resources):
        self.res = resources

    def cluster_resources(self):
        return self.res


def test_task_resources_cpu_and_gpu_fraction():
    cell = _cells()[0]
    ex = dist.RayExecutor(dist.RayOptions(cpus_per_task=1, gpus_per_task=0.25))
    assert ex._resources(_FakeRay({"CPU": 8}), cell) == {"num_cpus": 1}
    assert ex._resources(_FakeRay({"CPU": 8, "GPU": 2}), cell) == {"num_cpus": 1, "num_gpus": 0.25}  # auto
    ex.bind(device="cpu")
    assert ex._resources(_FakeRay({"CPU": 8, "GPU": 2}), cell) == {"num_cpus": 1}
    ex.bind(device="cuda")
    with pytest.raises(ConfigError, match="no GPU"):
        ex._resources(_FakeRay({"CPU": 8}), cell)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_ray
@pytest.mark.parametrize("scheme", ["ray://", ""])
def test_unreachable_address_fails_fast(scheme):
    import ray

    assert not ray.is_initialized()
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"cannot reach a Ray cluster at 127\.0\.0\.1:\d+") as err:
        dist.connect(dist.RayOptions(address=f"{scheme}127.0.0.1:{_free_port()}"))
    assert time.perf_counter() - t0 < 5 and "\n" not in str(err.value)
    assert not ray.is_initialized()


def test_probe_timeout_is_bounded(monkeypatch):
    def black_hole(addr, timeout):
        time.sleep(timeout)
        raise TimeoutError("timed out")

    monkeypatch.setattr(dist.socket, "create_connection", black_hole)
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"cannot reach a Ray cluster at head:10001 \(timed out within 0\.2 s\)"):
        dist.probe("head", 10001, 0.2)
    assert time.perf_counter() - t0 < 2


def test_join_that_never_answers_is_bounded():
    """A TCP endpoint that accepts but never speaks Ray: ray.init would wait minutes."""
    import threading

    release = threading.Event()

    class SilentRay:
        __version__ = "x"

        def init(self, **kw):
            release.wait(30)

    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match="did not answer within 0.3 s"):
        dist._init_bounded(SilentRay(), 0.3, address="10.0.0.9:6379")
    assert time.perf_counter() - t0 < 2
    release.set()


@needs_ray
def test_auto_without_cluster_fails_fast(monkeypatch, tmp_path):
    import ray

    from ray._private import services

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    # Ray's "auto" also joins ANY Ray instance found on this machine (e.g. another test run's);
    # pretend there is none, as on a fresh machine
    monkeypatch.setattr(services, "find_gcs_addresses", lambda: [])
    monkeypatch.setattr(services, "find_bootstrap_address", lambda temp_dir: None)
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match="no running Ray cluster"):
        dist.connect(dist.RayOptions(address="auto"))
    assert time.perf_counter() - t0 < 10 and not ray.is_initialized()


def test_local_start_retried_until_its_timeout_then_one_line_naming_the_load(monkeypatch):
    """Ray waits a fixed 30 s for its raylet; a busy machine gets more tries until startup_timeout."""
    class SlowRay:
        def __init__(self, fails):
            self.fails, self.calls = fails, 0

        def is_initialized(self):
            return False

        def init(self, **kw):
            self.calls += 1
            if self.calls <= self.fails:
                raise Exception("The current node timed out during startup.")

        def shutdown(self):
            pass

    clock = iter(range(0, 10_000, 30))  # each try "takes" Ray's 30 s
    monkeypatch.setattr(dist.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(dist, "_loopback_only", lambda ray: contextlib.nullcontext())
    ray = SlowRay(fails=3)
    monkeypatch.setattr(dist, "require_ray", lambda: ray)
    assert dist.connect(dist.RayOptions(workers=1, startup_timeout=120)) is True and ray.calls == 4
    ray = SlowRay(fails=99)
    monkeypatch.setattr(dist, "require_ray", lambda: ray)
    with pytest.raises(ConfigError, match=r"did not start within 60 s \(The current node timed out.*load average"):
        dist.connect(dist.RayOptions(workers=1, startup_timeout=60))
    assert ray.calls == 2  # tries at 0 s and 30 s; at 60 s the time is up
    with pytest.raises(ConfigError, match="startup_timeout"):
        dist.RayOptions(startup_timeout=0)


# -- one shared local runtime ----------------------------------------------------------
@pytest.fixture(scope="module")
def ray_runtime():
    if not HAS_RAY:
        pytest.skip("ray not installed: pip install -e .[ray]")
    import ray
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/
    try:  # a shared, loaded 2-core machine may need several of Ray's 30 s start-up tries
        assert dist.connect(dist.RayOptions(workers=2, startup_timeout=RAY_STARTUP_S)) is True
    except ConfigError as exc:
        if "did not start" not in str(exc):
            raise
        pytest.skip(f"machine too loaded for a local Ray runtime ({dist.load_note()}): {exc}")
    # loopback only: the runtime advertises 127.0.0.1
    assert ray.util.get_node_ip_address() == "127.0.0.1"
    assert ray.cluster_resources()["CPU"] == 2
    yield ray
    ray.shutdown()


def _ray_ex(**kw):
    return dist.RayExecutor(dist.RayOptions(workers=2, **kw))


def test_serial_and_ray_rows_identical_bit_for_bit(ray_runtime, tmp_path, capsys, monkeypatch):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY)
    serial, par = ResultsStore(tmp_path / "serial"), ResultsStore(tmp_path / "ray")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the Ray workers; two threads crawl on a shared 2-core machine
    try:
        run_grid(str(cfg), serial, progress=False)
    finally:
        torch.set_num_threads(threads)
    made = []
    monkeypatch.setattr(dist, "make_executor", lambda *a, **k: made.append(dist.RayExecutor(
        dist.RayOptions(*a, **k))) or made[-1])
    assert cli.main(["grid", str(cfg), "--ray", "--ray-workers", "2", "--results", str(par.root)]) == 0
    assert "ran 2" in capsys.readouterr().out
    assert made[0].options.workers == 2 and made[0].stats["graphs"] == 1  # one graph, shipped to both tasks
    assert serial.keys() == par.keys() and len(serial.keys()) == 2
    for key in serial.keys():  # cell by cell, every column but the wall time
        a, b = (s._read_cell(key).drop(columns="seconds") for s in (serial, par))
        pd.testing.assert_frame_equal(a, b, check_exact=True)
        assert len(a) > 0 and a["acc"].notna().all()


def test_graph_built_once_per_group_and_shared(ray_runtime):
    built = []

    def build(cell, data_root):
        built.append(cell.key)
        return {"x": np.arange(1000, dtype=np.float64) * cell.num_clients}

    def fn(cell, fg=None):
        return cell.key, float(fg["x"].sum())

    text = FOUR.replace("clients = [4]", "clients = [3, 4]")  # 2 graphs × 4 seeds
    cells = _cells(text)
    ex = _ray_ex()
    ex.build_graph = build
    ex.bind(share_graphs=True)
    out = dict(ex.map(fn, cells))
    assert len(built) == 2 and ex.stats["graphs"] == 2
    assert out == {c.key: float(np.arange(1000).sum() * c.num_clients) for c in cells}
    # without sharing (a custom runner), fn is called as fn(cell) and nothing is built
    ex.bind(share_graphs=False)
    assert sorted(k for k, _ in ex.map(lambda c, fg=None: (c.key, fg), cells)) == sorted(c.key for c in cells)
    assert len(built) == 2


def test_killed_worker_is_retried_every_cell_once(ray_runtime, tmp_path):
    flag = tmp_path / "crashed"
    cells = _cells()
    store = ResultsStore(tmp_path / "r")
    runner = functools.partial(crash_once_runner, flag=str(flag))
    report = run_grid(parse_config(FOUR), store, executor=_ray_ex(), runner=runner, progress=False)
    assert flag.exists()  # a worker really died mid-grid …
    assert report.count("ran") == 4 and sorted(store.keys()) == sorted(c.key for c in cells)
    rows = store.load()
    assert len(rows) == 4 * 2 and not rows.duplicated(["seed", "method"]).any()
    assert (rows.loc[rows.seed == 3, "pid"] != int(flag.read_text())).all()  # … and another one redid its cell


def test_failing_cell_reported_then_rerun_completes_only_it(ray_runtime, tmp_path):
    store = ResultsStore(tmp_path / "r")
    ex = _ray_ex(app_retries=1)
    with pytest.raises(dist.CellsFailedError, match=r"1 of 4 grid cells failed .*simulated numerical failure") as err:
        run_grid(parse_config(FOUR), store, executor=ex, runner=failing_runner, progress=False)
    assert err.value.failures[0].attempts == 2  # one application-level retry
    assert len(store.keys()) == 3  # the other cells were stored
    report = run_grid(parse_config(FOUR), store, executor=_ray_ex(), runner=fake_runner, progress=False)
    assert report.count("ran") == 1 and report.count("done") == 3 and len(store.keys()) == 4


def test_interrupted_ray_grid_resumes_missing_cells_only(ray_runtime, tmp_path):
    class Interrupting(ResultsStore):
        def append(self, rows, cell_key=None, cell=None, **kw):
            if len(self.keys()) == 2:
                raise KeyboardInterrupt
            return super().append(rows, cell_key, cell, **kw)

    root = tmp_path / "r"
    with pytest.raises(KeyboardInterrupt):
        run_grid(parse_config(FOUR), Interrupting(root), executor=_ray_ex(), runner=fake_runner, progress=False)
    assert ray_runtime.is_initialized()  # a joined runtime is left alone; in-flight tasks cancelled
    store = ResultsStore(root)
    first = set(store.keys())
    assert len(first) == 2
    report = run_grid(parse_config(FOUR), store, executor=_ray_ex(), runner=fake_runner, progress=False)
    assert report.count("ran") == 2 and {r["key"] for r in report.records if r["status"] == "ran"}.isdisjoint(first)
    assert len(store.load()) == 4 * 2
