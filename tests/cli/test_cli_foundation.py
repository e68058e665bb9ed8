"""``pace-nb datasets`` and ``pace-nb partition``: tables, JSON output, one-line errors (exit 2)."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from pace_nb.data import federation as F
from pace_nb.cli import main


@pytest.fixture(autouse=True)
def tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PACE_NB_CACHE", str(tmp_path / "cache"))
    F._build_named.cache_clear()
    yield
    F._build_named.cache_clear()


def _error(capsys, argv):
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pace-nb: error: ") and "Traceback" not in err
    return lines[0]


def test_datasets_table_and_json(tmp_path, capsys):
    out_json = tmp_path / "ds.json"
    assert main(["datasets", "--data-root", str(tmp_path / "empty"), "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "Cora" in out and "ogbn-arxiv" in out and str(tmp_path / "empty") in out
    payload = json.loads(out_json.read_text())
    rows = {r["name"]: r for r in payload["datasets"]}
    assert len(rows) == 13 and rows["demo"]["present"] and not rows["Cora"]["present"]
    assert rows["Cora"]["folder"] == str(tmp_path / "empty" / "Cora" / "raw")
    assert "ind.cora.x" in rows["Cora"]["missing"]


def test_partition_demo_json(tmp_path, capsys):
    out_json = tmp_path / "p.json"
    assert main(["partition", "--dataset", "demo", "--scheme", "louvain", "--clients", "5",
                 "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "demo: 2400 nodes" in out and "client" in out and "train" in out
    j = json.loads(out_json.read_text())
    assert len(j["clients"]) == 5 and set(j["masks"]) == {"train", "val", "test"}
    allids = np.concatenate([np.array(c) for c in j["clients"]])
    assert np.array_equal(np.sort(allids), np.arange(2400))
    for k in range(5):
        parts = [set(j["masks"][s][k]) for s in ("train", "val", "test")]
        assert set.union(*parts) == set(j["clients"][k]) and sum(map(len, parts)) == len(j["clients"][k])
    assert j["config"]["scheme"] == "louvain" and j["config"]["num_clients"] == 5 and j["config"]["seed"] == 2024


def test_partition_dirichlet_cli(capsys):
    assert main(["partition", "--scheme", "dirichlet", "--beta", "0.05", "--clients", "10", "--seed", "3"]) == 0
    assert "beta=0.05" in capsys.readouterr().out


@pytest.mark.parametrize("argv,match", [
    (["partition", "--dataset", "nosuch"], "unknown dataset 'nosuch'; valid datasets: Actor, CiteSeer"),
    (["partition", "--clients", "0"], "number of clients must be an integer >= 1"),
    (["partition", "--clients", "5000"], "exceeds the number of nodes N=2400"),
    (["partition", "--scheme", "dirichlet", "--beta", "0"], "beta must be > 0"),
    (["partition", "--scheme", "dirichlet", "--beta", "-2"], "beta must be > 0"),
    (["partition", "--scheme", "dirichlet"], "needs a concentration beta"),
    (["partition", "--scheme", "dirichlet", "--beta", "0.001", "--clients", "400"], "could not give each"),
    (["partition", "--scheme", "kmeans"], "unknown partition scheme 'kmeans'; valid partition schemes"),
])
def test_partition_bad_input(capsys, argv, match):
    assert match in _error(capsys, argv)


def test_missing_raw_files_names_folder_and_files(tmp_path, capsys):
    line = _error(capsys, ["partition", "--dataset", "citeseer", "--data-root", str(tmp_path)])
    assert str(tmp_path / "CiteSeer" / "raw") in line and "ind.citeseer.graph" in line
    assert "PACE_NB_DATA" in line


def test_console_script_exit_code(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pace_nb.cli", "partition", "--dataset", "Cora",
                           "--data-root", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("pace-nb: error: raw files for Cora not found")


def test_tables_help_lists_every_registered_table():
    """`pace-nb tables --help` is written without importing the tables (fast start-up): its list
    of ids must be the registry's."""
    import re

    from pace_nb.analysis.tables import TABLES
    from pace_nb.cli.commands.tables import TABLE_IDS

    listed = set(re.findall(r"\b(?:spear-[a-z0-9-]+|A)\b", TABLE_IDS))
    lo, hi = map(int, re.search(r"(\d+)\.\.(\d+)", TABLE_IDS).groups())
    listed |= {str(i) for i in range(lo, hi + 1)}
    assert listed == set(TABLES.names() if hasattr(TABLES, "names") else TABLES)


def test_top_level_help_lists_every_command_and_flower_action(capsys):
    """`pace-nb --help` names every subcommand, and every action of `pace-nb flower`."""
    from pace_nb.cli import COMMANDS, build_parser

    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert all(f"pace-nb {c}" in text for c in COMMANDS)
    sub = next(a for a in build_parser()._actions if isinstance(a, type(build_parser()._subparsers._group_actions[0])))
    flower = sub.choices["flower"]
    actions = next(a for a in flower._actions if a.dest == "action").choices
    assert f"pace-nb flower {'|'.join(actions)}" in text
