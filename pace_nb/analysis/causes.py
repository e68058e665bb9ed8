"""Causes of the gaps to the papers, entry by entry (docs/DESIGN.md §12).

A gap more than :data:`LIST_ABOVE` points off gets a cause only when one is shown for *that entry*:

* a declared :class:`Cause` whose :class:`Scope` (tables, methods, variants, datasets, partitions,
  client counts, the sign of ours − paper) covers the entry AND whose evidence check finds its
  evidence in the store for that entry (a cause whose evidence is absent applies to nothing);
* "seed noise": |ours − paper| ≤ 2 standard errors of the difference (both seed spreads);
* "mask draw" (Louvain, METIS: a data seed redraws the 20/40/40 masks) / "partition draw"
  (Dirichlet: it redraws the clients' class mix too): the paper's value lies inside the
  [min, max] of at least :data:`DRAW_CAUSE_MIN` of our stored draws of that setting.

Everything else is unexplained. An entry lists every cause that applies, in the fixed order of
:data:`KINDS` (never in footnote order). The footnotes that explain nothing (implementation
notes) are :mod:`pace_nb.analysis.gap_notes`; they are never a cause.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Callable, Mapping, Sequence

import pandas as pd

from pace_nb.analysis.spear_comparison import is_comparison
from pace_nb.experiments.store import normalize_rows
from pace_nb.methods.registry import canonical, method_label

#: A cell farther from the paper than this (points) is listed with its cause.
LIST_ABOVE = 2.0
#: Fewest stored draws of a setting (the main one included) whose range can hold the paper's value.
DRAW_CAUSE_MIN = 5
#: Kinds of cause, in the order an entry lists them and the count line counts them.
KINDS: tuple[str, ...] = ("method identity", "reduces to Local", "paper row below its own Local", "hyperparameter",
                          "seed noise", "mask draw", "partition draw")
UNEXPLAINED = "unexplained"


@dataclass(frozen=True)
class Scope:
    """The entries a cause is written for; an empty field admits any value. ``sign``: +1 only
    entries where ours is above the paper, −1 only below, 0 either."""

    tables: tuple[str, ...]
    methods: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    clients: tuple[int, ...] = ()
    sign: int = 0

    def __post_init__(self):
        if self.sign not in (-1, 0, 1):
            raise ValueError(f"Scope.sign must be -1, 0 or 1, got {self.sign}")
        if not self.tables:
            raise ValueError("a Scope names its tables")

    def covers(self, table_id: str, e: pd.Series) -> bool:
        if str(table_id) not in self.tables:
            return False
        checks = ((self.methods, canonical(str(e["method"]))), (self.variants, e["variant"]),
                  (self.datasets, e["dataset"]), (self.partitions, e["partition"]),
                  (self.clients, int(e["num_clients"])))
        if any(allowed and value not in allowed for allowed, value in checks):
            return False
        d = float(e["diff"])
        return self.sign == 0 or (d == d and d * self.sign > 0)

    def describe(self) -> str:
        parts = [("Table " if len(self.tables) == 1 else "Tables ") + ", ".join(self.tables)]
        parts += [" / ".join(method_label(m) for m in self.methods)] if self.methods else []
        parts += [" / ".join(self.variants)] if self.variants else []
        parts += [" / ".join(self.datasets)] if self.datasets else []
        parts += [" / ".join(self.partitions)] if self.partitions else []
        parts += ["K = " + " / ".join(map(str, self.clients))] if self.clients else []
        parts += [{1: "ours above the paper", -1: "ours below the paper", 0: "either sign"}[self.sign]]
        return "; ".join(parts)


class Evidence:
    """What the store holds, for the causes' checks: its pooled protocol rows (per seed) and every
    table's comparison frame (:func:`~pace_nb.analysis.tables.build_tables`)."""

    def __init__(self, rows: pd.DataFrame | None, comps: Mapping[str, pd.DataFrame]):
        r = normalize_rows(rows) if rows is not None and len(rows) else None
        if r is not None:
            r = r[(r["receiver"] == -1) & ~is_comparison(r)]
            r = r.assign(method=r["method"].map(canonical), beta=r["beta"].fillna(-1.0))
        self.rows, self.comps = r, comps

    def seeds(self, e: pd.Series, method: str, variant: str, metric: str) -> pd.Series:
        """Our per-seed values of ``metric`` for ``method``/``variant`` in entry ``e``'s setting."""
        r = self.rows
        if r is None or metric not in r.columns:
            return pd.Series(dtype=float)
        beta = -1.0 if e["beta"] != e["beta"] else float(e["beta"])
        sel = r[(r["dataset"] == e["dataset"]) & (r["partition"] == e["partition"])
                & (r["num_clients"] == int(e["num_clients"])) & ((r["beta"] - beta).abs() < 1e-9)
                & (r["method"] == method) & (r["variant"] == variant)]
        return sel.groupby("seed")[metric].mean().dropna()

    def sibling(self, table_id: str, e: pd.Series, method: str, variant: str) -> pd.Series | None:
        """The entry of the same table and column (dataset, metric, setting) for another method."""
        comp = self.comps.get(str(table_id))
        if comp is None or comp.empty:
            return None
        same_beta = (comp["beta"].isna() & (e["beta"] != e["beta"])) | ((comp["beta"] - e["beta"]).abs() < 1e-9)
        hit = comp[(comp["dataset"] == e["dataset"]) & (comp["metric"] == e["metric"])
                   & (comp["partition"] == e["partition"]) & (comp["num_clients"] == e["num_clients"]) & same_beta
                   & (comp["method"].map(canonical) == method) & (comp["variant"] == variant)]
        return hit.iloc[0] if len(hit) else None


