"""Causes entry by entry (pace_nb.analysis.causes): scope and sign, evidence from the store, the draw rule."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from fake_results import make_rows
from pace_nb.analysis import causes as cz
from pace_nb.analysis.paper_values import paper_values
from pace_nb.analysis.tables import comparison


def _entry(**kw) -> pd.Series:
    base = dict(method="fednova", variant="native", dataset="Cora", partition="louvain", num_clients=10,
                beta=math.nan, metric="acc", diff=5.0, ours_mean=35.0, paper_mean=30.0, ours_std=math.nan,
                paper_std=math.nan, n_seeds=5)
    return pd.Series({**base, **kw})


def test_scope_admits_only_its_tables_fields_and_sign():
    s = cz.Scope(("1", "7"), methods=("fednova",), datasets=("Cora",), partitions=("louvain",), clients=(10,), sign=1)
    assert s.covers("1", _entry())
    assert s.covers("7", _entry(method="FedNova"))  # a label or alias is the same method
    for table, entry in (("2", _entry()), ("1", _entry(method="fedavg")), ("1", _entry(dataset="PubMed")),
                         ("1", _entry(partition="metis")), ("1", _entry(num_clients=20)),
                         ("1", _entry(diff=-5.0)), ("1", _entry(diff=math.nan))):
        assert not s.covers(table, entry), (table, dict(entry))
    assert cz.Scope(("1",), sign=-1).covers("1", _entry(diff=-3.0)) and not cz.Scope(("1",), sign=-1).covers("1", _entry())
    with pytest.raises(ValueError):
        cz.Scope(("1",), sign=2)


def _always(ev, tid, e):
    return "held"


def test_a_cause_never_attaches_outside_its_scope_or_sign():
    cause = cz.Cause("x", "hyperparameter", "text", cz.Scope(("1",), methods=("fedprox",), sign=-1), _always)
    inside = _entry(method="fedprox", diff=-4.0)
    assert cz.entry_causes("1", inside, cz.Evidence(None, {}), [cause]) == [("hyperparameter", "x (held)")]
    for table, e in (("1", _entry(method="fedprox", diff=4.0)), ("8", inside), ("1", _entry(diff=-4.0))):
        assert cz.entry_causes(table, e, cz.Evidence(None, {}), [cause]) == []
    # a cause whose evidence is absent does not apply, even inside its scope
    absent = cz.Cause("y", "hyperparameter", "text", cause.scope, lambda ev, tid, e: None)
    assert cz.entry_causes("1", inside, cz.Evidence(None, {}), [absent]) == []


def _fednova_rows(nova_offset: float) -> pd.DataFrame:
    """Cora K = 10 rows whose FedAvg means are the paper's Table 1 FedAvg values and FedNova = FedAvg + offset."""
    paper = paper_values("pace", table="1", dataset="Cora").set_index(["method", "metric"])["value"]
    rows = make_rows(num_clients=10, receivers=False, base=0.0,
                     methods={("fedavg", "native", 0): 0.0, ("fednova", "native", 0): nova_offset})
    for m in ("acc", "f1_weighted"):
        rows[m] = paper[("fedavg", m)] + rows["acc"] - 0.1 * 3
    return rows


def test_fednova_identity_needs_equal_seeds_in_the_store():
    ev_rows = _fednova_rows(0.0)
    comps = {"1": comparison("1", ev_rows)}
    ev = cz.Evidence(ev_rows, comps)
    e = comps["1"][(comps["1"].method == "fednova") & (comps["1"].metric == "acc")].iloc[0]
    paper_avg = paper_values("pace", table="1", dataset="Cora", method="fedavg", metric="acc").value.item()
    found = cz.entry_causes("1", e, ev)
    assert found and found[0][0] == "method identity" and "ours = our FedAvg on 5/5 seeds" in found[0][1]
    assert f"paper − paper FedAvg = {e.paper_mean - paper_avg:+.2f}" in found[0][1]
    # ours FedNova 0.5 above our FedAvg on every seed: no identity, no cause
    off_rows = _fednova_rows(0.5)
    comps = {"1": comparison("1", off_rows)}
    e = comps["1"][(comps["1"].method == "fednova") & (comps["1"].metric == "acc")].iloc[0]
    assert not any(k == "method identity" for k, _ in cz.entry_causes("1", e, cz.Evidence(off_rows, comps)))


