"""Entry statuses (pace_nb.analysis.verdicts): reductions take their row's status, seed noise is no cause,
distinct measurements and the count line — on hand-built frames, independent of the shipped store."""
from __future__ import annotations


import pandas as pd

from fake_results import make_rows
from pace_nb.analysis import causes as cz
from pace_nb.analysis import verdicts as vd
from pace_nb.analysis.causes import EXPLAINED, NOT_SIGNIFICANT, UNEXPLAINED
from synthetic import gap_entry as _e

NOVA = next(c for c in cz.CAUSES if c.name == "fednova-is-fedavg")
AUX = next(c for c in cz.CAUSES if c.name == "fedaux-is-local")


def _store(nova: float = 0.0, aux: float = 0.4) -> pd.DataFrame:
    """Pooled rows (acc = offset + 0.1·seed, seeds 1–5: means offset + 0.3): FedNova = FedAvg + ``nova``,
    FedAux = Local + ``aux`` on every seed."""
    return make_rows(num_clients=10, receivers=False, base=0.0,
                     methods={("fedavg", "native", 0): 40.0, ("fednova", "native", 0): 40.0 + nova,
                              ("local", "native", 0): 70.0, ("fedaux1r", "native", 0): 70.0 + aux})


def _verdicts(entries: list[dict], rows: pd.DataFrame, causes=cz.CAUSES) -> dict[str, vd.Verdict]:
    comp = pd.DataFrame(entries)
    ev = cz.Evidence(rows, {"1": comp})
    return {e["method"]: vd.verdict("1", e, comp, ev, causes) for _, e in comp.iterrows()}


def test_an_entry_equal_to_its_row_takes_that_rows_status():
    nova = _e("fednova", 40.3, 10.0)
    # FedAvg far and nothing explains it: FedNova is unexplained through it, and shows FedAvg's measurement
    got = _verdicts([_e("fedavg", 40.3, 30.0), nova], _store())
    assert (got["fednova"].status, got["fednova"].kinds) == (UNEXPLAINED, ())
    assert got["fednova"].labels[0].endswith("→ fedavg's entry: unexplained")
    assert got["fednova"].measurement == got["fedavg"].measurement == vd.measurement(pd.Series(_e("fedavg", 40.3, 30.0)))
    # FedAvg far but within its seed noise: FedNova is not significant (its own spread is not asked)
    noisy = _e("fedavg", 40.3, 30.0, ours_std=10.0, paper_std=10.0)
    got = _verdicts([noisy, nova], _store())
    assert got["fedavg"].status == got["fednova"].status == NOT_SIGNIFICANT
    assert "fedavg's entry: within seed noise: not significant (≤ 2 SE = 12.65)" in got["fednova"].labels[0]
    # FedAvg explained by its draws: FedNova explained by the identity and that draw
    drawn = _e("fedavg", 40.3, 30.0, n_draws=5, draw_min=29.0, draw_max=41.0)
    got = _verdicts([drawn, nova], _store())
    assert (got["fednova"].status, got["fednova"].kinds) == (EXPLAINED, ("method identity", "mask draw"))
    # FedAvg within 2 points of the paper: the identity explains FedNova
    got = _verdicts([_e("fedavg", 40.3, 39.5), nova], _store())
    assert (got["fednova"].status, got["fednova"].kinds) == (EXPLAINED, ("method identity",))
    # ours FedNova 0.5 above our FedAvg on every seed: no reduction, its own status and measurement
    got = _verdicts([_e("fedavg", 40.3, 30.0), _e("fednova", 40.8, 10.0)], _store(nova=0.5))
    assert (got["fednova"].status, got["fednova"].labels) == (UNEXPLAINED, ())
    assert got["fednova"].measurement != got["fedavg"].measurement


