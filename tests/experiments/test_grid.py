"""Grid configs: validation with line numbers, cell expansion, resumable kill-safe runs."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

from fake_results import make_rows
from pace_nb.cli import main
from pace_nb.core.errors import ConfigError, MissingDataError
from pace_nb.experiments.grid import Cell, expand, load_config, parse_config
from pace_nb.experiments.runner import run_grid
from pace_nb.experiments.store import ResultsStore

ROOT = Path(__file__).resolve().parents[2]
METHODS = ["local", "pace", "fedavg", "fedprox"]

GRID = """\
[grid]
seeds = [1, 2, 3, 4]
seed_batch = 2

[[experiment]]
datasets = ["demo"]
partitions = ["louvain", "dirichlet"]
beta = [0.5, 0.1]
clients = [3, 4]
methods = ["local", "pace", "fedavg"]
method_groups = [["local", "pace"], ["fedavg"]]
"""


def fake_runner(cell: Cell) -> pd.DataFrame:
    methods = {(m, "full" if m == "pace" else "native", 6 if m == "pace" else 0): float(i)
               for i, m in enumerate(cell.methods)}
    return make_rows(dataset=cell.dataset, partition=cell.partition, num_clients=cell.num_clients,
                     seeds=cell.seeds, methods=methods, beta=cell.beta)


def _never(cell):
    raise AssertionError("no cell may run")


def test_expand_cells_and_stable_keys():
    cfg = parse_config(GRID)
    cells = expand(cfg, METHODS)
    # datasets 1 x (louvain + dirichlet x 2 betas) x K 2 x seed batches 2 x groups 2
    assert len(cells) == 1 * 3 * 2 * 2 * 2
    assert {c.seeds for c in cells} == {(1, 2), (3, 4)}
    assert {c.methods for c in cells} == {("local", "pace"), ("fedavg",)}
    assert {c.beta for c in cells if c.partition == "dirichlet"} == {0.5, 0.1}
    assert all(c.beta is None for c in cells if c.partition == "louvain")
    assert [c.key for c in cells] == [c.key for c in expand(parse_config(GRID), METHODS)]
    assert len({c.key for c in cells}) == len(cells)
    yaml_cfg = parse_config("experiment:\n  - datasets: [demo]\n    methods: [local, pace]\n    seeds: [7]\n", fmt="yaml")
    (cell,) = expand(yaml_cfg, METHODS)
    assert (cell.dataset, cell.partition, cell.num_clients, cell.seeds) == ("demo", "louvain", 10, (7,))
    assert cell.data_seed == 2024


def test_a_list_of_data_seeds_gives_one_set_of_cells_per_draw():
    one = expand(parse_config(GRID.replace("seed_batch = 2", "seed_batch = 2\ndata_seed = 7")), METHODS)
    many = expand(parse_config(GRID.replace("seed_batch = 2", "seed_batch = 2\ndata_seed = [7, 8, 9]")), METHODS)
    assert {c.data_seed for c in one} == {7}
    assert len(many) == 3 * len(one) and {c.data_seed for c in many} == {7, 8, 9}
    assert len({c.key for c in many}) == len(many)
    assert {c.key for c in one} <= {c.key for c in many}  # the first draw keeps its cells' keys
    per_exp = GRID + 'data_seed = [11, 12]\n'
    assert {c.data_seed for c in expand(parse_config(per_exp), METHODS)} == {11, 12}
    with pytest.raises(ConfigError, match="data_seed"):
        expand(parse_config(GRID.replace("seed_batch = 2", "seed_batch = 2\ndata_seed = [7, 7]")), METHODS)


@pytest.mark.parametrize("bad, line, match", [
    ('datasets = ["demo", "Coraa"]', 5, "unknown dataset 'Coraa'"),
    ('partitions = ["louvian"]', 6, r"\[\[experiment\]\] partitions must be one of 'louvain', .*, got 'louvian'"),
    ('methods = ["local", "FedFoo"]', 7, "unknown method 'fedfoo'"),
    ('pace_variants = ["fulll"]', 8, r"\[\[experiment\]\] pace_variants must be one of 'full', .*, got 'fulll'"),
    ('colour = "red"', 8, "unknown key 'colour'"),
    ('clients = [1]', 8, r"\[\[experiment\]\] clients must be an int in \[2, "),
])
def test_validation_names_the_line(tmp_path, bad, line, match):
    lines = ["[grid]", "seeds = [1]", "", "[[experiment]]", 'datasets = ["demo"]', 'partitions = ["louvain"]',
             'methods = ["local", "pace"]']
    key = bad.split(" =")[0]
    idx = next((i for i, ln in enumerate(lines) if ln.startswith(key + " =")), None)
    if idx is None:
        lines.append(bad)
    else:
        lines[idx] = bad
    path = tmp_path / "bad.toml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=match) as err:
        run_grid(path, ResultsStore(tmp_path / "r"), runner=_never, known_methods=METHODS)
    assert f"bad.toml:{line}:" in str(err.value)


def test_whole_config_validated_before_any_work(tmp_path):
    text = GRID + '\n[[experiment]]\ndatasets = ["demo"]\nmethods = ["nope"]\n'
    with pytest.raises(ConfigError, match=r":15: unknown method 'nope'"):
        run_grid(parse_config(text), ResultsStore(tmp_path), runner=_never, known_methods=METHODS)
    assert ResultsStore(tmp_path).keys() == []
    with pytest.raises(ConfigError, match="unknown section 'experiments'"):
        expand(parse_config('[[experiments]]\ndatasets = ["demo"]\n'), METHODS)
    with pytest.raises(ConfigError, match="cannot parse TOML"):
        parse_config("[grid\n")


def test_run_resume_no_duplicates_and_executor(tmp_path):
    store = ResultsStore(tmp_path)
    cfg = parse_config(GRID)
    rep = run_grid(cfg, store, runner=fake_runner, known_methods=METHODS, progress=False)
    assert rep.count("ran") == 24 and len(store.keys()) == 24
    n = len(store.load())
    calls = []
    rep2 = run_grid(cfg, store, runner=lambda c: calls.append(c) or fake_runner(c), known_methods=METHODS)
    assert rep2.count("done") == 24 and not calls and len(store.load()) == n
    with ThreadPoolExecutor(2) as pool:  # any executor with .map works
        store2 = ResultsStore(tmp_path / "pool")
        run_grid(cfg, store2, executor=pool, runner=fake_runner, known_methods=METHODS, progress=False)
    pd.testing.assert_frame_equal(store2.load(), store.load())
    dry = run_grid(cfg, ResultsStore(tmp_path / "dry"), dry_run=True, runner=_never, known_methods=METHODS)
    assert dry.count("planned") == 24 and not ResultsStore(tmp_path / "dry").keys()


def test_failing_cell_stops_or_is_reported_with_keep_going(tmp_path):
    def flaky(cell):
        if cell.num_clients == 4 and cell.methods == ("fedavg",):
            raise RuntimeError("boom")
        return fake_runner(cell)

    cfg = parse_config(GRID)
    with pytest.raises(RuntimeError, match="boom"):
        run_grid(cfg, ResultsStore(tmp_path / "a"), runner=flaky, known_methods=METHODS, progress=False)
    assert 0 < len(ResultsStore(tmp_path / "a").keys()) < 24  # finished cells stay saved
    rep = run_grid(cfg, ResultsStore(tmp_path / "b"), runner=flaky, known_methods=METHODS, progress=False,
                   keep_going=True)
    assert rep.count("failed: RuntimeError: boom") == 6 and rep.count("ran") == 18
    assert len(ResultsStore(tmp_path / "b").keys()) == 18


def test_missing_raw_files_reported_not_run(tmp_path):
    cfg = parse_config('[[experiment]]\ndatasets = ["Cora", "demo"]\nmethods = ["local"]\nseeds = [1]\n')
    rep = run_grid(cfg, ResultsStore(tmp_path), runner=fake_runner, data_root=tmp_path / "nodata",
                   known_methods=METHODS, progress=False)
    status = rep.frame().set_index("label").status
    assert status.str.startswith("not run: raw files missing").sum() == 1 and rep.count("ran") == 1
    assert "nodata" in status.iloc[0]
    with pytest.raises(MissingDataError, match="Cora"):
        run_grid(cfg, ResultsStore(tmp_path / "s"), runner=_never, data_root=tmp_path / "nodata", strict=True,
                 known_methods=METHODS)


SCRIPT = textwrap.dedent("""
    import sys, time
    sys.path[:0] = [{tests!r}, {root!r}]
    from test_grid import fake_runner, GRID, METHODS
    from pace_nb.experiments.grid import parse_config
    from pace_nb.experiments.runner import run_grid
    from pace_nb.experiments.store import ResultsStore
    def slow(cell):
        time.sleep(0.25)
        return fake_runner(cell)
    run_grid(parse_config(GRID), ResultsStore({store!r}), runner=slow, known_methods=METHODS, progress=False)