def test_the_draw_rule_is_the_range_of_at_least_five_stored_draws():
    e = _entry(paper_mean=80.0, n_draws=5, draw_min=79.0, draw_max=81.0, draw_mean=80.2, draw_std=0.7)
    assert cz.draw_cause(e) == ("mask draw", "mask draw (paper inside our 5 draws 79.00–81.00)")
    assert cz.draw_cause(pd.Series({**e, "partition": "dirichlet"}))[0] == "partition draw"
    assert cz.draw_cause(pd.Series({**e, "paper_mean": 81.01})) is None  # outside the range: no interval beyond it
    assert cz.draw_cause(pd.Series({**e, "paper_mean": 78.99})) is None
    assert cz.draw_cause(pd.Series({**e, "n_draws": 4})) is None  # fewer than five draws
    assert cz.draw_cause(pd.Series({**e, "n_draws": 0, "draw_min": math.nan})) is None


def test_seed_noise_is_two_standard_errors_of_the_difference_and_no_cause():
    e = _entry(method="fedgta", diff=3.0, ours_std=4.0, paper_std=3.0, n_seeds=4)
    assert cz.seed_noise(e) == pytest.approx(((16 + 9) / 4) ** 0.5)  # 2.5
    assert cz.within_noise(e) == pytest.approx(5.0)
    assert cz.entry_causes("2", e, None) == []  # not significant is not a cause
    assert "seed noise" not in cz.KINDS and cz.NOT_SIGNIFICANT not in cz.KINDS
    assert cz.within_noise(pd.Series({**e, "diff": 5.5})) is None
    assert cz.within_noise(pd.Series({**e, "n_seeds": 1})) is None  # one seed: no spread, no claim


def test_causes_are_listed_in_kind_order():
    later = cz.Cause("b", "hyperparameter", "t", cz.Scope(("1",)), _always)
    first = cz.Cause("a", "method identity", "t", cz.Scope(("1",)), _always, cz.Parent("fedavg"))
    e = _entry(ours_std=4.0, paper_std=3.0, n_seeds=4, diff=3.0, n_draws=5, draw_min=29.0, draw_max=31.0)
    got = cz.entry_causes("1", e, cz.Evidence(None, {}), [later, first])
    assert [k for k, _ in got] == ["method identity", "hyperparameter", "mask draw"]
    far = pd.DataFrame({"table": ["1", "1", "2"], "status": ["explained", "unexplained", cz.NOT_SIGNIFICANT],
                        "labels": [("a (held)",), (), ()]})
    assert cz.footnotes("1", far, [first]) == ["Cause `a` (method identity): applies to 1 entry (their statuses: "
                                               "explained 1) here."]
    assert cz.footnotes("1", far, [later]) == ["Cause `b` (hyperparameter): applies to no entry here."]
    assert cz.footnotes("2", far, [first]) == []  # Table 2 is not in its scope


def test_declared_causes_have_known_kinds_and_scopes():
    for c in cz.CAUSES:
        assert c.kind in cz.KINDS and c.scope.tables
        assert (c.parent is not None) == (c.kind in cz.REDUCING)  # a reduction names the row it reduces to
    with pytest.raises(ValueError):
        cz.Cause("z", "no such kind", "t", cz.Scope(("1",)), _always)
    with pytest.raises(ValueError, match="parent"):
        cz.Cause("z", "method identity", "t", cz.Scope(("1",)), _always)
    with pytest.raises(ValueError, match="relation"):
        cz.Parent("fedavg", relation="not_below")
