"""One id, one label, one set of group tags per method — read from the registry everywhere; a
method defined in one module of the user's own package runs in ``pace-nb run``, a grid and
``pace-nb tables`` with no other file edited."""
from __future__ import annotations

import importlib.util
import re
import textwrap
from pathlib import Path

import pandas as pd
import pytest

import pace_nb
from pace_nb.cli import main
from pace_nb.core.errors import ConfigError
from pace_nb.core.schema import SERIES_MARKERS, SERIES_PALETTE
from pace_nb.methods.registry import (METHODS, SPEAR_CONTEXT, canonical, group, method_label, registered,
                                      spear_comparison)

from synthetic import class_means_module, forget_temp_module, import_temp_module

PKG = Path(pace_nb.__file__).resolve().parent


def test_groups_are_the_papers_lists_in_their_order():
    # PACE Table 1 / 7 columns; SPEAR Tab. 1 rows (text of both papers)
    assert group("pace_control") == ("fedavg", "fedprox", "fednova", "fedrcl", "fedpub", "fedtad", "fedgta", "fedaux1r")
    assert group("multiround") == ("fedavg", "fedprox", "fedadam", "moon", "fedproto", "fedpub", "fedgta", "fedtad")
    assert group("oneshot") == ("dense", "fedcvae", "fedsd2c", "ghost", "oasis")
    assert spear_comparison() == ("spear",) + group("multiround") + group("oneshot") and len(spear_comparison()) == 14
    with pytest.raises(Exception, match="unknown paper table 'nope'"):
        group("nope")


def _temporary(*names):
    for name in names:
        if METHODS.registered_now(name) is not None:
            METHODS.remove(name)


def test_joining_the_comparison_moves_no_paper_row():
    """``comparison = True`` runs a method in SPEAR's comparison after the paper's rows; the
    paper tables' rows (``paper_rows``) stay the papers' lists."""
    from pace_nb.methods.baselines.fedavg import FedAvg
    from pace_nb.methods.contract import register

    tables = {t: group(t) for t in ("pace_control", "multiround", "oneshot")}
    before = spear_comparison()
    try:
        @register
        class Joiner(FedAvg):
            name, label, paper, comparison = "joiner_probe", "JoinerProbe", "a test method", True

        assert spear_comparison() == before + ("joiner_probe",)
        assert {t: group(t) for t in tables} == tables
        assert "paper_rows" not in vars(Joiner) and METHODS.get("joiner_probe").meta["paper_rows"] == {}
    finally:
        _temporary("joiner_probe")
    with pytest.raises(ConfigError, match="`groups` is split in two: `paper_rows"):
        @register
        class Legacy(FedAvg):
            name, label, paper, groups = "legacy_probe", "LegacyProbe", "a test method", {"multiround": 8}
    assert "legacy_probe" not in METHODS


def test_another_class_under_a_registered_id_needs_override():
    from pace_nb.methods.contract import Method, register

    pace = METHODS["pace"]
    with pytest.raises(ConfigError, match=r"method id 'pace' is already registered for .*Pace; .*override=True"):
        @register
        class NotPace(Method):
            name, label, paper = "pace", "NotPace", "a test method"
            evaluation = "receivers"
    assert METHODS["pace"] is pace and method_label("pace") == "PACE (Ours)"
    try:
        @register(override=True)
        class MyPace(Method):
            name, label, paper = "pace", "MyPace", "a test method"
            evaluation = "receivers"

        assert METHODS["pace"] is MyPace and method_label("pace") == "MyPace"
    finally:
        register(pace, override=True)
    assert METHODS["pace"] is pace and method_label("pace") == "PACE (Ours)"
    register(pace)  # the same class again (a re-imported module) needs no flag


def test_aliases_resolve_to_one_id_and_one_label():
    assert {canonical(n) for n in ("fedaux", "FedAux-1R", "fedaux1r", "FEDAUX")} == {"fedaux1r"}
    assert canonical("fedopt") == canonical("FedAdam") == "fedadam"
    assert method_label("fedaux") == method_label("fedaux1r") == "FedAux-1R"
    assert method_label("fedopt") == "FedAdam" and method_label("fedopt", SPEAR_CONTEXT) == "FedOPT (FedAdam)"
    assert method_label("spear") == "SPEAR" and method_label("pace") == "PACE (Ours)"
    assert method_label("not-a-method") == "not-a-method" and canonical("Not-Registered") == "not-registered"


def test_a_method_label_is_defined_in_one_place():
    """Each registered method's label is written once in the package (its registration), and no
    dict maps its id to its label anywhere else."""
    src = {p: p.read_text(encoding="utf-8") for p in PKG.rglob("*.py")}
    for name in registered().names():
        label = re.escape(method_label(name))
        defs = [p.name for p, t in src.items() for _ in re.finditer(rf'\blabel\s*=\s*"{label}"', t)]
        assert len(defs) == 1, (name, defs)
        for key in (name,) + METHODS.get(name).aliases:
            maps = [p.name for p, t in src.items() if re.search(rf'"{re.escape(key)}"\s*:\s*"{label}"', t)]
            assert not maps, (name, maps)


