"""The conformance checks of the method contract, public for plugin authors (in the spirit of
scikit-learn's ``check_estimator`` and ``parametrize_with_checks``). The package's own tests run
them on every registered method::

    from pace_nb.testing import check_method, parametrize_with_checks

    def test_my_method_keeps_the_contract():
        check_method(MyMethod)                 # every check; an AssertionError names what broke

    @parametrize_with_checks([MyMethod])      # one pytest test per check, id "<method id>-<check>"
    def test_conformance(method, check):
        check(method)

Each check runs the method on the embedded ``demo`` graph (:data:`CLIENTS` clients, Dirichlet
β = 1, data seed :data:`DATA_SEED`, the first paper seed as run seed, :data:`EPOCHS` training
epochs, on the CPU) with the class's ``quick_params`` — hyperparameters that make it fast, which
a slow method declares (``quick_params = {"epochs": 5}``):

* :func:`check_registered`: the class is what its id and aliases resolve to, with a label and a
  valid ``evaluation``;
* :func:`check_unknown_parameter`: an unknown hyperparameter is a one-line
  :class:`~pace_nb.core.errors.ConfigError` naming every valid one, before any work;
* :func:`check_rows`: the rows have the schema's columns (:data:`~pace_nb.core.schema.COLUMNS`,
  in order), the method's id, a pooled row (``receiver = -1``), the class's ``evaluation``,
  accuracy in [0, 100] (F1 too, or NaN where not computed); and they are repeatable: the same
  inputs give the same rows (every column and ``params`` entry but the wall times);
* :func:`check_flower`: for a method Flower runs (:func:`pace_nb.flower.adapters.flower_methods`),
  the rows of the ClientApp and ServerApp exchanging serialized messages
  (:mod:`pace_nb.flower.inprocess`) equal the in-process protocol's (every column but ``seconds``
  and ``params``). It skips (:class:`unittest.SkipTest`, a skip under pytest) when ``flwr`` is
  not installed or the method does not run on Flower.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import math
import tempfile
import unittest
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable

from pace_nb.core.config import PAPER_SEEDS
from pace_nb.core.errors import ConfigError
from pace_nb.core.schema import COLUMNS

#: The federation every check runs on: the embedded demo graph, Dirichlet β = 1.
DATASET, CLIENTS, DATA_SEED, BETA, EPOCHS = "demo", 3, 2024, 1.0, 5
SEED = PAPER_SEEDS[0]
#: Columns that may differ between two runs of the same inputs (wall time) / Flower and in-process
#: (``params`` also records the Flower participants).
WALL, FLOWER_EXTRA = ("seconds",), ("seconds", "params")


@functools.lru_cache(maxsize=1)
def _federation():
    from pace_nb.data.federation import build_federated

    return build_federated(DATASET, "dirichlet", CLIENTS, DATA_SEED, beta=BETA)


def _name(cls) -> str:
    return str(getattr(cls, "name", "") or cls)


def _run(cls, params: dict[str, Any] | None = None):
    """The in-process protocol's rows of ``cls`` (its ``quick_params`` unless ``params``)."""
    from pace_nb.methods.protocol import run_protocol
    from pace_nb.nn.training import TrainConfig

    check_registered(cls)
    return run_protocol(_federation(), seeds=(SEED,), methods=(cls.name,), train_config=TrainConfig(epochs=EPOCHS),
                        method_params={cls.name: dict(cls.quick_params) if params is None else params},
                        progress=False, device="cpu")


@functools.cache
def _reference(cls):
    return _run(cls)


def _timeless(value):
    """``value`` (a row's ``params``) without its wall times (keys ending in ``seconds``)."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if not str(k).endswith("seconds")}
    return [_timeless(v) for v in value] if isinstance(value, list) else value


def _sorted(frame, drop: Iterable[str]):
    cols = [c for c in COLUMNS if c not in drop]
    out = frame[cols].sort_values(["variant", "rank", "receiver"], kind="stable").reset_index(drop=True)
    if "params" in cols:
        out["params"] = [json.dumps(_timeless(json.loads(p)), sort_keys=True) for p in out["params"]]
    return out


def check_registered(cls) -> None:
    """``cls`` is what its id and every alias resolve to, with a label and a valid evaluation."""
    from pace_nb.methods.contract import EVALUATIONS, Method
    from pace_nb.methods.registry import METHODS, method_label

    assert isinstance(cls, type) and issubclass(cls, Method), f"{cls!r} is not a pace_nb.methods.contract.Method"
    name = _name(cls)
    assert name and name in METHODS, f"{name!r} is not registered (decorate the class with @register)"
    for key in (name, *cls.aliases):
        assert METHODS[key] is cls, f"{key!r} resolves to {METHODS[key]!r}, not {cls!r}"
    assert cls.label and method_label(name) in (cls.label, *cls.labels.values()), f"{name}: no label"
    assert cls.evaluation in EVALUATIONS, f"{name}: evaluation {cls.evaluation!r} not in {EVALUATIONS}"


def check_unknown_parameter(cls) -> None:
    """A misspelt hyperparameter is one ``ConfigError`` line naming every valid one, before any
    work; the class's ``quick_params`` are valid ones."""
    from pace_nb.methods.registry import check_method_params, method_parameters

    check_registered(cls)
    valid = method_parameters(cls.name)
    check_method_params(cls.name, dict(cls.quick_params))
    bogus = "no_such_parameter"
    assert bogus not in valid
    try:
        _run(cls, {bogus: 1})
    except ConfigError as exc:
        msg = str(exc)
    else:
        raise AssertionError(f"{cls.name}: the unknown parameter {bogus!r} was accepted")
    assert "\n" not in msg and bogus in msg, f"{cls.name}: the error does not name {bogus!r}: {msg}"
    missing = [v for v in valid if v not in msg]
    assert not missing, f"{cls.name}: the error does not name the valid parameter(s) {missing}: {msg}"


