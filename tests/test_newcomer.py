"""A newcomer's first commands: fast start-up, one list syntax, honest messages, stores that never
hide or overwrite the shipped one, documented config blocks that parse."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pytest

from pace_nb.cli import main
from pace_nb.core import config
from pace_nb.core.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def _modules_after(code: str, tmp_path) -> set[str]:
    """Names in sys.modules after running ``code`` in a fresh interpreter (cwd = the repo)."""
    probe = code + "\nimport sys, json\nprint('MODULES=' + json.dumps(sorted(sys.modules)))\n"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PACE_NB_DATA": str(tmp_path / "empty"),
           "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("MODULES=")]
    assert line, out.stderr[-2000:]
    return set(json.loads(line[0][len("MODULES="):]))


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["run", "--clients", "many"], ["grid"]])
def test_help_and_argument_errors_import_neither_torch_nor_pyg(argv, tmp_path):
    mods = _modules_after(f"from pace_nb.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass", tmp_path)
    assert "torch_geometric" not in mods and "torch" not in mods and "pandas" not in mods


def test_datasets_without_data_is_short_gives_a_hint_and_skips_pyg(tmp_path):
    code = f"from pace_nb.cli import main\nmain(['datasets', '--data-root', {str(tmp_path / 'none')!r}])"
    assert "torch_geometric" not in _modules_after(code, tmp_path) and "torch" not in _modules_after(code, tmp_path)
    out = subprocess.run([sys.executable, "-m", "pace_nb", "datasets", "--data-root", str(tmp_path / "none")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("data root: ") and max(len(ln) for ln in lines[1:]) <= 100
    assert any(ln.startswith("hint:") and "PACE_NB_DATA" in ln for ln in lines)
    assert re.search(r"^\s+Cora\s+False .*all 8 files", out.stdout, re.M)


def test_help_lists_every_table_id_and_partition_scheme(capsys):
    from pace_nb.analysis.tables import TABLES
    from pace_nb.data.partition import SCHEMES

    with pytest.raises(SystemExit):
        main(["tables", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    lo, hi = map(int, re.search(r"(\d+)\.\.(\d+)", text).groups())
    for tid in TABLES:
        assert (tid.isdigit() and lo <= int(tid) <= hi) or re.search(rf"(?<![\w-]){re.escape(tid)}(?![\w-])", text), tid
    with pytest.raises(SystemExit):
        main(["partition", "--help"])
    text = capsys.readouterr().out
    assert all(s in text for s in SCHEMES)


def _toml_blocks():
    files = [ROOT / "README.md", ROOT / "configs" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for f in files:
        for i, block in enumerate(re.findall(r"```toml\n(.*?)```", f.read_text(encoding="utf-8"), re.S)):
            yield pytest.param(block, id=f"{f.name}-{i}")


@pytest.mark.parametrize("block", list(_toml_blocks()))
def test_every_documented_toml_block_parses(block):
    assert isinstance(tomllib.loads(block), dict)


def test_one_list_syntax():
    from pace_nb.cli.options import int_list

    assert int_list(["2024,2025", "2026"], "--seeds") == int_list("2024, 2025 2026", "--seeds") == [2024, 2025, 2026]
    with pytest.raises(ConfigError, match="--seeds takes integers separated by commas"):
        int_list(["1,x"], "--seeds")
    with pytest.raises(ConfigError, match="at least one"):
        int_list([","], "--seeds")


def test_run_rejects_unknown_variant_and_missing_json_folder_before_training(tmp_path, monkeypatch, capsys):
    import pace_nb.methods.protocol as protocol

    monkeypatch.setattr(protocol, "run_protocol", lambda *a, **k: pytest.fail("trained despite bad input"))
    assert main(["run", "--variants", "fulll"]) == 2
    assert "pace-nb: error: unknown PACE variant 'fulll'" in capsys.readouterr().err
    assert main(["run", "--methods", "local,pacee"]) == 2
    assert "unknown method 'pacee'" in capsys.readouterr().err
    target = tmp_path / "nonexistent" / "dir" / "out.json"
    assert main(["run", "--json", str(target)]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "nonexistent").exists()


# ----------------------------------------------------------------------------- pace-nb spear
@pytest.fixture
def spear_calls(monkeypatch):
    """Cheap federations for `pace-nb spear` (3 hand-split clients); counts the ablations computed."""
    from synthetic import PARTS3, make_fed

    from pace_nb.methods.spear import analysis as sa

    def builder(dataset, beta, num_clients, seed, data_root=None):
        g = make_fed(PARTS3, seed=seed)
        g.config = {"scheme": "dirichlet", "beta": beta, "seed": seed}
        return g

    calls = []
    real = sa.ablation
    monkeypatch.setattr(sa, "federation", builder)
    monkeypatch.setattr(sa, "ablation", lambda fg, *a, **k: calls.append(fg.config["seed"]) or real(fg, *a, **k))
    return calls


def test_spear_store_resumes_and_uses_the_sample_std(tmp_path, spear_calls, capsys):
    store, out1, out2 = tmp_path / "store", tmp_path / "a.json", tmp_path / "b.json"
    assert main(["spear", "--seeds", "1,2,3", "--store", str(store), "--json", str(out1)]) == 0
    assert spear_calls == [1, 2, 3] and len(list((store / "cells").glob("*.json"))) == 3
    assert main(["spear", "--seeds", "1", "2", "3", "--store", str(store), "--json", str(out2)]) == 0
    assert spear_calls == [1, 2, 3]  # resumed: every data seed read from the store
    assert "0 data seed(s) computed, 3 read" in capsys.readouterr().out
    a, b = json.loads(out1.read_text()), json.loads(out2.read_text())
    assert a["summary"] == b["summary"]
    full = [r["acc"] for r in a["rows"] if r["variant"] == "full"]
    assert a["summary"][0]["acc_std"] == pytest.approx(np.std(full, ddof=1))
    assert main(["spear", "--seeds", "1,2"]) == 0 and spear_calls == [1, 2, 3, 1, 2]  # no store: computed


def test_spear_interrupt_is_honest_and_warnings_are_one_line(tmp_path, spear_calls, monkeypatch, capsys):
    from pace_nb.methods.spear import analysis as sa

    real = sa.ablation

    def noisy(fg, *a, **k):
        warnings.warn("clients [7] have no training nodes", RuntimeWarning, stacklevel=2)
        warnings.warn("clients [7] have no training nodes", RuntimeWarning, stacklevel=2)
        return real(fg, *a, **k)

    monkeypatch.setattr(sa, "ablation", noisy)
    assert main(["spear", "--seeds", "1"]) == 0
    err = capsys.readouterr().err
    assert err.count("no training nodes") == 1 and "pace-nb: warning: clients [7] have no training nodes (2×)" in err

    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(sa, "ablation", stop)
    assert main(["spear", "--seeds", "1"]) == 130
    assert "nothing was saved" in capsys.readouterr().err
    assert main(["spear", "--seeds", "1", "--store", str(tmp_path / "s")]) == 130
    assert f"finished data seeds are in the store {tmp_path / 's'}" in capsys.readouterr().err


# ----------------------------------------------------------------------------- extras
def test_missing_optional_package_names_its_extra(monkeypatch, capsys):
    import importlib.util

    from pace_nb.core.extras import require

    with pytest.raises(ConfigError, match=r"pip install 'pace_nb\[ogb\]'"):
        require("pace_nb_no_such_module", "ogb", "the ogbn-arxiv loader")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "papermill" else real(name, *a))
    assert main(["figures", "--quick"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("pace-nb: error: pace-nb figures needs the Python package 'papermill'")
    assert "pace_nb[notebooks]" in err[-1]


# ----------------------------------------------------------------------------- store precedence
@pytest.fixture
def own_store(tmp_path, monkeypatch):
    """A user's default data/results holding one cell (the repo's own data/ is left alone)."""
    monkeypatch.delenv("PACE_NB_RESULTS", raising=False)
    user = tmp_path / "data" / "results"
    (user / "cells").mkdir(parents=True)
    (user / "cells" / "x.json").write_text("{}")
    real = config._default_dir
    monkeypatch.setattr(config, "_default_dir", lambda sub: user if sub == "results" else real(sub))
    return user


def test_readers_say_when_the_shipped_store_is_hidden(own_store):
    shipped = config.shipped_results_dir()
    note = config.store_note()
    assert str(own_store) in note and "1 cells" in note
    if shipped is not None and config.holds_cells(shipped):
        assert f"the shipped store {shipped}" in note and "NOT read" in note
        assert config.store_note(str(shipped)).startswith("results: the shipped store")


def test_report_writes_the_committed_file_from_the_shipped_store_only(own_store, monkeypatch, capsys, tmp_path):
    import pace_nb.analysis.readme_block as readme_block

    shipped = config.shipped_results_dir()
    if shipped is None:
        pytest.skip("no shipped results store in this checkout")
    from pace_nb.analysis.readme_block import current

    committed = (ROOT / "REPRODUCTION.md").read_bytes()
    block = current((ROOT / "README.md").read_text(encoding="utf-8"))  # README's block: compared, never rewritten here
    seen = []
    monkeypatch.setattr(readme_block, "outputs_from_store",
                        lambda store, paths, **kw: seen.append(store.root) or (committed.decode(), block))
    assert main(["report", "--check"]) == 0  # compared with the shipped store, not the user's one
    assert seen == [shipped] and "your store" in capsys.readouterr().err
    assert main(["report", "--results", str(own_store)]) == 2
    assert "pass --out FILE" in capsys.readouterr().err
    monkeypatch.setenv("PACE_NB_RESULTS", str(own_store))
    assert main(["report", "--check"]) == 2
    assert main(["report", "--out", str(tmp_path / "mine.md")]) == 0 and seen[-1] == own_store
    assert (ROOT / "REPRODUCTION.md").read_bytes() == committed


def test_figures_from_another_store_never_land_in_the_gallery(own_store, monkeypatch, capsys, tmp_path):
    import pace_nb.notebooks as nbr

    got = []
    monkeypatch.setattr(nbr, "run_notebooks", lambda *a, figures_dir=None, **k: got.append(figures_dir) or [])
    assert main(["figures", "--only", "03"]) == 0
    assert got[-1] == str(nbr.default_figures_dir() / "own") and "--out DIR overrides" in capsys.readouterr().err
    assert main(["figures", "--only", "03", "--out", str(tmp_path / "f")]) == 0 and got[-1] == str(tmp_path / "f")
    (own_store / "cells" / "x.json").unlink()  # only the shipped store left: the gallery is the default
    assert main(["figures", "--only", "03"]) == 0 and got[-1] is None


def test_configs_readme_example_is_a_valid_grid():
    from pace_nb.experiments.grid import expand, parse_config

    text = (ROOT / "configs" / "README.md").read_text(encoding="utf-8")
    block = re.findall(r"```toml\n(.*?)```", text, re.S)[0]
    cells = expand(parse_config(block, path="configs/README.md"))
    assert {c.kind for c in cells} == {"protocol", "spear"}


def test_notebooks_run_by_hand_from_another_store_save_outside_the_gallery(own_store):
    from pace_nb.notebooks import default_figures_dir, notebook_figures_dir

    assert notebook_figures_dir() == default_figures_dir() / "own"
    (own_store / "cells" / "x.json").unlink()
    assert notebook_figures_dir() == default_figures_dir()


def test_readme_cell_count_is_what_the_shipped_configs_expand_to():
    from pace_nb.experiments.grid import expand, load_config

    said = re.search(r"The shipped configs expand to (\d+) cells", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert said, "README.md no longer states the shipped configs' cell count"
    total = sum(len(expand(load_config(p), fingerprints=False)) for p in sorted((ROOT / "configs").glob("*.toml")))
    assert int(said.group(1)) == total
