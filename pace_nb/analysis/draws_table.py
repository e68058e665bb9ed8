"""Table 12's draws beside the paper, as markdown: shared by REPRODUCTION.md
(:mod:`~pace_nb.analysis.report`) and README's block (:mod:`~pace_nb.analysis.readme_block`),
with the cell formatting both use. Below both, so neither imports the other back."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from pace_nb.analysis import causes as cz

if TYPE_CHECKING:
    from pace_nb.analysis.report import Analysis

#: The datasets of the README's and the draws' tables, in the papers' order.
DATASETS = ("Cora", "CiteSeer", "PubMed", "CS", "Computers")


def num(v, fmt: str = "{:.2f}") -> str:
    """``v`` formatted, or "–" for None / NaN."""
    return "–" if v is None or v != v else fmt.format(v)


def entry(comp: pd.DataFrame, **match) -> pd.Series | None:
    """The first row of ``comp`` whose columns equal ``match``, or None."""
    sel = comp
    for k, v in match.items():
        sel = sel[sel[k] == v]
    return sel.iloc[0] if len(sel) else None


def draws_table(an: Analysis, level: str = "###") -> list[str]:
    """Table 12's Local and PACE accuracy on data seed 2024, our range over the stored partition
    draws and the paper's value, per dataset (also in REPRODUCTION.md)."""
    comp, spread = an.comps.get("12"), an.spreads.get("12")
    if comp is None or comp.empty or spread is None:
        return []
    j = comp.join(spread)
    out = ["", f"{level} Table 12 (Dirichlet β = 0.5): our partition draws beside the paper (accuracy %)", "",
           "Ours on data seed 2024 (the table's), the range of our means over the stored draws (their number) and "
           "the paper's one draw; \"inside\" when the paper's value lies in that range "
           f"(a \"partition draw\" cause needs at least {cz.DRAW_CAUSE_MIN} draws).", "",
           "| dataset | Local (2024) | Local: our draws | Local: paper | PACE (2024) | PACE: our draws | PACE: paper |",
           "|---|---|---|---|---|---|---|"]
    for d in DATASETS:
        cells = []
        for method, variant in (("local", "native"), ("pace", "full")):
            e = entry(j, dataset=d, method=method, variant=variant, metric="acc")
            if e is None:
                cells += ["–", "–", "–"]
                continue
            n = int(e["n_draws"]) if e["n_draws"] == e["n_draws"] else 0
            rng = f"{e['draw_min']:.2f}–{e['draw_max']:.2f} ({n})" if n else "–"
            inside = n and e["draw_min"] <= e["paper_mean"] <= e["draw_max"]
            cells += [num(e["ours_mean"]), rng, num(e["paper_mean"]) + (" inside" if inside else "")]
        out.append(f"| {d} | " + " | ".join(cells) + " |")
    return out