def check_rows(cls) -> None:
    """The rows keep the schema and are repeatable (see the module docstring)."""
    import pandas as pd

    rows = _reference(cls)
    assert len(rows), f"{cls.name}: no rows"
    assert list(rows.columns[: len(COLUMNS)]) == list(COLUMNS), f"{cls.name}: columns {list(rows.columns)}"
    assert set(rows["method"]) == {cls.name}, f"{cls.name}: rows of {sorted(set(rows['method']))}"
    assert (rows["receiver"] == -1).any(), f"{cls.name}: no pooled row (receiver -1)"
    assert set(rows["evaluation"]) == {cls.evaluation}, \
        f"{cls.name}: rows evaluated {sorted(set(rows['evaluation']))}, the class says {cls.evaluation!r}"
    for col in ("acc", "f1_weighted", "f1_macro"):
        bad = [v for v in rows[col] if not (0.0 <= v <= 100.0 or (col != "acc" and math.isnan(v)))]
        assert not bad, f"{cls.name}: {col} outside [0, 100]: {bad}"
    again = _run(cls)
    pd.testing.assert_frame_equal(_sorted(again, WALL), _sorted(rows, WALL), check_exact=True,
                                  obj=f"{cls.name}: a second run on the same inputs")


def check_flower(cls) -> None:
    """On Flower (ClientApp and ServerApp in one process, serialized messages) the rows are the
    in-process protocol's; skips when flwr is absent or the method does not run on Flower."""
    import pandas as pd

    check_registered(cls)
    if importlib.util.find_spec("flwr") is None:
        raise unittest.SkipTest("flwr is not installed (pip install 'pace_nb[flower]')")
    from pace_nb.flower.adapters import flower_methods
    from pace_nb.flower.client import make_client_app
    from pace_nb.flower.inprocess import run_inprocess
    from pace_nb.flower.partitions import export_evaluation, export_partitions
    from pace_nb.flower.settings import FlowerSettings

    if cls.name not in flower_methods():
        raise unittest.SkipTest(f"{cls.name} does not run on Flower")
    settings = FlowerSettings(method=cls.name, num_clients=CLIENTS, seed=SEED, epochs=EPOCHS, device="cpu",
                              params=json.dumps(dict(cls.quick_params), sort_keys=True))
    fg = _federation()
    with tempfile.TemporaryDirectory(prefix="pace_nb_check_") as tmp:
        out = run_inprocess(make_client_app(str(export_partitions(fg, Path(tmp) / "partitions"))), settings,
                            evaluation=str(export_evaluation(fg, Path(tmp) / "evaluator")))
    assert out is not None and not out.dropped, f"{cls.name}: the Flower run dropped {getattr(out, 'dropped', None)}"
    pd.testing.assert_frame_equal(_sorted(out.rows, FLOWER_EXTRA), _sorted(_reference(cls), FLOWER_EXTRA),
                                  check_exact=True, check_dtype=False, obj=f"{cls.name}: Flower vs in-process rows")


#: Every check, in the order :func:`check_method` runs them.
CHECKS: tuple[Callable[[Any], None], ...] = (check_registered, check_unknown_parameter, check_rows, check_flower)


def check_method(cls) -> list[str]:
    """Run every check on ``cls``; raise the first failure (an ``AssertionError`` naming the
    method and what broke). Returns the names of the checks that were skipped, with why."""
    skipped = []
    for check in CHECKS:
        try:
            check(cls)
        except unittest.SkipTest as why:
            skipped.append(f"{check.__name__}: {why}")
    return skipped


def parametrize_with_checks(methods: Iterable[Any], *, marks: Callable[[Any, Callable], Any] | None = None):
    """A ``pytest.mark.parametrize`` over ``(method, check)`` for every method class (or
    registered id) in ``methods`` and every check, ids ``"<method id>-<check>"``; ``marks(cls,
    check)`` may add pytest marks (e.g. ``pytest.mark.slow`` on the expensive ones)."""
    import pytest

    from pace_nb.methods.registry import registered

    classes = [registered()[m] if isinstance(m, str) else m for m in methods]
    params = [pytest.param(cls, check, id=f"{_name(cls)}-{check.__name__}",
                           marks=(marks(cls, check) or ()) if marks else ())
              for cls in classes for check in CHECKS]
    return pytest.mark.parametrize(("method", "check"), params)
