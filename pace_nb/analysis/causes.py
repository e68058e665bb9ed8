"""Causes of the gaps to the papers, entry by entry (docs/DESIGN.md §12).

A gap more than :data:`LIST_ABOVE` points off gets a cause only when one is shown for *that entry*:

* a declared :class:`Cause` whose :class:`Scope` (tables, methods, variants, datasets, partitions,
  client counts, the sign of ours − paper) covers the entry AND whose evidence check finds its
  evidence in the store for that entry (a cause whose evidence is absent applies to nothing);
  a cause of a :data:`REDUCING` kind (FedNova = our FedAvg, FedAux = our Local) names the
  row the entry reduces to (:class:`Parent`), whose status the entry then takes
  (:mod:`pace_nb.analysis.verdicts`);
* "mask draw" (Louvain, METIS: a data seed redraws the 20/40/40 masks) / "partition draw"
  (Dirichlet: it redraws the clients' class mix too): the paper's value lies inside the
  [min, max] of at least :data:`DRAW_CAUSE_MIN` of our stored draws of that setting.

An entry lists every cause that applies, in the fixed order of :data:`KINDS` (never in footnote
order). "Within seed noise" (|ours − paper| ≤ 2 standard errors of the difference,
:func:`within_noise`) is no cause: it says the gap is not significant, not why it is there.
The footnotes that explain nothing (implementation notes) are :mod:`pace_nb.analysis.gap_notes`;
they are never a cause.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Callable, Sequence

import pandas as pd

from pace_nb.analysis.evidence import COLLAPSED, Evidence, EvidenceCell, collapsed
from pace_nb.methods.registry import canonical, method_label

#: A cell farther from the paper than this (points) is listed with its cause.
LIST_ABOVE = 2.0
#: Fewest stored draws of a setting (the main one included) whose range can hold the paper's value.
DRAW_CAUSE_MIN = 5
#: Kinds of cause (each explains a gap), in the order an entry lists them and the count line counts them.
KINDS: tuple[str, ...] = ("method identity", "reduces to Local", "paper row below its own Local", "hyperparameter",
                          "mask draw", "partition draw")
#: Kinds whose mechanism reduces the entry to another row of its table: the entry takes that row's status.
REDUCING: tuple[str, ...] = ("method identity", "reduces to Local")
#: What a gap within 2 standard errors of the difference is: no cause, too noisy to tell.
NOT_SIGNIFICANT = "within seed noise: not significant"
EXPLAINED, UNEXPLAINED = "explained", "unexplained"
#: An entry's statuses (:mod:`pace_nb.analysis.verdicts`), from the best to the worst.
STATUSES: tuple[str, ...] = (EXPLAINED, NOT_SIGNIFICANT, UNEXPLAINED)


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


Check = Callable[[Evidence, str, pd.Series], "str | None"]


@dataclass(frozen=True)
class Parent:
    """The row of the same table and column an entry reduces to: ``method`` with ``variant`` (None:
    the entry's own variant), and how ours relates to it in the store (:func:`store_relation`):
    ``"equal"`` (the same numbers seed for seed) or ``"near"``."""

    method: str
    variant: str | None = None
    relation: str = "equal"

    def __post_init__(self):
        if self.relation not in ("equal", "near"):
            raise ValueError(f"a reduction's relation is equal or near, got {self.relation!r}")

    def of(self, e: pd.Series) -> tuple[str, str]:
        return self.method, self.variant or str(e["variant"])


@dataclass(frozen=True)
class Cause:
    """A cause of some gaps: ``text`` says why, ``scope`` which entries it is written for, and
    ``evidence`` finds, per entry, what in the store supports it (its text) or None (it does not apply).
    A cause of a :data:`REDUCING` kind names its ``parent`` row, and its evidence is that ours
    reduces to our parent row in the store (:func:`reduces_to`)."""

    name: str
    kind: str
    text: str
    scope: Scope
    evidence: Check
    parent: Parent | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"cause {self.name}: kind {self.kind!r} is not one of {KINDS}")
        if (self.kind in REDUCING) != (self.parent is not None):
            raise ValueError(f"cause {self.name}: a cause of kind {self.kind!r} "
                             + ("names the row it reduces to (parent)" if self.kind in REDUCING else "has no parent row"))

    def applies(self, ev: Evidence, table_id: str, e: pd.Series) -> str | None:
        return self.evidence(ev, table_id, e) if self.scope.covers(table_id, e) else None


RELATIONS: tuple[str, ...] = ("equal", "near", "not_below")


def store_relation(ev: Evidence, e: pd.Series, ref_method: str, ref_variant: str, relation: str) -> str | None:
    """How ours relates in the store to our ``ref_method``/``ref_variant`` row of entry ``e``'s setting,
    seed for seed on at least 2 common seeds — ``"equal"`` (every common seed identical), ``"near"``
    (mean difference within 1 point), ``"not_below"`` (not more than 1 point below) — as text, or None."""
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {RELATIONS}, got {relation!r}")
    a = ev.seeds(e, canonical(str(e["method"])), str(e["variant"]), str(e["metric"]))
    b = ev.seeds(e, ref_method, ref_variant, str(e["metric"]))
    common = a.index.intersection(b.index)
    if len(common) < 2:
        return None
    delta = a[common] - b[common]
    ref = method_label(ref_method) + ("+CNLL" if ref_variant == "cnll" else "")
    if relation == "equal" and float(delta.abs().max()) <= 1e-6:
        return f"ours = our {ref} on {len(common)}/{len(common)} seeds"
    if (relation == "near" and abs(float(delta.mean())) <= 1.0) or (relation == "not_below" and float(delta.mean()) >= -1.0):
        return f"ours − our {ref} = {float(delta.mean()):+.2f} over {len(common)} seeds"
    return None


def against_reference(ref_method: str, relation: str, ref_variant: str | None = None, paper_side: int = 0) -> Check:
    """Evidence that the entry's gap is the paper's own difference to a reference row of the same
    table and column (``ref_method``/``ref_variant``, default the entry's variant):

    * in the store, ours relates to our reference as ``relation`` says (:func:`store_relation`);
    * in the paper, the entry differs from its own reference by more than :data:`LIST_ABOVE`
      (``paper_side`` −1: the paper's entry must lie below its reference, +1 above);
    * ours lies within :data:`LIST_ABOVE` of the paper's reference: the reference accounts for the gap.
    """
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {RELATIONS}, got {relation!r}")

    def check(ev: Evidence, table_id: str, e: pd.Series) -> str | None:
        variant = ref_variant or str(e["variant"])
        sib = ev.sibling(table_id, e, ref_method, variant)
        if sib is None or sib["paper_mean"] != sib["paper_mean"] or e["ours_mean"] != e["ours_mean"]:  # NaN
            return None
        paper_gap = float(e["paper_mean"] - sib["paper_mean"])
        residual = float(e["ours_mean"] - sib["paper_mean"])
        if abs(paper_gap) <= LIST_ABOVE or paper_gap * paper_side < 0 or abs(residual) > LIST_ABOVE:
            return None
        ours = store_relation(ev, e, ref_method, variant, relation)
        ref = method_label(ref_method) + ("+CNLL" if variant == "cnll" else "")
        return None if ours is None else \
            f"{ours}; paper − paper {ref} = {paper_gap:+.2f}; ours − paper {ref} = {residual:+.2f}"

    return check


def reduction(name: str, kind: str, text: str, scope: Scope, parent: Parent) -> Cause:
    """A cause of a :data:`REDUCING` kind: its evidence is that ours relates to our ``parent`` row as
    ``parent.relation`` says (:func:`store_relation`) and that the parent row is in the entry's table;
    whether it explains the entry is the parent entry's status
    (:func:`~pace_nb.analysis.verdicts.verdict`). The text adds the paper's own difference to the parent."""
    def check(ev: Evidence, table_id: str, e: pd.Series) -> str | None:
        method, variant = parent.of(e)
        sib = ev.sibling(table_id, e, method, variant)
        ours = store_relation(ev, e, method, variant, parent.relation) if sib is not None else None
        if ours is None or sib is None:
            return None
        if not (sib["paper_mean"] == sib["paper_mean"] and e["paper_mean"] == e["paper_mean"]):
            return ours
        ref = method_label(method) + ("+CNLL" if variant == "cnll" else "")
        return f"{ours}; paper − paper {ref} = {float(e['paper_mean'] - sib['paper_mean']):+.2f}"

    return Cause(name, kind, text, scope, check, parent)


_BASELINE_TABLES = ("1", "7", "8", "9", "10", "11", "12")
#: The tables with entries of Louvain K = 10, the setting of the evidence cells (configs/pace_evidence.toml).
_K10_TABLES = ("1", "7", "10")
#: FedRCL's evidence grid (configs/pace_evidence.toml): weight × τ, the released (1, 0.05) included.
FEDRCL_GRID: tuple[dict[str, float], ...] = tuple({"weight": w, "tau": t} for w in (1.0, 10.0) for t in (0.05, 0.5))
#: The declared causes (docs/DESIGN.md §12); each applies only inside its scope and with its evidence.
CAUSES: tuple[Cause, ...] = (
    reduction("fednova-is-fedavg", "method identity",
              "Full-batch local training with equal epochs gives every client the same ‖a_k‖₁, so FedNova's "
              "normalised update is FedAvg's: ours is our FedAvg seed for seed, while the paper's FedNova row "
              "differs from its own FedAvg row — the paper's FedNova is not this algorithm (an SGD-trained FedNova "
              "is cause `fednova-sgd`, where its evidence cell agrees). Where ours = our FedAvg, the entry takes the "
              "status of our FedAvg's entry: explained by this identity when that entry is within 2 points of the "
              "paper, else that entry's own status.",
              Scope(_BASELINE_TABLES, methods=("fednova",)), Parent("fedavg", relation="equal")),
    reduction("fedaux-is-local", "reduces to Local",
              "FedAux-1R with the released similarity over all parameters: after 100 local epochs the clients' "
              "parameter vectors are far apart, exp(10·cos) keeps S_ii near 1 and ours stays at our Local, while "
              "the paper's row is far from its own Local (the paper gives no FedAux hyperparameters). Where ours "
              "is within 1 point of our Local, the entry takes the status of our Local's entry: explained by this "
              "reduction when that entry is within 2 points of the paper, else that entry's own status.",
              Scope(_BASELINE_TABLES, methods=("fedaux1r",)), Parent("local", "native", relation="near")),
    Cause("cnll-below-local", "paper row below its own Local",
          "CNLL chooses α by validation NLL with α = 0 (Local itself) a candidate, so a +CNLL row does not fall "
          "far below Local: ours does not, the paper's does. Applies where ours lies within 2 points of the "
          "paper's Local.",
          Scope(("7",), variants=("cnll",), sign=1),
          against_reference("local", "not_below", ref_variant="native", paper_side=-1)),
    Cause("fedprox-mu", "hyperparameter",
          "FedProx μ: ours uses OpenFGL's μ = 1e-3; under Adam with weight decay 5e-4 a weight without CE signal "
          "settles near μ/(μ + wd)·W0, so μ sets how much of W0 survives, and the FedProx note's μ = 1e-2 is the "
          "other value of FedProx's grid in question. Applies where the μ = 1e-2 evidence cell of the entry's "
          "setting reproduces the paper's value (the evidence rule).",
          Scope(_K10_TABLES, methods=("fedprox",), partitions=("louvain",), clients=(10,)),
          EvidenceCell("fedprox", ({"mu": 0.01},))),
    Cause("fednova-sgd", "hyperparameter",
          "FedNova with local momentum SGD (the FedNova paper's local solver, ρ = 0.9, with its momentum ‖a_k‖₁) "
          "instead of the matched Adam: at the matched learning rate 100 full-batch SGD steps leave the model "
          "near its initialisation. Applies where the `fednova_sgd` evidence cell of the entry's setting "
          "reproduces the paper's FedNova value (the evidence rule).",
          Scope(_K10_TABLES, methods=("fednova",), partitions=("louvain",), clients=(10,)),
          EvidenceCell("fednova_sgd", ({},))),
    Cause("fedpub-depth", "hyperparameter",
          "FedPub's depth: ours is OpenFGL's 3-layer masked model, the PACE paper says every method uses the "
          "matched 2-layer GCN. Applies where the `layers = 2` evidence cell of the entry's setting reproduces "
          "the paper's value (the evidence rule).",
          Scope(_K10_TABLES, methods=("fedpub",), partitions=("louvain",), clients=(10,)),
          EvidenceCell("fedpub", ({"layers": 2},))),
    Cause("fedrcl-collapse", "hyperparameter",
          "FedRCL's weight and τ: the paper's FedRCL rows score at the majority-class level (e.g. CS macro-F1 "
          "2.97), ours above it. Applies where a point of the evidence grid (weight 1 / 10 × τ 0.05 / 0.5) in "
          "the entry's setting reproduces the paper's value (the evidence rule) with its predictions collapsed "
          f"(predicted-class entropy ≤ {COLLAPSED:g} of log C).",
          Scope(_K10_TABLES, methods=("fedrcl",), datasets=("CiteSeer", "PubMed", "CS"), partitions=("louvain",),
                clients=(10,), sign=1),
          EvidenceCell("fedrcl", FEDRCL_GRID, collapsed)),
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


def within_noise(entry: pd.Series) -> float | None:
    """Two standard errors (:func:`seed_noise`) when |ours − paper| lies within them — the gap is
    :data:`NOT_SIGNIFICANT` — else None."""
    se = seed_noise(entry)
    return 2 * se if se == se and abs(float(entry["diff"])) <= 2 * se else None


def entry_causes(table_id: str, entry: pd.Series, ev: Evidence | None,
                 causes: Sequence[Cause] = CAUSES) -> list[tuple[str, str]]:
    """Every cause that applies to one entry, ``(kind, label)``, in :data:`KINDS` order: the declared
    causes whose scope and evidence hold, and the draw rule (never seed noise: :func:`within_noise`)."""
    found = []
    for c in causes:
        why = c.applies(ev, table_id, entry) if ev is not None else None
        if why:
            found.append((c.kind, f"{c.name} ({why})"))
    drawn = draw_cause(entry)
    if drawn:
        found.append(drawn)
    return sorted(found, key=lambda kl: (KINDS.index(kl[0]), kl[1]))


def _applies(name: str, far: pd.DataFrame) -> pd.Series:
    return far["labels"].map(lambda labels: any(lbl.startswith(name + " (") for lbl in labels)) if len(far) else \
        pd.Series(dtype=bool)


def applied(name: str, far: pd.DataFrame) -> int:
    """How many of the entries in ``far`` (:func:`~pace_nb.analysis.report.far_cells`) cause ``name`` applies to."""
    return int(_applies(name, far).sum())


def _where(c: Cause, far: pd.DataFrame) -> str:
    """How many entries of ``far`` ``c`` applies to; for a reduction, the statuses they take."""
    hit = _applies(c.name, far)
    n = int(hit.sum())
    where = f"applies to {n} entr{'y' if n == 1 else 'ies'}"
    if n and c.parent is not None and "status" in far:
        counts = far.loc[hit, "status"].value_counts()
        where += " (their statuses: " + ", ".join(f"{s} {counts[s]}" for s in STATUSES if s in counts) + ")"
    return where


def declared(far: pd.DataFrame, causes: Sequence[Cause] = CAUSES) -> list[str]:
    """One line per declared cause: name, kind, scope, text and how many far entries it applies to."""
    out = []
    for c in causes:
        where = _where(c, far) if applied(c.name, far) else \
            "its evidence is in the store for no entry: applies to none"
        out.append(f"`{c.name}` ({c.kind}; scope: {c.scope.describe()}): {c.text} — {where}.")
    return out


def footnotes(table_id: str, far: pd.DataFrame, causes: Sequence[Cause] = CAUSES) -> list[str]:
    """One line per declared cause whose scope names this table: how many of this table's far
    entries its evidence was found for (the cause itself: :func:`declared`)."""
    mine = far[far["table"] == table_id] if len(far) else far
    return [f"Cause `{c.name}` ({c.kind}): " + (f"{_where(c, mine)} here." if applied(c.name, mine)
                                                else "applies to no entry here.")
            for c in causes if table_id in c.scope.tables]