def test_reduces_to_local_takes_locals_status_but_is_its_own_measurement():
    local = _e("local", 70.3, 80.0)
    aux = _e("fedaux1r", 70.7, 50.0, ours_std=30.0, paper_std=30.0)  # alone, within its seed noise
    got = _verdicts([local, aux], _store())
    assert got["fedaux1r"].status == UNEXPLAINED and got["fedaux1r"].noise == ""
    assert "ours − our Local = +0.40 over 5 seeds" in got["fedaux1r"].labels[0]
    assert got["fedaux1r"].measurement != got["local"].measurement  # near, not the same numbers
    got = _verdicts([local, aux], _store(aux=1.5))  # 1.5 points from our Local: no reduction
    assert got["fedaux1r"].status == NOT_SIGNIFICANT and got["fedaux1r"].labels == ()


def test_a_cause_of_its_own_explains_whatever_its_row_says_and_beats_noise():
    own = cz.Cause("own", "hyperparameter", "t", cz.Scope(("1",), methods=("fednova",)), lambda ev, t, e: "held")
    got = _verdicts([_e("fedavg", 40.3, 30.0), _e("fednova", 40.3, 10.0, ours_std=30.0, paper_std=30.0)],
                    _store(), (NOVA, own))
    assert (got["fednova"].status, got["fednova"].kinds) == (EXPLAINED, ("hyperparameter",))
    assert got["fednova"].noise == "" and got["fednova"].text().startswith("explained: fednova-is-fedavg (")


def test_not_significant_is_kept_apart_from_the_causes():
    got = _verdicts([_e("fedgta", 43.3, 40.0, ours_std=4.0, paper_std=3.0)], _store())["fedgta"]
    assert (got.status, got.kinds, got.labels, got.noise) == (NOT_SIGNIFICANT, (), (), "≤ 2 SE = 4.47")
    assert got.text() == "within seed noise: not significant (≤ 2 SE = 4.47)"
    assert _verdicts([_e("fedgta", 43.3, 40.0)], _store())["fedgta"].text() == "unexplained"


def test_a_measurement_is_the_stored_rows_an_entry_reads():
    m = vd.measurement
    t1 = pd.Series(_e("fedavg", 40.3, 30.0, row="FedAvg"))
    t7 = pd.Series(_e("fedavg", 40.3, 31.0, row="FedAvg None", col="Cora Acc"))
    assert m(t1) == m(t7)  # one cell shown by two tables
    matched = pd.Series(_e("fedavg", 41.0, 35.0, variant="cnll", ours_method="fedgta"))
    assert m(matched) == m(pd.Series(_e("fedgta", 41.0, 33.0, variant="cnll"))) != m(pd.Series(_e("fedavg", 1, 2, variant="cnll")))
    assert m(pd.Series(_e("local", 70.0, 71.0, variant="cnll"))) == m(pd.Series(_e("local", 70.0, 79.0)))
    assert m(pd.Series(_e("pace", 80.0, 79.0, variant="full", rank=6))) != m(pd.Series(_e("pace", 80.0, 79.0, variant="full", rank=8)))
    for other in (dict(metric="f1_weighted"), dict(beta=0.5), dict(num_clients=20), dict(variant="cnll")):
        assert m(pd.Series({**t1, **other})) != m(t1), other


def test_count_line_entries_and_measurements_by_status():
    far = pd.DataFrame({"status": [EXPLAINED, EXPLAINED, NOT_SIGNIFICANT, UNEXPLAINED, UNEXPLAINED],
                        "kinds": [("method identity", "mask draw"), ("mask draw",), (), (), ()],
                        "measurement": [("a",), ("b",), ("c",), ("a",), ("d",)]})
    # measurement a is shown by an explained and an unexplained entry: it counts as unexplained
    assert vd.count_line(far) == (
        "**Entries more than 2 points off: 5 (4 distinct measurements); explained: 2 (1 measurement) "
        "(method identity 1, mask draw 2); within seed noise: not significant: 1 (1 measurement); "
        "unexplained: 2 (2 measurements).**")
    assert vd.two_kinds_line(far) == ("Entries explained by causes of two or more kinds: 1 (each counted under "
                                      "every kind it carries: the kinds add to 3 over 2 explained entries).")
    empty = pd.DataFrame(columns=["status", "kinds", "measurement"])
    assert vd.count_line(empty).startswith("**Entries more than 2 points off: 0 (0 distinct measurements); explained: 0")
