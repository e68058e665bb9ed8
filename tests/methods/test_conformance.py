"""Every registered method keeps the one contract: :mod:`pace_nb.testing`'s public checks
(registered, unknown parameters named, the schema's rows, repeatable, Flower rows = in-process
rows) on each, on the demo graph with the class's ``quick_params``."""
from __future__ import annotations

import unittest

import pytest

from pace_nb.core.errors import ConfigError
from pace_nb.methods.registry import registered
from pace_nb.testing import check_flower, check_method, check_rows, parametrize_with_checks

pytestmark = pytest.mark.usefixtures("one_thread")

#: Over ~3 s a check on two shared cores (their quick_params still train generators).
EXPENSIVE = {"ghost", "fedsd2c", "oasis"}
#: Open findings of these checks, ``{(method id, check): why}``: strict xfails, so a fix shows (none open).
KNOWN: dict[tuple[str, object], str] = {}


def _marks(cls, check):
    marks = [pytest.mark.slow] if cls.name in EXPENSIVE and check in (check_rows, check_flower) else []
    if (cls.name, check) in KNOWN:
        marks.append(pytest.mark.xfail(reason=KNOWN[cls.name, check], strict=True))
    return marks


@parametrize_with_checks(registered().values(), marks=_marks)
def test_every_method_keeps_the_contract(method, check):
    check(method)


def test_the_checks_catch_a_broken_method():
    """A method whose rows change from run to run, or whose rows contradict its declared
    evaluation, or that is not registered, fails ``check_method`` with what broke."""
    import random

    import pandas as pd

    from pace_nb.methods.contract import Method, register
    from pace_nb.methods.evaluation import evaluate_method
    from pace_nb.methods.registry import METHODS
    from pace_nb.nn.training import client_logits

    class Steady(Method):
        name, label, paper, colour, marker = "steady_probe", "SteadyProbe", "a test method", "#000000", "o"
        evaluation = "complete_graph"  # but its rows are each receiver's: a contradiction

        def run(self, fg, local, *, seeds=None, device="auto", progress=True, local_logits=None, train_config=None):
            z = [client_logits(local.model(0, 0), c, device=device) for c in fg.clients]
            return pd.DataFrame(evaluate_method(fg, z, seed=local.seeds[0], method=self.name, variant="native", rank=0))

    class Wobbly(Steady):
        name, label, evaluation = "wobbly_probe", "WobblyProbe", "receivers"

        def run(self, fg, local, **kw):
            rows = super().run(fg, local, **kw)
            return rows.assign(acc=rows["acc"] * random.random())

    with pytest.raises(AssertionError, match="'wobbly_probe' is not registered"):
        check_method(Wobbly)
    register(Wobbly)
    register(Steady)
    try:
        with pytest.raises(AssertionError, match="wobbly_probe: a second run on the same inputs"):
            check_rows(Wobbly)
        # run_protocol refuses rows that contradict the declared evaluation before check_rows looks
        with pytest.raises(ConfigError, match="declares evaluation 'complete_graph', but its rows say 'receivers'"):
            check_rows(Steady)
        with pytest.raises(unittest.SkipTest, match="does not run on Flower"):
            check_flower(Wobbly)
        Steady.evaluation = "receivers"
        assert check_method(Steady) == ["check_flower: steady_probe does not run on Flower"]
    finally:
        METHODS.remove("wobbly_probe")
        METHODS.remove("steady_probe")
