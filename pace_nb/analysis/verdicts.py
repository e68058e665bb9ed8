"""What each entry more than :data:`~pace_nb.analysis.causes.LIST_ABOVE` points off comes to, and the
headline that counts them (docs/DESIGN.md §12).

An entry's status is one of :data:`STATUSES`:

* **explained**: a cause that explains applies (:func:`~pace_nb.analysis.causes.entry_causes`);
* **within seed noise: not significant**: no cause applies and |ours − paper| ≤ 2 standard errors
  of the difference (:func:`~pace_nb.analysis.causes.within_noise`) — too noisy to tell, which
  explains nothing, so it is counted apart from the causes;
* **unexplained**: neither.

An entry whose mechanism reduces it to another row of its table (a cause of a
:data:`~pace_nb.analysis.causes.REDUCING` kind: FedNova = our FedAvg, FedAux = our Local) is not a
gap of its own: it takes that row's status — explained by the reduction when the row's entry is
within :data:`~pace_nb.analysis.causes.LIST_ABOVE` points of the paper and ours within that of the
paper's row, else the row's own status (explained by the row's causes, not significant, or
unexplained) — unless a cause of its own explains it (a +CNLL row that stays at Local). Its own
seed noise is then not asked: the row's entry answers for it.

Entries count numbers of the papers; a :func:`measurement` counts ours: the same stored numbers
appear in several tables (Table 7's native rows are Table 1's, Table 5's rank 6 is Table 1's PACE)
and rows (FedNova = our FedAvg seed for seed), so the headline gives both.
"""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence

import pandas as pd

from pace_nb.analysis import causes as cz
from pace_nb.analysis.causes import EXPLAINED, LIST_ABOVE, NOT_SIGNIFICANT, STATUSES, UNEXPLAINED
from pace_nb.analysis.evidence import sibling
from pace_nb.methods.registry import canonical, ranked


@dataclass(frozen=True)
class Verdict:
    """One entry's ``status``, the ``kinds`` of cause that explain it (empty unless explained), the
    ``labels`` of every cause shown for it with its evidence (a reduction with its row's status) and
    ``noise``: the seed-noise bound of an entry not significant, else "", and the ``measurement`` it
    shows (:func:`measurement`; a row equal seed for seed to the row it reduces to shows that row's)."""

    status: str
    kinds: tuple[str, ...]
    labels: tuple[str, ...]
    noise: str = ""
    measurement: tuple = ()

    def text(self) -> str:
        """As the report prints it: ``status (noise): causes``."""
        return self.status + (f" ({self.noise})" if self.noise else "") + \
            (": " + "; ".join(self.labels) if self.labels else "")


def measurement(e: pd.Series) -> tuple:
    """The measurement an entry shows: the stored rows its number of ours is read from — setting
    (dataset, partition, K, β), method, variant, rank — and its metric. Several entries with one key
    show the same stored numbers: a table's cell repeated in another (Table 7's native rows are
    Table 1's, Table 5's rank 6 is Table 1's PACE) or Table 4's matched baseline (``ours_method``:
    our best +CNLL baseline, a Table 7 row). Local + CNLL reads Local's rows (α has nothing to add)."""
    ours = e.get("ours_method")
    method = canonical(ours if isinstance(ours, str) and ours else str(e["method"]))
    variant = "native" if (method, e["variant"]) == ("local", "cnll") else str(e["variant"])
    beta = pd.to_numeric(e.get("beta"), errors="coerce")
    return (str(e["dataset"]), str(e["partition"]), int(e["num_clients"]), None if beta != beta else float(beta),
            method, variant, int(e["rank"]) if ranked(method) else 0, str(e["metric"]))


def _far(e: pd.Series) -> bool:
    d = pd.to_numeric(e["diff"], errors="coerce")
    return bool(d == d and abs(d) > LIST_ABOVE)


def verdict(table_id: str, e: pd.Series, comp: pd.DataFrame, ev: cz.Evidence | None,
            causes: Sequence[cz.Cause] = cz.CAUSES, _seen: frozenset = frozenset()) -> Verdict:
    """The :class:`Verdict` of entry ``e`` of table ``table_id`` (``comp``: that table's entries, with
    their draw spread when known; ``ev``: the store's evidence)."""
    found = cz.entry_causes(table_id, e, ev, causes)
    labels = [lbl for _, lbl in found]
    kinds = [k for k, _ in found if k not in cz.REDUCING]
    carried = None  # the status a reduction carries over from the row it reduces to
    shows = measurement(e)
    _seen = _seen | {(canonical(str(e["method"])), str(e["variant"]))}
    for c in causes:
        i = next((j for j, lbl in enumerate(labels) if lbl.startswith(c.name + " (")), None)
        if c.parent is None or i is None:
            continue
        p = sibling(comp, e, *c.parent.of(e))
        if p is None or c.parent.of(e) in _seen or pd.isna(p["paper_mean"]):
            labels[i] += " → its row has no paper value in this table" if p is not None else \
                " → its row is not in this table"
            continue
        same = c.parent.relation == "equal"  # the same stored numbers: the row's measurement
        if not _far(p):
            shows = measurement(p) if same else shows
            residual = float(e["ours_mean"] - p["paper_mean"])
            if abs(residual) <= LIST_ABOVE:
                kinds.append(c.kind)
            else:
                labels[i] += f" → ours − paper {p['row']} = {residual:+.2f}: explains nothing"
            continue
        pv = verdict(table_id, p, comp, ev, causes, _seen)
        shows = pv.measurement if same else shows
        labels[i] += f" → {p['row']}'s entry: {pv.text()}"
        carried = pv.status if carried is None else max(carried, pv.status, key=STATUSES.index)
        if pv.status == EXPLAINED:
            kinds += [c.kind, *pv.kinds]
    kinds = sorted(dict.fromkeys(kinds), key=cz.KINDS.index)
    if kinds:
        return Verdict(EXPLAINED, tuple(kinds), tuple(labels), measurement=shows)
    noise = cz.within_noise(e) if carried is None else None
    return Verdict(carried or (NOT_SIGNIFICANT if noise is not None else UNEXPLAINED), (), tuple(labels),
                   f"≤ 2 SE = {noise:.2f}" if noise is not None else "", shows)


