"""Reading a declared config from a file (pace_nb.core.reading): list- and table-valued checks
that read what they accept, unknown and missing keys, cross-field validate()."""
from __future__ import annotations

from dataclasses import MISSING, dataclass

import pytest

from pace_nb.core.errors import ConfigError
from pace_nb.core.reading import FieldError, Many, Table, TableFor, read_config
from pace_nb.core.validation import OMITTED, Flag, Interval, Text, check_seeds, declared, param
from pace_nb.nn.training import TrainConfig


@declared
@dataclass(frozen=True)
class Section:
    names: tuple = param(MISSING, Many((Text(),)))
    beta: tuple = param((0.5,), Many((Interval(float, 0, None, closed="neither"),), convert=float))
    seeds: tuple = param((1,), Many(then=check_seeds))
    extra: tuple = param((), Many((Text(),), empty=True))
    flag: bool | None = param(None, Flag(), OMITTED, help="switch")
    params: dict = param(MISSING, Table((Table(),), each="a table of that method's parameters"), default_factory=dict)
    train: dict | None = param(None, TableFor(TrainConfig), OMITTED)

    def validate(self) -> None:
        if "forbidden" in self.names:
            raise FieldError("names: 'forbidden' is reserved", "names", "forbidden")


def test_values_are_read_as_declared():
    s = read_config(Section, {"names": "a", "beta": [1, 0.25], "seeds": 7, "params": {"m": {"x": 1}}}, "[s]")
    assert s.names == ("a",) and s.seeds == (7,) and s.extra == () and s.flag is None
    assert s.beta == (1.0, 0.25) and isinstance(s.beta[0], float)  # beta = 1 reads as 1.0
    assert s.params == {"m": {"x": 1}} and s.train is None
    inherited = read_config(Section, {"names": ["a"]}, "[s]", inherit={"seeds": (3, 4)})
    assert inherited.seeds == (3, 4)
    assert read_config(Section, {"names": ["a"], "seeds": [5]}, "[s]", inherit={"seeds": (3, 4)}).seeds == (5,)


@pytest.mark.parametrize("values, key, value, match", [
    ({"names": ["a"], "colour": 1}, "colour", None,
     "unknown key 'colour' in [s]; valid keys: beta, extra, flag, names, params, seeds, train"),
    ({}, None, None, "every [s] needs 'names'"),
    ({"names": []}, "names", None, "[s] names: at least one value is needed, got []"),
    ({"names": ["a", 3]}, "names", 3, "[s] names must be a non-empty string, got 3"),
    ({"names": "a", "beta": True}, "beta", True, "[s] beta must be a float in (0, inf), got True"),
    ({"names": "a", "seeds": [1, 1]}, "seeds", None, "[s] seeds: duplicated value(s) [1]"),
    ({"names": "a", "flag": "yes"}, "flag", "yes", "[s] flag must be true or false, got 'yes' (flag is the switch)"),
    ({"names": "a", "params": 5}, "params", None, "[s] params must be a table (each value a table of that method's parameters), got 5"),
    ({"names": "a", "params": {"m": 5}}, "params", None, "[s] params.m must be a table of that method's parameters, got 5"),
    ({"names": "a", "train": {"lrr": 1}}, "train", None, "[s] train: unknown key(s) ['lrr']; valid: dropout"),
    ({"names": "a", "train": {"lr": float("nan")}}, "train", None,
     "[s] train: TrainConfig: parameter 'lr' must be a float in (0, 10], got nan"),
    ({"names": ["forbidden"]}, "names", "forbidden", "[s] names: 'forbidden' is reserved"),
    ([1, 2], None, None, "[s] must be a table/mapping, got [1, 2]"),
])
def test_each_refusal_names_the_section_the_key_and_what_is_allowed(values, key, value, match):
    with pytest.raises(FieldError) as err:
        read_config(Section, values, "[s]")
    assert isinstance(err.value, ConfigError) and "\n" not in str(err.value)
    assert str(err.value).startswith(match) or match in str(err.value), str(err.value)
    assert (err.value.key, err.value.value) == (key, value)


def test_omitted_is_never_offered_as_a_value():
    with pytest.raises(FieldError) as err:
        read_config(Section, {"names": "a", "flag": 0}, "[s]")
    assert "None" not in str(err.value)


def test_a_list_default_its_own_checks_refuse_fails_at_import():
    with pytest.raises(TypeError, match="its default"):
        @declared
        @dataclass(frozen=True)
        class Bad:
            names: tuple = param((), Many((Text(),)))  # at least one value is needed
