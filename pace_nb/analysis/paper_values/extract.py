"""Provenance: how ``pace_tables.csv`` was typed in from the PACE paper's text.

``python -m pace_nb.analysis.paper_values.extract PAPER.txt OUT.csv`` re-parses the tab-separated
tables of the paper's text extraction (Tables 1-12) into the tidy package data file.
Only used by maintainers; the package reads the CSV (see :mod:`pace_nb.analysis.paper_values`).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd

from pace_nb.methods.registry import group, method_label

#: The paper's printed method names → method ids: the registry's labels (PACE also prints "PACE").
METHODS = {**{method_label(m): m for m in ("local", *group("pace_control"), "pace")}, "PACE": "pace"}
ABLATION = {"Local": ("local", "native"), "Transport ( $\\alpha=1$ )": ("pace", "transport"),
            "Fixed $\\alpha=0.5$": ("pace", "fixed0.5"), "Mean + CNLL": ("pace", "mean"),
            "Raw-Activation RegMean + CNLL": ("pace", "raw"),
            "Direct Return + CNLL": ("pace", "direct"), "Full PACE": ("pace", "full")}
CELL = re.compile(r"(-?\d*\.\d+)(?: \$\\pm\$ (\d*\.\d+))?")
_METHOD_SPLIT = re.compile(r" (?=(?:" + "|".join(re.escape(m) for m in METHODS if m != "PACE") + r") \d)")


def _cells(text: str) -> list[tuple[float, float]]:
    return [(float(m.group(1)), float(m.group(2)) if m.group(2) else float("nan"))
            for m in CELL.finditer(text)]


def _row(table, dataset, k, partition, method, variant, metric, value, std=float("nan"),
         rank=6, beta=float("nan")):
    rank = rank if method == "pace" else 0
    return dict(paper="pace", table=table, dataset=dataset, num_clients=k, partition=partition,
                beta=beta, method=method, variant=variant, rank=rank, metric=metric,
                value=value, std=std, note="")


def _pace_variant(method):
    return "full" if method == "pace" else "native"


def matrix(lines, table, datasets, k, partition, metrics=("acc", "f1_weighted"), beta=float("nan")):
    """Method rows x (dataset, metric) columns with 'mean $\\pm$ std' cells."""
    out = []
    for line in lines:
        name, _, rest = line.partition("\t")
        if name not in METHODS:
            continue
        cells = _cells(rest)
        cols = [(d, m) for d in datasets for m in metrics]
        assert len(cells) == len(cols), (table, line)
        for (d, m), (v, s) in zip(cols, cells, strict=True):
            meth = METHODS[name]
            out.append(_row(table, d, k, partition, meth, _pace_variant(meth), m, v, s, beta=beta))
    return out


def extract(text: str) -> pd.DataFrame:
    L = text.splitlines()
    blk = lambda a, b: L[a - 1:b]  # 1-based inclusive line numbers of the text file
    six = ["Cora", "CiteSeer", "PubMed"], ["CS", "Computers", "ogbn-arxiv"]
    rows = []
    # Tables 1, 8, 9: Louvain accuracy / W-F1, K = 10, 20, 30.
    rows += matrix(blk(86, 97), 1, six[0], 10, "louvain") + matrix(blk(98, 109), 1, six[1], 10, "louvain")
    t8a_text = _METHOD_SPLIT.sub("\n", L[444].split("W-F1 Accuracy W-F1 Accuracy W-F1 ", 1)[1])
    t8a = [re.sub(r"^(" + "|".join(re.escape(m) for m in METHODS) + r") ", r"\1\t", s) for s in t8a_text.splitlines()]
    rows += matrix(t8a, 8, six[0], 20, "louvain") + matrix(blk(447, 458), 8, six[1], 20, "louvain")
    rows += matrix(blk(470, 481), 9, six[0], 30, "louvain") + matrix(blk(483, 494), 9, six[1], 30, "louvain")
    # Table 10: macro-F1, K = 10, 20, 30.
    for start, k in ((507, 10), (520, 20), (533, 30)):
        rows += matrix(blk(start, start + 10), 10, six[0] + six[1], k, "louvain", metrics=("f1_macro",))
    # Tables 11 (METIS) and 12 (Dirichlet beta = 0.5), K = 10.
    rows += matrix(blk(565, 576), 11, six[0], 10, "metis") + matrix(blk(578, 589), 11, ["CS", "Computers"], 10, "metis")
    rows += matrix(blk(601, 612), 12, six[0], 10, "dirichlet", beta=0.5)
    rows += matrix(blk(614, 625), 12, ["CS", "Computers"], 10, "dirichlet", beta=0.5)
    # Table 2: component ablation, accuracy means, K = 10.
    for line in blk(118, 124):
        name, *vals = line.split("\t")
        meth, var = ABLATION[name]
        rows += [_row(2, d, 10, "louvain", meth, var, "acc", float(v)) for d, v in zip(six[0], vals, strict=True)]
    # Table 3: CNLL utilisation and communication (percent of dense tensor bytes).
    for line in blk(234, 239):
        d, a, z, up, down = line.split("\t")
        for metric, v in (("alpha_mean", a), ("alpha_zero_pct", z), ("upload_pct", up), ("return_pct", down)):
            rows.append(_row(3, d, 10, "louvain", "pace", "full", metric, float(v.rstrip("%"))))
    # Table 4: matched-CNLL summary (best calibrated baseline vs PACE).
    for start, metric in ((261, "acc"), (266, "f1_weighted")):
        for line in blk(start, start + 2):
            d, matched, score, pace, gap = line.split("\t")
            rows.append(_row(4, d, 10, "louvain", METHODS[matched.replace("+CNLL", "")], "cnll", metric, float(score)))
            rows.append(_row(4, d, 10, "louvain", "pace", "full", metric, float(pace)))
            rows.append(_row(4, d, 10, "louvain", "pace", "full", f"gap_{metric}", float(gap)))
    # Table 5: rank study; ratios averaged over the three citation datasets.
    for line in blk(364, 368):
        r, *vals = line.split("\t")
        rank = 0 if r == "Dense" else int(r)
        for d, v in zip(six[0], vals[:3], strict=True):
            rows.append(_row(5, d, 10, "louvain", "pace", "full", "acc", float(v), rank=rank))
        for metric, v in zip(("upload_pct", "return_pct"), vals[3:], strict=True):
            rows.append(_row(5, "citation-mean", 10, "louvain", "pace", "full", metric, float(v.rstrip("%")), rank=rank))
    # Table 6: Transport vs Transport + CNLL (= full PACE) for every setting.
    for line in blk(382, 399):
        d, k_text, rest = line.split("\t", 2)
        k = int(k_text)
        c = _cells(rest)
        for var, (acc, wf1) in (("transport", c[0:2]), ("full", c[2:4])):
            rows.append(_row(6, d, k, "louvain", "pace", var, "acc", *acc))
            rows.append(_row(6, d, k, "louvain", "pace", var, "f1_weighted", *wf1))
        rows.append(_row(6, d, k, "louvain", "pace", "full", "delta_acc", c[4][0]))
    # Table 7: native and +CNLL controls on the citation datasets.
    for line in blk(413, 431):
        name, cal, rest = line.split("\t", 2)
        meth = METHODS[name]
        var = "full" if meth == "pace" else ("cnll" if cal == "CNLL" else "native")
        for (d, m), (mean, sd) in zip([(d, m) for d in six[0] for m in ("acc", "f1_weighted")], _cells(rest), strict=True):
            rows.append(_row(7, d, 10, "louvain", meth, var, m, mean, sd))
    # Appendix A (text): receiver-seed units of the citation datasets, Louvain C = 10.
    units = re.search(r"Across (\d+) units, (\d+) improve, (\d+) tie, and (\d+) decline", text)
    w = re.search(r"leaves (\d+) of (\d+) receiver means nonnegative\. The worst receiver mean is \$(-?\d+\.\d+)\$"
                  r" Accuracy points and the worst single unit is \$(-?\d+\.\d+)\$", text)
    if units is None or w is None:
        raise ValueError("the PACE text lacks Appendix A's unit counts")
    counts = dict(zip(("units", "helped", "tied", "harmed"), map(float, units.groups()), strict=True))
    counts.update(receivers=float(w.group(2)), nonnegative_means=float(w.group(1)),
                  worst_mean=float(w.group(3)), worst_unit=float(w.group(4)))
    rows += [_row("A", "Cora+CiteSeer+PubMed", 10, "louvain", "pace", "full", key, v) for key, v in counts.items()]
    df = pd.DataFrame(rows)
    return df


if __name__ == "__main__":  # pragma: no cover
    paper, out = sys.argv[1:3]
    frame = extract(Path(paper).read_text(encoding="utf-8"))
    frame.to_csv(out, index=False)
    print(f"{len(frame)} values -> {out}")