Check = Callable[[Evidence, str, pd.Series], "str | None"]


@dataclass(frozen=True)
class Cause:
    """A cause of some gaps: ``text`` says why, ``scope`` which entries it is written for, and
    ``evidence`` finds, per entry, what in the store supports it (its text) or None (it does not apply)."""

    name: str
    kind: str
    text: str
    scope: Scope
    evidence: Check

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"cause {self.name}: kind {self.kind!r} is not one of {KINDS}")

    def applies(self, ev: Evidence, table_id: str, e: pd.Series) -> str | None:
        return self.evidence(ev, table_id, e) if self.scope.covers(table_id, e) else None


def against_reference(ref_method: str, relation: str, ref_variant: str | None = None, paper_side: int = 0) -> Check:
    """Evidence that the entry's gap is the paper's own difference to a reference row of the same
    table and column (``ref_method``/``ref_variant``, default the entry's variant):

    * in the store, ours relates to our reference as ``relation`` says — ``"equal"`` (every common
      seed identical), ``"near"`` (mean difference within 1 point), ``"not_below"`` (not more than
      1 point below), on at least 2 common seeds;
    * in the paper, the entry differs from its own reference by more than :data:`LIST_ABOVE`
      (``paper_side`` −1: the paper's entry must lie below its reference, +1 above);
    * ours lies within :data:`LIST_ABOVE` of the paper's reference: the reference accounts for the gap.
    """
    if relation not in ("equal", "near", "not_below"):
        raise ValueError(f"relation must be equal, near or not_below, got {relation!r}")

    def check(ev: Evidence, table_id: str, e: pd.Series) -> str | None:
        variant = ref_variant or str(e["variant"])
        sib = ev.sibling(table_id, e, ref_method, variant)
        if sib is None or sib["paper_mean"] != sib["paper_mean"] or e["ours_mean"] != e["ours_mean"]:  # NaN
            return None
        paper_gap = float(e["paper_mean"] - sib["paper_mean"])
        residual = float(e["ours_mean"] - sib["paper_mean"])
        if abs(paper_gap) <= LIST_ABOVE or paper_gap * paper_side < 0 or abs(residual) > LIST_ABOVE:
            return None
        a = ev.seeds(e, canonical(str(e["method"])), str(e["variant"]), str(e["metric"]))
        b = ev.seeds(e, ref_method, variant, str(e["metric"]))
        common = a.index.intersection(b.index)
        if len(common) < 2:
            return None
        delta = a[common] - b[common]
        ref = method_label(ref_method) + ("+CNLL" if variant == "cnll" else "")
        if relation == "equal" and float(delta.abs().max()) <= 1e-6:
            ours = f"ours = our {ref} on {len(common)}/{len(common)} seeds"
        elif (relation == "near" and abs(float(delta.mean())) <= 1.0) or (relation == "not_below" and float(delta.mean()) >= -1.0):
            ours = f"ours − our {ref} = {float(delta.mean()):+.2f} over {len(common)} seeds"
        else:
            return None
        return f"{ours}; paper − paper {ref} = {paper_gap:+.2f}; ours − paper {ref} = {residual:+.2f}"

    return check