def test_a_method_colour_is_declared_on_its_class_only():
    """A method's colour and marker live on its class (read through the registry); the series
    palette holds no method id, and no dict in the package maps a method id to a colour."""
    from pace_nb.viz.style import markers, method_color, method_marker, palette

    src = {p: p.read_text(encoding="utf-8") for p in PKG.rglob("*.py")}
    names = set(registered().names())
    assert not (set(SERIES_PALETTE) | set(SERIES_MARKERS)) & names
    for name in names:
        cls = METHODS[name]
        colour, marker = vars(cls)["colour"], vars(cls)["marker"]
        assert re.fullmatch(r"#[0-9A-F]{6}", colour) and marker, name
        assert method_color(name) == palette()[name] == colour and method_marker(name) == markers()[name] == marker
        for key in (name,) + METHODS.get(name).aliases:
            maps = [p.name for p, t in src.items() if re.search(rf'"{re.escape(key)}"\s*:\s*"#[0-9A-Fa-f]{{6}}"', t)]
            assert not maps, (name, maps)
    assert method_color("FedOPT") == method_color("fedadam")  # aliases resolve


def test_paper_values_use_registry_ids():
    from pace_nb.analysis.paper_values import paper_values

    ids = set(paper_values()["method"])
    assert ids <= set(registered().names()), ids - set(registered().names())


PLUGIN = textwrap.dedent('''
    """A user's methods in one module: FedAvg's mechanism under a new id, and a one-shot method
    (class-mean features up, a kNN graph of them at the server), both tagged for SPEAR's comparison."""
    from pace_nb.methods.baselines.fedavg import FedAvg
    from pace_nb.methods.contract import register


    @register
    class FedProbe(FedAvg):
        name = "fedprobe"
        label = "FedProbe"
        paper = "a test method"
        colour, marker = "#117733", "s"
''') + class_means_module("ShotProbe", "shotprobe", style='colour, marker = "#88CCEE", "D"')


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    yield import_temp_module(tmp_path, monkeypatch, "userpkg", "probe_method", PLUGIN)
    forget_temp_module("userpkg", "probe_method")


def test_a_new_method_in_one_module_runs_everywhere(plugin, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PACE_NB_CACHE", str(tmp_path / "cache"))
    try:
        assert canonical("FedProbe") == "fedprobe" and method_label("fedprobe") == "FedProbe"
        # pace-nb run
        assert main(["run", "--clients", "3", "--seeds", "1", "--methods", "local,fedprobe", "--device", "cpu",
                     "--no-progress"]) == 0
        assert re.search(r"^\s*fedprobe\s+native", capsys.readouterr().out, re.M)
        # a grid: its parameters are checked like a built-in method's
        store = tmp_path / "store"
        grid = tmp_path / "g.toml"
        grid.write_text(textwrap.dedent("""
            [[spear]]
            datasets = ["demo"]
            beta = 0.5
            clients = 3
            seeds = [2024]
            variants = ["full"]
            methods = ["spear", "fedprobe", "shotprobe"]
            rounds = 1
            local_epochs = 2
            method_params = { fedprobe = { weighting = "train" }, shotprobe = { knn = 3 } }
        """))
        assert main(["grid", str(grid), "--results", str(store)]) == 0
        rows = pd.concat([pd.read_csv(p) for p in (store / "cells").glob("*.csv")])
        assert {"fedprobe", "shotprobe"} <= set(rows["method"])
        bad = grid.read_text().replace("weighting", "weigthing")
        grid.write_text(bad)
        assert main(["grid", str(grid), "--results", str(tmp_path / "s2"), "--dry-run"]) == 2
        assert "valid: local_epochs, optimizer_state, rounds, weighting" in capsys.readouterr().err
        # pace-nb tables: SPEAR's Tab. 1 shows the new method under its registry label
        out = tmp_path / "tables"
        assert main(["tables", "--results", str(store), "--out", str(out), "--tables", "spear-1"]) == 0
        text = (out / "table_spear-1.md").read_text(encoding="utf-8")
        assert "FedProbe" in text and "ShotProbe" in text and "SPEAR" in text
        # Flower: the one-shot method runs over the network with the in-process rows, no adapter written
        if importlib.util.find_spec("flwr") is not None:
            from pace_nb.core.schema import COLUMNS
            from pace_nb.data.federation import build_federated
            from pace_nb.flower.client import make_client_app
            from pace_nb.flower.inprocess import run_inprocess
            from pace_nb.flower.partitions import export_evaluation, export_partitions
            from pace_nb.flower.settings import FlowerSettings
            from pace_nb.methods.protocol import run_protocol
            from pace_nb.nn.training import TrainConfig

            fg = build_federated("demo", "dirichlet", 3, 2024, beta=1.0)
            s = FlowerSettings(method="shotprobe", num_clients=3, epochs=5, params={"knn": 3})
            out = run_inprocess(make_client_app(str(export_partitions(fg, tmp_path / "p"))), s,
                                evaluation=str(export_evaluation(fg, tmp_path / "e")))
            ref = run_protocol(fg, seeds=(s.seed,), methods=("shotprobe",), train_config=TrainConfig(epochs=5),
                               method_params={"shotprobe": {"knn": 3}}, progress=False)
            cols = [c for c in COLUMNS if c not in ("seconds", "params")]
            pd.testing.assert_frame_equal(out.rows[cols].reset_index(drop=True), ref[cols].reset_index(drop=True),
                                          check_exact=True, check_dtype=False)
    finally:
        _temporary("fedprobe", "shotprobe")