def _n(n: int, word: str = "entr") -> str:
    return f"{n} {word}{'y' if n == 1 else 'ies'}" if word == "entr" else f"{n} {word}{'' if n == 1 else 's'}"


def count_line(far: pd.DataFrame) -> str:
    """The headline: the entries more than :data:`LIST_ABOVE` points off and the distinct measurements
    they show; of each, how many are explained (by kind of cause: an entry explained by causes of two
    kinds counts under each), within seed noise (not significant) and unexplained. A measurement
    shown by several entries takes the worst of their statuses."""
    n = len(far)
    status = far["status"] if n else pd.Series(dtype=object)
    worst = far.assign(rank=status.map(STATUSES.index)).groupby("measurement")["rank"].max() if n else pd.Series()
    counts = {s: (int((status == s).sum()), int((worst == i).sum())) for i, s in enumerate(STATUSES)}
    kinds = far.loc[status == EXPLAINED, "kinds"] if n else pd.Series(dtype=object)
    by = [f"{k} {sum(k in ks for ks in kinds)}" for k in cz.KINDS if any(k in ks for ks in kinds)]

    def part(s: str) -> str:
        e, m = counts[s]
        return f"{s}: {e} ({_n(m, 'measurement')})"

    return (f"**Entries more than {LIST_ABOVE:g} points off: {n} ({_n(len(worst), 'distinct measurement')}); "
            f"{part(EXPLAINED)}" + (f" ({', '.join(by)})" if by else "") +
            f"; {part(NOT_SIGNIFICANT)}; {part(UNEXPLAINED)}.**")


def two_kinds_line(far: pd.DataFrame) -> str:
    """How many explained entries carry causes of two or more kinds: why the kinds add to more than
    the explained entries."""
    kinds = far.loc[far["status"] == EXPLAINED, "kinds"] if len(far) else pd.Series(dtype=object)
    multi = int(sum(len(k) > 1 for k in kinds))
    return (f"Entries explained by causes of two or more kinds: {multi} (each counted under every kind it "
            f"carries: the kinds add to {int(sum(len(k) for k in kinds))} over {len(kinds)} explained entries).")


def legend() -> str:
    """What the status column of REPRODUCTION.md's far entries says."""
    return ("Status: \"explained\" when a cause that explains is shown for that entry — a declared cause (the "
            "`Cause` footnotes under the tables: each names the tables, methods, variants, datasets, partitions, "
            "client counts and sign of the gap it is written for, and applies only where its evidence is found "
            "in the store for that entry, quoted in brackets; one that waits for an evidence cell of "
            "`configs/pace_evidence.toml` only where that cell, in the store's `evidence/` folder, closes at least "
            f"half the gap and comes within {LIST_ABOVE:g} points or 2 standard errors of the paper) or \"mask draw\" (Louvain, METIS) / \"partition "
            f"draw\" (Dirichlet) when the paper's value lies inside the range of at least {cz.DRAW_CAUSE_MIN} of "
            "our stored draws of that setting (no interval beyond them); an entry whose mechanism reduces it to "
            "another row of its table (method identity, reduces to Local: \"→\") takes that row's status "
            f"(explained by the reduction when that row is within {LIST_ABOVE:g} points of the paper). Else "
            f"\"{NOT_SIGNIFICANT}\" when the gap is within 2 standard errors of the difference of the two means "
            "(both seed spreads, our seed count for both): too noisy to tell, no cause. Else \"unexplained\". "
            "A distinct measurement is one of our stored numbers (a setting's method, variant, rank and metric; a "
            "row equal seed for seed to the row it reduces to is that row's), however many tables and rows show "
            "it; it takes the worst status of its entries. \"Our draws\": the range of our means over the stored "
            "draws of that setting (data seed 2024 and the cells of `configs/pace_draws.toml` in the store's "
            "`draws/` folder) and their number.")