def stored_variant(method: str, param: str, value: float) -> Check:
    """Evidence that the store holds rows of ``method`` run with ``param = value`` in the entry's
    setting (a diagnostic cell) and that the paper's value lies between those rows' mean and ours."""
    import json

    def check(ev: Evidence, table_id: str, e: pd.Series) -> str | None:
        r = ev.rows
        if r is None:
            return None
        sel = r[(r["method"] == method) & (r["dataset"] == e["dataset"]) & (r["partition"] == e["partition"])
                & (r["num_clients"] == int(e["num_clients"])) & (r["variant"] == e["variant"])]
        hit = sel[sel["params"].map(lambda p: _param(json, p, param) == value)]
        if hit.empty or str(e["metric"]) not in hit:
            return None
        alt = float(hit[str(e["metric"])].mean())
        lo, hi = sorted((alt, float(e["ours_mean"])))
        if not lo <= float(e["paper_mean"]) <= hi:
            return None
        return f"{param} = {value:g}: {alt:.2f} over {hit['seed'].nunique()} seeds (store)"

    return check


def _param(json, text, name):
    try:
        obj = json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        return None
    return obj.get(name) if isinstance(obj, dict) else None


_BASELINE_TABLES = ("1", "7", "8", "9", "10", "11", "12")
#: The declared causes (docs/DESIGN.md §12); each applies only inside its scope and with its evidence.
CAUSES: tuple[Cause, ...] = (
    Cause("fednova-is-fedavg", "method identity",
          "Full-batch local training with equal epochs gives every client the same ‖a_k‖₁, so FedNova's "
          "normalised update is FedAvg's: ours is our FedAvg seed for seed, while the paper's FedNova row "
          "differs from its own FedAvg row — the paper's FedNova is not this algorithm (an SGD-trained "
          "FedNova is a candidate, not shown here). Applies where ours lies within 2 points of the paper's "
          "FedAvg.",
          Scope(_BASELINE_TABLES, methods=("fednova",)), against_reference("fedavg", "equal")),
    Cause("fedaux-is-local", "reduces to Local",
          "FedAux-1R with the released similarity over all parameters: after 100 local epochs the clients' "
          "parameter vectors are far apart, exp(10·cos) keeps S_ii near 1 and ours stays at our Local, while "
          "the paper's row is far from its own Local (the paper gives no FedAux hyperparameters). Applies where "
          "ours lies within 2 points of the paper's Local.",
          Scope(_BASELINE_TABLES, methods=("fedaux1r",)), against_reference("local", "near", ref_variant="native")),
    Cause("cnll-below-local", "paper row below its own Local",
          "CNLL chooses α by validation NLL with α = 0 (Local itself) a candidate, so a +CNLL row does not fall "
          "far below Local: ours does not, the paper's does. Applies where ours lies within 2 points of the "
          "paper's Local.",
          Scope(("7",), variants=("cnll",), sign=1),
          against_reference("local", "not_below", ref_variant="native", paper_side=-1)),
    Cause("fedprox-mu", "hyperparameter",
          "FedProx μ: ours uses OpenFGL's μ = 1e-3; under Adam with weight decay 5e-4 a weight without CE "
          "signal settles near μ/(μ + wd)·W0, so μ = 1e-2 keeps more of W0 and scores lower on PubMed. Applies "
          "where a stored μ = 1e-2 cell of that setting brackets the paper's value with ours.",
          Scope(("1", "7", "8", "9", "10"), methods=("fedprox",), datasets=("PubMed",), partitions=("louvain",),
                sign=1),
          stored_variant("fedprox", "mu", 0.01)),
)


