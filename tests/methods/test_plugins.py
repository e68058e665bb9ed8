"""Methods from outside the package: an installed package's ``pace_nb.methods`` entry point,
``pace-nb --plugin MODULE`` and ``$PACE_NB_PLUGINS`` — listed by ``pace-nb methods``, run by
``pace-nb run`` and ``pace-nb flower``, conformant by :func:`pace_nb.testing.check_method`; a
plugin that fails to import is one error line naming it."""
from __future__ import annotations

import json
import contextlib
import os
import re
import sys

import pytest

from pace_nb.cli import main
from pace_nb.core.errors import PluginError
from pace_nb.methods.plugins import ENV, load_plugins
from pace_nb.methods.registry import METHODS, spear_comparison

from synthetic import class_means_module

pytestmark = pytest.mark.usefixtures("one_thread")

SOURCE = class_means_module("PlugMeans", "plugmeans", style='colour, marker = "#44AA99", "v"; comparison = True')


def _installed(site, package: str, value: str) -> None:
    """``package`` as an installed distribution: its module and a dist-info with one entry point."""
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text("")
    (site / package / "methods.py").write_text(SOURCE)
    info = site / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[pace_nb.methods]\nplugmeans = {value}\n")


@pytest.fixture
def fresh():
    """The registry as a new process finds it: the plugins load again on the next read; after
    the test, ``$PACE_NB_PLUGINS`` (which ``--plugin`` sets), the registry and the modules as before."""
    env = os.environ.pop(ENV, None)
    before = set(sys.modules)
    METHODS.defer(load_plugins)
    yield
    os.environ.pop(ENV, None)
    if env is not None:
        os.environ[ENV] = env
    with contextlib.suppress(PluginError):
        METHODS.names()  # a load a failing --plugin left pending, with nothing left to load
    if METHODS.registered_now("plugmeans") is not None:
        METHODS.remove("plugmeans")
    for mod in set(sys.modules) - before:
        if mod.startswith(("plugmeans_pkg", "broken_plugin", "cli_plugin")):
            sys.modules.pop(mod)


def test_an_installed_entry_point_is_listed_run_on_flower_and_conformant(fresh, tmp_path, monkeypatch, capsys):
    from pace_nb.testing import check_method

    _installed(tmp_path / "site", "plugmeans_pkg", "plugmeans_pkg.methods")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("PACE_NB_CACHE", str(tmp_path / "cache"))
    assert main(["methods", "--json", str(tmp_path / "m.json")]) == 0  # the first read loads it
    out = capsys.readouterr().out
    assert re.search(r"^plugmeans: PlugMeans — evaluated at the complete graph; in SPEAR's comparison$", out, re.M)
    assert "    parameters: knn=2" in out and "module: plugmeans_pkg.methods" in out
    record = {r["id"]: r for r in json.loads((tmp_path / "m.json").read_text())["methods"]}["plugmeans"]
    assert record["parameters"] == {"knn": 2} and record["evaluation"] == "complete_graph" and record["comparison"]
    assert spear_comparison()[-1] == "plugmeans"
    assert main(["run", "--clients", "3", "--seeds", "1", "--methods", "local,plugmeans", "--device", "cpu",
                 "--no-progress"]) == 0
    assert re.search(r"^\s*plugmeans\s+native", capsys.readouterr().out, re.M)
    pytest.importorskip("flwr")
    assert main(["flower", "simulate", "--engine", "inprocess", "--method", "plugmeans", "--clients", "3",
                 "--epochs", "5", "--param", "plugmeans.knn=3"]) == 0
    assert "PlugMeans on Flower (inprocess)" in capsys.readouterr().out
    assert check_method(METHODS["plugmeans"]) == []  # every check ran and passed


def test_plugin_option_and_environment(fresh, tmp_path, monkeypatch, capsys):
    (tmp_path / "cli_plugin.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["methods", "--plugin", "cli_plugin"]) == 0
    assert "plugmeans: PlugMeans" in capsys.readouterr().out
    assert os.environ[ENV] == "cli_plugin"  # the processes it starts (Ray workers, SuperNodes) load it too
    METHODS.remove("plugmeans")
    sys.modules.pop("cli_plugin")
    monkeypatch.setenv(ENV, " ,cli_plugin,")
    METHODS.defer(load_plugins)
    assert "plugmeans" in METHODS


@pytest.mark.parametrize("how", ["option", "env", "entry point"])
def test_a_plugin_that_fails_to_import_is_one_line_naming_it(how, fresh, tmp_path, monkeypatch, capsys):
    (tmp_path / "broken_plugin.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["methods"]
    if how == "option":
        argv = ["--plugin", "broken_plugin,other", "methods"]
    elif how == "env":
        monkeypatch.setenv(ENV, "broken_plugin")
    else:
        info = tmp_path / "broken_plugin-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text("[pace_nb.methods]\nbroken = broken_plugin\n")
    assert main(argv) == 2
    err = capsys.readouterr().err
    source = {"option": "--plugin", "env": "$PACE_NB_PLUGINS", "entry point": "entry point 'broken' of broken-plugin"}[how]
    assert err == (f"pace-nb: error: plugin module 'broken_plugin' ({source}) failed to load: "
                   "ModuleNotFoundError: No module named 'no_such_dependency_xyz'\n")