""")


def test_sigkill_midway_then_rerun_completes_exactly_once(tmp_path):
    store_dir = tmp_path / "store"
    here = Path(__file__).resolve().parent
    script = SCRIPT.format(tests=str(here), root=str(here.parent), store=str(store_dir))
    env = {**os.environ, "PACE_NB_PROGRESS": "0"}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=ROOT)
    store = ResultsStore(store_dir)
    deadline = time.time() + 60
    while len(store.keys()) < 3 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(store.keys())
    assert 3 <= done < 24, "the kill should land midway"
    rep = run_grid(parse_config(GRID), store, runner=fake_runner, known_methods=METHODS, progress=False)
    assert rep.count("done") == done and rep.count("ran") == 24 - done
    rows = store.load(dedupe=False)
    cells = store.cells()
    assert len(cells) == 24 and cells.key.is_unique
    expected = sum(len(fake_runner(c)) for c in expand(parse_config(GRID), METHODS))
    assert len(rows) == expected
    assert not rows.duplicated(["dataset", "partition", "beta", "num_clients", "seed", "method", "variant",
                                "rank", "receiver"]).any()
    run_grid(parse_config(GRID), store, runner=_never, known_methods=METHODS)
    assert len(store.load(dedupe=False)) == expected


def test_cli_grid_dry_run_json_and_errors(tmp_path, capsys):
    cfg = tmp_path / "g.toml"
    cfg.write_text('[[experiment]]\ndatasets = ["demo"]\nmethods = ["local", "pace"]\nseeds = [1, 2]\n')
    out = tmp_path / "r.json"
    assert main(["grid", str(cfg), "--results", str(tmp_path / "res"), "--dry-run", "--json", str(out)]) == 0
    rec = json.loads(out.read_text())["cells"]
    assert len(rec) == 1 and rec[0]["status"] == "planned"
    cfg.write_text('[[experiment]]\ndatasets = ["demo"]\nmethods = ["lokal"]\n')
    assert main(["grid", str(cfg), "--results", str(tmp_path / "res")]) == 2
    assert "g.toml:3: unknown method 'lokal'" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "configs").glob("*.toml")))
def test_shipped_configs_are_valid(name):
    cells = expand(load_config(ROOT / "configs" / name))  # against the live method registry
    assert cells and len({c.key for c in cells}) == len(cells)


def test_a_shipped_config_by_name_from_any_folder(tmp_path, monkeypatch, capsys):
    from pace_nb.core.config import shipped_configs

    shipped = shipped_configs()
    assert {"quick", "pace_main", "spear_comparison"} <= set(shipped)
    monkeypatch.chdir(tmp_path)  # no configs/ here: the names resolve to the shipped configs
    for name in ("quick", "quick.toml", "configs/quick.toml"):
        assert load_config(name).path == str(shipped["quick"])
    (tmp_path / "quick.toml").write_text('[grid]\nseeds = [1]\n[[experiment]]\ndatasets = ["demo"]\n'
                                         'methods = ["local"]\n', encoding="utf-8")
    assert load_config("quick.toml").path == "quick.toml"  # a file of the user's own comes first
    assert main(["grid", "pace_main", "--dry-run", "--results", str(tmp_path / "res")]) == 0
    assert str(shipped["pace_main"]) in capsys.readouterr().out
    assert main(["grid", "nope", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "shipped configs: " in err and "quick" in err


def test_real_demo_cell(tmp_path):
    """One real cell through run_protocol on the embedded demo graph (short training)."""
    cfg = parse_config('[[experiment]]\ndatasets = ["demo"]\nclients = [3]\nmethods = ["local", "pace"]\n'
                       'seeds = [104729]\ntrain = { epochs = 3 }\n')
    store = ResultsStore(tmp_path)
    rep = run_grid(cfg, store, progress=False, device="cpu")
    assert rep.count("ran") == 1
    pooled = store.pooled()
    assert set(pooled.method) == {"local", "pace"} and set(pooled.seed) == {104729}
    assert len(store.receivers(method="pace")) == 3
    assert pooled.acc.between(0, 100).all()


def test_spear_robustness_cells_record_the_perturbation_scope():
    from pace_nb.experiments.grid import expand, parse_config

    cells = expand(parse_config('[[spear]]\ndatasets = ["Cora"]\nrobustness = true\n'))
    assert {json.loads(c.options)["scope"] for c in cells} == {"clients"}
    glob = expand(parse_config('[[spear]]\ndatasets = ["Cora"]\nrobustness = true\nscope = "global"\n'))
    assert {json.loads(c.options)["scope"] for c in glob} == {"global"} and glob[0].key != cells[0].key
    with pytest.raises(ConfigError, match="perturbation scope"):
        expand(parse_config('[[spear]]\ndatasets = ["Cora"]\nrobustness = true\nscope = "server"\n'))


def test_method_groups_share_one_local_training_with_identical_rows(tmp_path, monkeypatch):
    """A setting's method groups train Local once (LocalReuse); every row equals a fresh run's."""
    import pace_nb.nn.training as training
    from pace_nb.experiments.cells import run_cell

    cfg = parse_config('[grid]\nseeds = [104729, 130363]\n[[experiment]]\ndatasets = ["demo"]\nclients = [3, 4]\n'
                       'methods = ["local", "pace", "fedavg", "fedprox"]\n'
                       'method_groups = [["local", "pace"], ["fedavg"], ["fedprox"]]\ntrain = { epochs = 4 }\n')
    calls = []
    real = training.train_local
    monkeypatch.setattr(training, "train_local", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    store = ResultsStore(tmp_path)
    assert run_grid(cfg, store, progress=False, device="cpu").count("ran") == 6
    assert len(calls) == 2  # one Local training per setting (K = 3, K = 4), not one per cell
    calls.clear()
    fresh = ResultsStore(tmp_path / "fresh")  # a runner of its own: each cell trains Local inside run_protocol
    run_grid(cfg, fresh, progress=False, runner=lambda c: run_cell(c, device="cpu"))
    assert len(calls) == 6
    for cell in expand(cfg):
        a, b = (s.rows_of(cell.key).drop(columns="seconds") for s in (store, fresh))
        assert a.to_csv(index=False) == b.to_csv(index=False)


def test_experiments_of_one_setting_share_local_across_the_config(tmp_path, monkeypatch):
    """Two experiments listing the same setting (a table's variants) are run consecutively by setting
    (by_setting), so Local is trained once per setting, not once per experiment."""
    import pace_nb.nn.training as training
    from pace_nb.experiments.cells import by_setting

    text = ('[grid]\nseeds = [104729]\n[[experiment]]\nname = "a"\ndatasets = ["demo"]\nclients = [3, 4]\n'
            'methods = ["local", "pace"]\ntrain = { epochs = 3 }\n'
            '[[experiment]]\nname = "b"\ndatasets = ["demo"]\nclients = [3, 4]\nmethods = ["local", "pace"]\n'
            'pace_variants = ["transport"]\ntrain = { epochs = 3 }\n')
    cells = expand(parse_config(text))
    assert [c.num_clients for c in cells] == [3, 4, 3, 4]
    ordered = by_setting(cells)
    assert [c.num_clients for c in ordered] == [3, 3, 4, 4] and sorted(ordered, key=cells.index) == cells
    calls = []
    real = training.train_local
    monkeypatch.setattr(training, "train_local", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    assert run_grid(parse_config(text), ResultsStore(tmp_path), progress=False, device="cpu").count("ran") == 4
    assert len(calls) == 2


def test_two_grids_on_one_store_share_the_cells(tmp_path):
    """Each cell is claimed while computed: two concurrent grids run every cell exactly once."""
    import threading

    from pace_nb.experiments.runner import DONE_ELSEWHERE, RUNNING_ELSEWHERE

    cfg = parse_config(GRID)
    store = ResultsStore(tmp_path)
    ran, lock = [], threading.Lock()

    def slow(cell):
        with lock:
            ran.append(cell.key)
        time.sleep(0.15)
        return fake_runner(cell)

    reports = [None, None]

    def go(i):
        reports[i] = run_grid(cfg, ResultsStore(tmp_path), runner=slow, progress=False)

    threads = [threading.Thread(target=go, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join()
    keys = [c.key for c in expand(cfg, METHODS)]
    assert sorted(ran) == sorted(keys)  # every cell computed once, none twice
    assert reports[0].count("ran") + reports[1].count("ran") == len(keys)
    assert reports[0].count("ran") > 0 and reports[1].count("ran") > 0  # both did work
    others = [r["status"] for rep in reports for r in rep.records if r["status"] != "ran"]
    assert others and set(others) <= {DONE_ELSEWHERE, RUNNING_ELSEWHERE}
    assert sorted(store.keys()) == sorted(keys)
    # a claim held by a live process makes the cell "running elsewhere"; released, the cell runs
    store2 = ResultsStore(tmp_path / "b")
    (first, *_) = expand(cfg, METHODS)
    held = store2.claim(first.key)
    rep = run_grid(cfg, store2, runner=fake_runner, progress=False)
    assert {r["key"]: r["status"] for r in rep.records}[first.key] == RUNNING_ELSEWHERE
    held.release()
    assert run_grid(cfg, store2, runner=fake_runner, progress=False).count("ran") == 1


def test_cli_grid_workers_share_one_store_and_equal_one_process(tmp_path, capsys):
    """``--workers 2``: two single-threaded grid processes fill one store, every cell exactly once, the
    rows those of one process (the seconds aside); settings stay whole, worker 1 starting half-way."""
    cfg = tmp_path / "w.toml"
    cfg.write_text('[grid]\nseeds = [1, 2]\n\n[[experiment]]\ndatasets = ["demo"]\ntrain = { epochs = 3 }\n'
                   'partitions = ["louvain", "metis"]\nclients = [3, 4]\nmethods = ["local", "pace", "fedavg"]\n'
                   'method_groups = [["local", "pace"], ["fedavg"]]\n')
    env = {"PACE_NB_PROGRESS": "0"}
    assert main(["grid", str(cfg), "--results", str(tmp_path / "one")]) == 0
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        assert main(["grid", str(cfg), "--results", str(tmp_path / "two"), "--workers", "2"]) == 0
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    out = capsys.readouterr().out
    assert "8 cells" in out and "failed 0" in out and "planned 0" in out
    one, two = ResultsStore(tmp_path / "one"), ResultsStore(tmp_path / "two")
    assert sorted(two.keys()) == sorted(one.keys()) and len(two.keys()) == 8
    key = ["dataset", "partition", "num_clients", "seed", "method", "variant", "rank", "receiver"]
    a, b = (s.load(dedupe=False).drop(columns=["seconds"]).sort_values(key).reset_index(drop=True) for s in (one, two))
    assert not b.duplicated(key).any()
    pd.testing.assert_frame_equal(a, b)
    assert main(["grid", str(cfg), "--results", str(tmp_path / "two"), "--workers", "0"]) == 2
    assert "--workers must be >= 1" in capsys.readouterr().err


def test_run_grid_start_rotates_the_cells_left_and_keeps_settings_whole(tmp_path):
    """Worker i of N begins at the i/N-th cell left and wraps around: all cells once, in config order
    from there, so a setting's method groups stay consecutive (one Local training per process)."""
    seen = []

    def record(cell):
        seen.append(cell.key)
        return fake_runner(cell)

    cells = expand(parse_config(GRID), METHODS)
    run_grid(parse_config(GRID), ResultsStore(tmp_path / "s"), runner=record, known_methods=METHODS, progress=False,
             start=0.5)
    keys = [c.key for c in cells]
    assert seen == keys[12:] + keys[:12]


def test_a_setting_being_computed_elsewhere_is_left_to_that_process_until_the_end(tmp_path):
    """When another process computes a cell, this one runs that cell's setting-mates (which would train
    the same Local models a second time, side by side) after every other cell, not next."""
    from pace_nb.experiments.cells import by_setting, setting_key
    from pace_nb.experiments.runner import RUNNING_ELSEWHERE, deferring_map

    cfg = parse_config(GRID)
    cells = by_setting(expand(cfg, METHODS))
    first = cells[0]
    mates = [c for c in cells[1:] if setting_key(c) == setting_key(first)]
    assert mates  # method_groups: two cells per setting
    store = ResultsStore(tmp_path)
    seen = []

    def record(cell):
        seen.append(cell.key)
        return fake_runner(cell)

    held = store.claim(first.key)
    rep = run_grid(cfg, store, runner=record, known_methods=METHODS, progress=False)
    assert {r["key"]: r["status"] for r in rep.records}[first.key] == RUNNING_ELSEWHERE
    others = [c.key for c in cells[1:] if c not in mates]
    assert seen == others + [c.key for c in mates]  # the mates last, everything else in order
    held.release()
    # the lazy map itself: a computed cell's result is passed through, a deferred one comes once, at the end
    out = list(deferring_map(lambda c: (c, RUNNING_ELSEWHERE if c is first else "ok"), cells))
    assert [c for c, _ in out] == [first] + [c for c in cells[1:] if c not in mates] + mates