def seed_noise(entry: pd.Series) -> float:
    """Standard error of ours − paper from both seed spreads, ``sqrt(s_o²/n + s_p²/n)`` with n our
    seed count (the papers report as many seeds as their protocols have); NaN when unknown."""
    n = entry.get("n_seeds")
    s_o, s_p = (pd.to_numeric(entry.get(k), errors="coerce") for k in ("ours_std", "paper_std"))
    if not n or n != n or n < 2 or (s_o != s_o and s_p != s_p):
        return math.nan
    return math.sqrt(((0 if s_o != s_o else s_o) ** 2 + (0 if s_p != s_p else s_p) ** 2) / n)


def draw_cause(entry: pd.Series) -> tuple[str, str] | None:
    """``(kind, label)`` when the paper's value lies inside [draw_min, draw_max] of at least
    :data:`DRAW_CAUSE_MIN` stored draws of the entry's setting (no interval beyond them), else None."""
    n = entry.get("n_draws", 0)
    lo, hi, paper = entry.get("draw_min", math.nan), entry.get("draw_max", math.nan), entry["paper_mean"]
    if not n or n != n or int(n) < DRAW_CAUSE_MIN or lo != lo or not lo <= paper <= hi:
        return None
    kind = "partition draw" if entry.get("partition") == "dirichlet" else "mask draw"
    return kind, f"{kind} (paper inside our {int(n)} draws {lo:.2f}–{hi:.2f})"


def entry_causes(table_id: str, entry: pd.Series, ev: Evidence | None,
                 causes: Sequence[Cause] = CAUSES) -> list[tuple[str, str]]:
    """Every cause that applies to one entry, ``(kind, label)``, in :data:`KINDS` order."""
    found = []
    for c in causes:
        why = c.applies(ev, table_id, entry) if ev is not None else None
        if why:
            found.append((c.kind, f"{c.name} ({why})"))
    se = seed_noise(entry)
    if se == se and abs(entry["diff"]) <= 2 * se:
        found.append(("seed noise", f"seed noise (≤ 2 SE = {2 * se:.2f})"))
    drawn = draw_cause(entry)
    if drawn:
        found.append(drawn)
    return sorted(found, key=lambda kl: (KINDS.index(kl[0]), kl[1]))


def count_line(far: pd.DataFrame) -> str:
    """The headline: entries off by more than :data:`LIST_ABOVE` points; with an entry-specific cause
    (by kind; an entry with causes of two kinds counts under each); unexplained."""
    n = len(far)
    kinds = far["kinds"] if n else pd.Series(dtype=object)
    caused = int(sum(bool(k) for k in kinds))
    by = [f"{k} {sum(k in ks for ks in kinds)}" for k in KINDS if any(k in ks for ks in kinds)]
    return (f"**Entries more than {LIST_ABOVE:g} points off: {n}; with an entry-specific cause: {caused}"
            + (f" ({', '.join(by)})" if by else "") + f"; unexplained: {n - caused}.**")


def applied(name: str, far: pd.DataFrame) -> int:
    """How many of the entries in ``far`` (:func:`~pace_nb.analysis.report.far_cells`) cause ``name`` applies to."""
    return int(sum(any(lbl.startswith(name + " (") for lbl in labels) for labels in far["labels"])) if len(far) else 0


def declared(far: pd.DataFrame, causes: Sequence[Cause] = CAUSES) -> list[str]:
    """One line per declared cause: name, kind, scope, text and how many far entries it applies to."""
    out = []
    for c in causes:
        n = applied(c.name, far)
        where = f"applies to {n} entr{'y' if n == 1 else 'ies'}" if n else \
            "its evidence is in the store for no entry: applies to none"
        out.append(f"`{c.name}` ({c.kind}; scope: {c.scope.describe()}): {c.text} — {where}.")
    return out


def footnotes(table_id: str, far: pd.DataFrame, causes: Sequence[Cause] = CAUSES) -> list[str]:
    """One line per declared cause whose scope names this table: how many of this table's far
    entries its evidence was found for (the cause itself: :func:`declared`)."""
    mine = far[far["table"] == table_id] if len(far) else far
    out = []
    for c in causes:
        if table_id in c.scope.tables:
            n = applied(c.name, mine)
            out.append(f"Cause `{c.name}` ({c.kind}): " + (f"applies to {n} entr{'y' if n == 1 else 'ies'} here."
                                                          if n else "applies to no entry here."))
    return out
