"""Grid sections are declared config dataclasses: every key is checked by the field it is, and
every refusal names the file, the line, the section and the key."""
from __future__ import annotations

import dataclasses
import json

import pytest

from pace_nb.core.errors import ConfigError
from pace_nb.experiments.grid import GridConfig, expand, parse_config
from pace_nb.experiments.sections import ExperimentSection, GridSection, SpearSection

METHODS = ["local", "pace", "fedavg", "fedprox", "spear"]
MINIMAL = {"grid": {}, "experiment": {"datasets": ["demo"], "methods": ["local"]}, "spear": {"datasets": ["demo"]}}
SECTIONS = [("grid", GridSection, "[grid]"), ("experiment", ExperimentSection, "[[experiment]]"),
            ("spear", SpearSection, "[[spear]]")]


@pytest.mark.parametrize("section, key", [(s, f.name) for s, cls, _ in SECTIONS for f in dataclasses.fields(cls)])
def test_every_key_of_every_section_is_checked_and_named(section, key):
    """A table is no valid value of any key (a table-valued key refuses its unknown entry)."""
    where = dict((s, w) for s, _, w in SECTIONS)[section]
    raw = {section: {**MINIMAL[section], key: {"bad": 1}}}
    if section == "grid":
        raw["experiment"] = MINIMAL["experiment"]
    with pytest.raises(ConfigError) as err:
        expand(GridConfig(raw, "", "g.toml"), METHODS, fingerprints=False)
    msg = str(err.value)
    assert msg.startswith("g.toml: ") and "\n" not in msg
    assert f"{where} {key}" in msg, msg


def test_a_section_value_names_its_own_line():
    text = '[[spear]]\ndatasets = ["Cora"]\nT = 100\n'
    with pytest.raises(ConfigError, match=r"^g\.toml:3: \[\[spear\]\] T must be an int in \[0, 64\], got 100 \(T is the PPR steps\)$"):
        expand(parse_config(text, path="g.toml"), METHODS, fingerprints=False)


def test_the_perturbation_scope_is_checked_without_robustness_too():
    text = '[[spear]]\ndatasets = ["Cora"]\nscope = "server"\n'
    with pytest.raises(ConfigError, match=r":3: \[\[spear\]\] scope must be one of 'clients', 'global', got 'server'"):
        expand(parse_config(text, path="g.toml"), METHODS, fingerprints=False)


def test_values_are_read_once_scalars_as_lists_and_only_given_spear_options_kept():
    exp = parse_config('[grid]\nseeds = [3, 4]\n[[experiment]]\ndatasets = "demo"\nmethods = "LOCAL"\n'
                       'partitions = "dirichlet"\nbeta = 1\nclients = 3\n')
    (cell,) = expand(exp, METHODS, fingerprints=False)
    assert (cell.methods, cell.beta, cell.num_clients, cell.seeds) == (("local",), 1.0, 3, (3, 4))
    assert isinstance(cell.beta, float)
    sp = expand(parse_config('[[spear]]\ndatasets = ["Cora"]\nrho = 1\nrobustness = true\n'), METHODS, fingerprints=False)
    assert {c.options for c in sp} == {json.dumps({"rho": 1, "robustness": True, "scope": "clients"}, sort_keys=True)}
