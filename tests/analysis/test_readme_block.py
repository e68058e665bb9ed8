"""README's generated block (pace_nb.analysis.readme_block): written by `pace-nb report`, checked against the store."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from fake_results import make_rows
from pace_nb.analysis import readme_block as rb
from pace_nb.analysis import report
from pace_nb.analysis.paper_values import paper_values
from pace_nb.core import config
from pace_nb.core.errors import ConfigError
from pace_nb.experiments.store import ResultsStore

ROOT = Path(__file__).resolve().parents[2]


def _rows():
    """Cora K = 10 Local + PACE rows: Local at the paper's Table 1 accuracy + 0.5, PACE + 3.0."""
    paper = paper_values("pace", table="1", dataset="Cora").set_index(["method", "metric"])["value"]
    rows = make_rows(num_clients=10, receivers=False, base=0.0,
                     methods={("local", "native", 0): 0.0, ("pace", "full", 6): 0.0})
    for method, off in (("local", 0.5), ("pace", 3.0)):
        sel = rows["method"] == method
        for m in ("acc", "f1_weighted"):
            rows.loc[sel, m] = paper[(method, m)] + off + rows.loc[sel, "seed"] * 0.1 - 0.3
    return rows


def test_block_numbers_come_from_the_analysis_and_an_edit_is_caught():
    an = report.analyse(_rows(), tables=["1", "2", "3"])
    block = rb.readme_block(an)
    paper = paper_values("pace", table="1", dataset="Cora", metric="acc").set_index("method")["value"]
    assert block.startswith(rb.BEGIN) and block.rstrip().endswith(rb.END)
    assert f"| Local | {paper['local'] + 0.5:.2f} / {paper['local']:.2f} |" in block
    assert f"| PACE (Ours) | {paper['pace'] + 3.0:.2f} / {paper['pace']:.2f} |" in block
    assert report.analyse(_rows(), tables=["1", "2", "3"]).far["labels"].map(len).sum() == 0
    assert cz_line(block).startswith("**Entries more than 2 points off: ")
    readme = "# Title\n\nintro\n\n" + rb.BEGIN + "\nstale 1.23\n" + rb.END + "\n\n## After\n"
    fresh = rb.splice(readme, block)
    assert fresh.startswith("# Title\n\nintro\n\n") and fresh.endswith("\n## After\n") and rb.is_current(fresh, block)
    assert not rb.is_current(readme, block)
    number = re.search(r"\d+\.\d\d", rb.current(fresh)).group(0)
    edited = fresh.replace(number, f"{float(number) + 0.01:.2f}", 1)
    assert not rb.is_current(edited, block)
    with pytest.raises(ConfigError, match="markers"):
        rb.splice("# no block\n", block)


def cz_line(block: str) -> str:
    return next(ln for ln in block.splitlines() if ln.startswith("**Entries more than"))


def test_report_command_rewrites_and_checks_the_readme_block(tmp_path, monkeypatch):
    from pace_nb.cli import main

    monkeypatch.delenv("PACE_NB_RESULTS", raising=False)
    monkeypatch.setattr(config, "repo_root", lambda: tmp_path)
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    ResultsStore(tmp_path / "results").append(_rows(), cell_key="k1", seconds=3.0)
    (tmp_path / "configs").mkdir()
    (tmp_path / "README.md").write_text("# R\n\n" + rb.BEGIN + "\n" + rb.END + "\n\nrest\n", encoding="utf-8")
    assert main(["report"]) == 0
    text = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert "### Table 1 at a glance" in text and text.endswith("\nrest\n")
    assert main(["report", "--check"]) == 0
    number = re.search(r"\d+\.\d\d", rb.current(text)).group(0)
    (tmp_path / "README.md").write_text(text.replace(number, "99.99", 1), encoding="utf-8")
    assert main(["report", "--check"]) == 1


@pytest.mark.skipif(not (ROOT / "results" / "cells").is_dir(), reason="no shipped results store")
def test_committed_readme_block_matches_the_shipped_store():
    _, block = rb.outputs_from_store(ResultsStore(ROOT / "results", create=False),
                                     sorted((ROOT / "configs").glob("*.toml")))
    assert rb.is_current((ROOT / "README.md").read_text(encoding="utf-8"), block), \
        "README.md's generated block is stale: run `pace-nb report` and commit it"
