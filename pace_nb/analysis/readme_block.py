"""The README's reproduction and SPEAR sections: a block generated from the results store.

``pace-nb report`` writes it between :data:`BEGIN` and :data:`END` in README.md and ``--check``
compares it, so no number in those sections is typed by hand: every one is read from the same
:class:`~pace_nb.analysis.report.Analysis` as REPRODUCTION.md.
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from pace_nb.analysis import causes as cz
from pace_nb.analysis import verdicts as vd
from pace_nb.analysis.draws_table import DATASETS as _DATASETS, draws_table, entry as _entry, num as _n
from pace_nb.analysis.report import PACE_MAIN_TABLES, Analysis, agreement, bound_lines, report_and_analysis
from pace_nb.analysis.tables import full_seeds, seeds_note
from pace_nb.core.errors import ConfigError
from pace_nb.methods.registry import method_label

BEGIN = "<!-- pace-nb report: begin (generated from the shipped store by `pace-nb report`; do not edit) -->"
END = "<!-- pace-nb report: end -->"


def _pct(v) -> str:
    return "–" if v is None else f"{100 * v:.0f} %"


def _pair(comp: pd.DataFrame, fmt: str = "{:.2f}", **match) -> str:
    e = _entry(comp, **match)
    return "" if e is None else f"{_n(e['ours_mean'], fmt)} / {_n(e['paper_mean'], fmt)}"


def _status(an: Analysis) -> list[str]:
    pace = [an.comps[t] for t in PACE_MAIN_TABLES if t in an.comps and len(an.comps[t])]
    out = ["## Reproduction status", "",
           "Every table of both papers, ours beside the paper's, is in [REPRODUCTION.md](REPRODUCTION.md), generated "
           "by `pace-nb report` from the shipped store; this section is generated with it."]
    if pace:
        both = pd.concat(pace, ignore_index=True)
        a, lp = agreement(both), agreement(both, ("local", "pace"))
        out[-1] += (f" Over PACE Tables 1–12, **{_pct(a['within_1'])} / {_pct(a['within_2'])} / {_pct(a['within_5'])}**"
                    f" of the {a['run']} entries run are within 1 / 2 / 5 points of the paper, and "
                    f"**{_pct(lp['within_1'])} of the {lp['run']} Local and PACE entries are within 1 point**.")
    out += ["", "Each entry more than 2 points off is listed there with its status: explained by a cause shown for "
            "it (a declared cause applied only inside its scope and where its evidence is in the store, or the "
            f"paper's value inside at least {cz.DRAW_CAUSE_MIN} of our stored draws; an entry that reduces to "
            f"another row — FedNova = our FedAvg, FedAux = our Local — takes that row's status), "
            f"{cz.NOT_SIGNIFICANT} (within 2 standard errors), or unexplained. A distinct measurement is one of "
            "our stored numbers, however many tables and rows show it:", "",
            vd.count_line(an.far), "", vd.two_kinds_line(an.far)]
    return out


def _table1(an: Analysis) -> list[str]:
    c1, c3 = an.comps.get("1"), an.comps.get("3")
    if c1 is None or c1.empty:
        return []
    out = ["", "### Table 1 at a glance (ours / paper, accuracy %, Louvain K = 10)", "",
           "| | " + " | ".join(_DATASETS) + " |", "|---" * (len(_DATASETS) + 1) + "|"]
    for method, variant in (("local", "native"), ("fedavg", "native"), ("pace", "full")):
        cells = [_pair(c1, dataset=d, method=method, variant=variant, metric="acc") for d in _DATASETS]
        out.append(f"| {method_label(method)} | " + " | ".join(cells) + " |")
    if c3 is not None and len(c3):
        for metric, label, fmt in (("alpha_mean", "mean α (PACE)", "{:.3f}"), ("upload_pct", "upload bytes (%)", "{:.2f}"),
                                   ("return_pct", "return bytes (%)", "{:.2f}")):
            out.append(f"| {label} | " + " | ".join(_pair(c3, fmt, dataset=d, metric=metric) for d in _DATASETS) + " |")
    return out


def _spear(an: Analysis) -> list[str]:
    out = ["", "### SPEAR", ""]
    bounds = bound_lines({t: c for t, c in an.comps.items() if t == "spear-robustness"})
    out += ["Robustness (Tab. 2, OpenFGL's client-only perturbation), the worst dataset's mean accuracy drop "
            "against the paper's upper bound:", ""] + [f"* {b}" for b in bounds] if bounds else \
        ["Robustness (Tab. 2): not run."]
    abl = an.comps.get("spear-ablation")
    if abl is not None and len(abl):
        quoted = abl[abl["paper_mean"].notna() & (abl["status"] == "ok")]
        if len(quoted):
            out += ["", "Ablation (Tab. 4) where the paper quotes values: " + "; ".join(
                f"{e['col']} {e['row']} {_n(e['ours_mean'])} / {_n(e['paper_mean'])}" for _, e in quoted.iterrows())
                + " (ours / paper)."]
    comp = an.comps.get("spear-1")
    if comp is None or comp.empty:
        return out
    acc = comp[(comp["metric"] == "acc") & (comp["status"] == "ok")]
    datasets = list(dict.fromkeys(acc["dataset"]))
    rows = list(dict.fromkeys(acc["row"]))
    if not datasets:
        return out
    out += ["", "### SPEAR's comparison (its Table 1: accuracy %, Dirichlet β = 0.05, K = 10, global model on the "
            "complete graph)", "",
            "Ours, mean ± sample std over data seeds (\"(n = k)\": fewer seeds than the others; the paper's available "
            "text gives no Table 1 values); the best per dataset in bold.", "",
            "| | " + " | ".join(datasets) + " |", "|---" * (len(datasets) + 1) + "|"]
    best = {d: acc[acc["dataset"] == d]["ours_mean"].max() for d in datasets}
    full = full_seeds(acc)
    for r in rows:
        cells = []
        for d in datasets:
            e = _entry(acc, row=r, dataset=d)
            if e is None:
                cells.append("–")
                continue
            text = _n(e["ours_mean"], "{:.1f}")
            text = f"**{text}**" if e["ours_mean"] == best[d] else text
            sd = e["ours_std"]
            cells.append(text + (f" ± {sd:.1f}" if sd == sd else "") + seeds_note(e.get("n_seeds"), full))
        out.append(f"| {r} | " + " | ".join(cells) + " |")
    spear = acc[acc["method"] == "spear"].set_index("dataset")["ours_mean"]
    lines = []
    for d in datasets:
        if d not in spear:
            continue
        others = acc[(acc["dataset"] == d) & (acc["method"] != "spear")]
        top = others.loc[others["ours_mean"].idxmax()] if len(others) else None
        if top is None or spear[d] >= top["ours_mean"]:
            lines.append(f"{d}: SPEAR best" + (f" (+{spear[d] - top['ours_mean']:.1f} over {top['row']})"
                                               if top is not None else ""))
        else:
            lines.append(f"{d}: {top['row']} best, SPEAR {spear[d] - top['ours_mean']:+.1f}")
    out += ["", "SPEAR against the best other method of this table, per dataset: " + "; ".join(lines) + "."]
    return out


def readme_block(an: Analysis) -> str:
    """The generated block (markers included) for one :class:`~pace_nb.analysis.report.Analysis`."""
    body = _status(an) + _table1(an) + draws_table(an) + _spear(an)
    return "\n".join([BEGIN, *body, END]) + "\n"


def outputs_from_store(store, config_paths: Sequence = (), tables: Sequence[str] | None = None,
                       label: str | None = None) -> tuple[str, str]:
    """REPRODUCTION.md's text and the README block of a store, from one analysis of it; ``label``:
    the store as the user named it (default :func:`~pace_nb.core.config.store_label`)."""
    text, an = report_and_analysis(store, config_paths, tables, label)
    return text, readme_block(an)


def _bounds(text: str) -> tuple[int, int]:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < 0 or end < start or text.count(BEGIN) != 1 or text.count(END) != 1:
        raise ConfigError("README.md has no single generated block (the pace-nb report begin/end markers); "
                          f"add the two lines {BEGIN!r} and {END!r} where the block goes")
    return start, end + len(END) + (1 if text[end + len(END):end + len(END) + 1] == "\n" else 0)


def splice(readme: str, block: str) -> str:
    """``readme`` with its generated block replaced by ``block``."""
    start, end = _bounds(readme)
    return readme[:start] + block + readme[end:]


def current(readme: str) -> str:
    """The generated block as it stands in ``readme`` (markers included)."""
    start, end = _bounds(readme)
    return readme[start:end]


def is_current(readme: str, block: str) -> bool:
    """Whether ``readme``'s block is exactly ``block`` (a hand-edited number makes it False)."""
    return current(readme) == block
