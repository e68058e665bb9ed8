"""Notebooks: committed form, the papermill runner (skip / force / failure / backend), the first
cell's errors, and one quick execution of every notebook (marked slow)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from pace_nb import notebooks as nbr
from pace_nb.cli import main
from pace_nb.core.errors import ConfigError, UnknownNameError

ROOT = Path(__file__).resolve().parent.parent
BOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
REQUIRED = {"dataset", "seeds", "device", "figures_dir"}  # what every notebook computes / saves with


def test_six_notebooks_are_committed():
    assert [p.stem.split("_")[0] for p in BOOKS] == ["01", "02", "03", "04", "05", "06", "07"]


@pytest.mark.parametrize("path", BOOKS, ids=lambda p: p.stem)
def test_committed_notebook_form(path):
    """Stripped outputs, python3 kernelspec, exactly one parameters cell that papermill parses,
    and the setup cell right after it."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), "commit notebooks with outputs stripped"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and tagged[0] is code[0]
    defaults = nbr.parameters_cell(nb)
    assert set(defaults) >= REQUIRED and defaults.get("interactive", False) is False
    from papermill.translators import PythonTranslator

    parsed = {p.name for p in PythonTranslator.inspect(tagged[0])}
    assert parsed == set(defaults), "every parameter must be visible to papermill (typed, one per line)"
    assert "# " in tagged[0].source  # commented defaults
    assert "setup_notebook(" in code[1].source and f'"{path.stem}"' in code[1].source
    assert "*.ipynb filter=nbstripout" in (ROOT / ".gitattributes").read_text()


def _names_used(nb) -> set[str]:
    """Names the code cells after the parameters cell read."""
    import ast

    code = [c for c in nb.cells if c.cell_type == "code"][1:]
    return {n.id for c in code for n in ast.walk(ast.parse(c.source)) if isinstance(n, ast.Name)}


@pytest.mark.parametrize("path", BOOKS, ids=lambda p: p.stem)
def test_notebook_declares_only_parameters_it_uses(path):
    """Every declared parameter is read by a later cell; no cell branches on a quick flag
    (quick values come from the runner: every QUICK_PARAMETERS key is some notebook's parameter)."""
    nb = nbformat.read(path, as_version=4)
    defaults = nbr.parameters_cell(nb)
    assert set(defaults) - _names_used(nb) == set(), "declared but never used"
    assert "quick" not in defaults
    assert not [c for c in nb.cells if "quick" in c.source and c.cell_type == "code"]


def test_quick_parameters_each_belong_to_a_notebook():
    declared = set().union(*(nbr.parameters_cell(nbformat.read(p, as_version=4)) for p in BOOKS))
    assert set(nbr.QUICK_PARAMETERS) <= declared


def test_committed_notebooks_are_nbstripout_fixed_points():
    """What git's nbstripout filter would commit is exactly what is in the tree."""
    import subprocess
    import sys

    def stripped(paths):  # nbstripout -t writes each file's stripped text in turn
        return subprocess.run([sys.executable, "-m", "nbstripout", "-t", *map(str, paths)],
                              capture_output=True, check=True).stdout

    if stripped(BOOKS) != b"".join(p.read_bytes() for p in BOOKS):  # one process for all; name the culprits
        bad = [p.name for p in BOOKS if stripped([p]) != p.read_bytes()]
        pytest.fail(f"run nbstripout on: {', '.join(bad)}")


def test_parameters_cell_errors():
    nb = new_notebook(cells=[new_code_cell("x = 1")])
    with pytest.raises(ConfigError, match="exactly one cell tagged 'parameters'"):
        nbr.parameters_cell(nb)


def test_resolve_seeds_and_selection():
    assert nbr.resolve_seeds(2) == (104729, 130363)
    assert nbr.resolve_seeds([7, 8]) == (7, 8)
    for bad in (0, 6, True, [], [1, 1]):
        with pytest.raises(ConfigError):
            nbr.resolve_seeds(bad)
    assert [p.stem for p in nbr.select_notebooks(["03", "harm"])] == ["03_alpha_paths", "04_receiver_harm"]
    with pytest.raises(UnknownNameError, match="unknown notebook 'nope'"):
        nbr.select_notebooks(["nope"])


def test_setup_notebook_errors(tmp_path):
    with pytest.raises(UnknownNameError, match="unknown dataset 'Coraa'"):
        nbr.setup_notebook("01_x", "Coraa", figures_dir=str(tmp_path))
    with pytest.raises(nbr.PaceNBError, match=r"raw files for Cora not found in .*Cora/raw"):
        nbr.setup_notebook("01_x", "Cora", data_root=str(tmp_path), figures_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="clients"):
        nbr.setup_notebook("01_x", "demo", clients=1, figures_dir=str(tmp_path))
    ctx = nbr.setup_notebook("01_local_training", "DEMO", seeds=1, figures_dir=str(tmp_path / "f"))
    assert ctx.dataset == "demo" and ctx.seeds == (104729,) and ctx.figures_dir.is_dir()


def test_input_key_tracks_notebook_parameters_and_package(tmp_path):
    p = tmp_path / "01_a.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("x = 1")]), p)
    k = nbr.input_key(p, {"a": 1}, "pkg")
    assert k == nbr.input_key(p, {"a": 1}, "pkg")
    assert len({k, nbr.input_key(p, {"a": 2}, "pkg"), nbr.input_key(p, {"a": 1}, "pkg2")}) == 3
    nbformat.write(new_notebook(cells=[new_code_cell("x = 2")]), p)
    assert nbr.input_key(p, {"a": 1}, "pkg") != k
    assert len(nbr.package_fingerprint()) == 64


# ----------------------------------------------------------------------------- runner on tiny notebooks
def _tiny(folder: Path, body: str, name: str = "01_tiny") -> Path:
    params = new_code_cell('value: int = 1  # a number\ndataset: str = "demo"  # a registered dataset name\n'
                           'figures_dir: "Optional[str]" = None  # output folder')
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[params, new_code_cell(body)],
                      metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


BODY = """\
import os, pathlib, matplotlib
import matplotlib.pyplot as plt
print("backend", matplotlib.get_backend(), os.environ.get("MPLBACKEND"))
pathlib.Path(figures_dir, f"01_fig_{value}.png").write_text("x")
plt.plot([0, 1])
plt.show()"""


def test_runner_skips_unchanged_reruns_changed_and_uses_inline_backend(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")  # as pytest sets it: must not reach the kernel
    books, figs, build = tmp_path / "nb", tmp_path / "figs", tmp_path / "build"
    _tiny(books, BODY)
    kw = dict(notebooks_dir=books, figures_dir=figs, build_dir=build, datasets=["demo"])
    first = nbr.run_notebooks(parameters={"value": 1}, **kw)
    assert [r.status for r in first] == ["executed"] and first[0].figures == ["01_fig_1.png"]
    out = nbformat.read(first[0].output, as_version=4)
    text = "".join(o.get("text", "") for o in out.cells[-1].outputs if o.output_type == "stream")
    assert "inline" in text and "Agg" not in text
    assert any("image/png" in o.get("data", {}) for o in out.cells[-1].outputs)
    assert os.environ["MPLBACKEND"] == "Agg"  # restored for the test process
    assert json.loads(Path(first[0].output).with_suffix(".json").read_text())["parameters"]["value"] == 1
    assert [r.status for r in nbr.run_notebooks(parameters={"value": 1}, **kw)] == ["skipped"]
    assert [r.status for r in nbr.run_notebooks(parameters={"value": 1}, force=True, **kw)] == ["executed"]
    (figs / "01_fig_1.png").unlink()  # a lost figure forces a rerun
    assert [r.status for r in nbr.run_notebooks(parameters={"value": 1}, **kw)] == ["executed"]
    assert [r.status for r in nbr.run_notebooks(parameters={"value": 2}, **kw)] == ["executed"]
    with pytest.raises(ConfigError, match="has no parameter"):
        nbr.run_notebooks(parameters={"nope": 1}, **kw)


def test_failing_cell_names_notebook_and_cell(tmp_path):
    books = tmp_path / "nb"
    _tiny(books, "x = 1\nraise ValueError('broken on purpose')", name="02_bad")
    with pytest.raises(nbr.NotebookFailed, match=r"02_bad.ipynb failed in cell 2 of the executed copy \(In \[3\]: x = 1\): "
                                                    r"ValueError: broken on purpose"):
        nbr.run_notebooks(notebooks_dir=books, figures_dir=tmp_path / "f", build_dir=tmp_path / "b", datasets=["demo"])
    assert not (tmp_path / "b" / "02_bad__demo.json").exists()  # a failed run leaves no stamp


def test_first_cell_fails_clearly_under_papermill(tmp_path):
    """Unknown dataset / missing raw files stop the real notebook at its setup cell."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    book = ROOT / "notebooks" / "01_local_training.ipynb"
    with nbr.kernel_environment():
        with pytest.raises(PapermillExecutionError) as err:
            pm.execute_notebook(str(book), str(tmp_path / "o1.ipynb"), kernel_name="python3", progress_bar=False,
                                parameters={"dataset": "Coraa", "figures_dir": str(tmp_path)})
        assert err.value.ename == "UnknownNameError" and "unknown dataset 'Coraa'" in err.value.evalue
        with pytest.raises(PapermillExecutionError) as err:
            pm.execute_notebook(str(book), str(tmp_path / "o2.ipynb"), kernel_name="python3", progress_bar=False,
                                parameters={"dataset": "Cora", "data_root": str(tmp_path / "empty"),
                                            "figures_dir": str(tmp_path)})
        assert err.value.ename == "MissingDataError" and "raw files for Cora not found" in err.value.evalue


def test_cli_figures_reports_unknown_notebook(capsys):
    assert main(["figures", "--only", "nope"]) == 2
    assert "pace-nb: error: unknown notebook 'nope'" in capsys.readouterr().err


# ----------------------------------------------------------------------------- every notebook, quick
@pytest.mark.slow
@pytest.mark.parametrize("path", BOOKS, ids=lambda p: p.stem)
def test_notebook_runs_quick(path, tmp_path):
    figs = tmp_path / "figures"
    runs = nbr.run_notebooks([path.stem], quick=True, datasets=["demo"], figures_dir=figs,
                             build_dir=tmp_path / "build", results_dir=str(tmp_path / "results"))
    assert [r.status for r in runs] == ["executed"]
    out = nbformat.read(runs[0].output, as_version=4)
    errors = [o for c in out.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    pngs = sorted(p.name for p in figs.glob("*.png"))
    if path.stem != "06_paper_tables":  # 06 draws only when reproduced values exist
        assert pngs and all(p.startswith(path.stem[:2]) for p in pngs)
        assert {p[:-4] for p in pngs} == {p.stem for p in figs.glob("*.pdf")}
        shown = sum("image/png" in o.get("data", {}) for c in out.cells if c.cell_type == "code" for o in c.outputs)
        assert shown >= len(pngs)
    if path.stem == "06_paper_tables":
        return
    # figure data: the first run computed and stored it; a rerun reads it all and trains nothing
    assert "computed: " in _printed(out) and "stored: " not in _printed(out)
    again = nbr.run_notebooks([path.stem], quick=True, datasets=["demo"], figures_dir=figs, force=True,
                              build_dir=tmp_path / "build", results_dir=str(tmp_path / "results"))
    text = _printed(nbformat.read(again[0].output, as_version=4))
    assert "stored: " in text and "computed: " not in text, text[-500:]
    assert sorted(p.name for p in figs.glob("*.png")) == pngs


def _printed(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                   if o.output_type == "stream")


WIDGET_BODY = """\
import torch
from pace_nb.viz import frames as views
from pace_nb.viz import widgets
g = torch.Generator().manual_seed(0)
zl = [torch.randn(12, 3, generator=g)]
lg = views.ReceiverLogits(zl, [z + 1 for z in zl], [torch.arange(12) % 3], [torch.arange(12) < 6],
                          [torch.arange(12) >= 6], {0: 0.5})
widgets.alpha_explorer(lg, views.alpha_paths(lg, 5), interactive=True)"""


def test_widgets_attach_once_in_a_live_kernel(tmp_path):
    """In a real kernel, interactive=True shows exactly one output: the live widget view, with
    no static figure beside it and no cell value (which Jupyter would render a second time)."""
    books = tmp_path / "nb"
    _tiny(books, WIDGET_BODY)
    run = nbr.run_notebooks(notebooks_dir=books, figures_dir=tmp_path / "f", build_dir=tmp_path / "b", datasets=["demo"])
    outs = nbformat.read(run[0].output, as_version=4).cells[-1].outputs
    assert [o.output_type for o in outs] == ["display_data"]
    assert "application/vnd.jupyter.widget-view+json" in outs[0].data and "image/png" not in outs[0].data


@pytest.mark.skipif(os.name != "posix", reason="IPC kernel sockets are POSIX-only")
def test_kernels_talk_over_ipc_not_tcp():
    km = nbr._kernel_manager()["kernel_manager_class"](kernel_name=nbr.KERNEL)
    assert km.transport == "ipc"


def test_kernel_shut_down_without_a_sigint_interrupted_on_request():
    """papermill shuts each kernel down when its notebook is done: no SIGINT first (the kernel logged
    "KeyboardInterrupt caught in kernel" for it); an interrupt asked for (a cell's timeout) is still sent."""
    import asyncio
    import signal

    km = nbr._kernel_manager()["kernel_manager_class"](kernel_name=nbr.KERNEL)
    sent: list[int] = []
    signal_kernel = km._async_signal_kernel

    async def spy(signum):
        sent.append(signum)
        await signal_kernel(signum)

    km._async_signal_kernel = spy

    async def session():
        await km.start_kernel()
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=120)
            await km.interrupt_kernel()  # on request: sent
            assert sent == [signal.SIGINT]
        finally:
            kc.stop_channels()
            await km.shutdown_kernel()

    asyncio.run(session())
    assert sent == [signal.SIGINT] and not km.has_kernel  # the shutdown sent none


@pytest.mark.slow
def test_your_graph_notebook_runs_on_a_graph_file(tmp_path):
    """07 on a user's file (a CSV folder with its own clients), not the example it writes itself."""
    import numpy as np

    from pace_nb.data.federation import build_federated

    fg = build_federated("demo", "louvain", 4, 2024)
    folder = tmp_path / "clinics"
    folder.mkdir()
    (folder / "edges.csv").write_text("\n".join(f"{a},{b}" for a, b in fg.data.edge_index.numpy().T))
    np.save(folder / "features.npy", fg.data.x.numpy())
    np.savetxt(folder / "labels.csv", fg.data.y.numpy(), fmt="%d")
    client = np.zeros(int(fg.data.num_nodes), dtype=np.int64)
    for c in fg.clients:
        client[c.global_ids.numpy()] = c.index
    np.savetxt(folder / "clients.csv", client, fmt="%d")
    figs = tmp_path / "figures"
    runs = nbr.run_notebooks(["07_your_graph"], quick=True, datasets=["demo"], figures_dir=figs,
                             build_dir=tmp_path / "build", results_dir=str(tmp_path / "results"),
                             parameters={"graph": str(folder)})
    out = nbformat.read(runs[0].output, as_version=4)
    text = _printed(out)
    assert "4 clients" in text and str(folder) in text
    assert sorted(p.name for p in figs.glob("*.png")) == ["07_harm_units_clinics.png", "07_paired_differences_clinics.png",
                                                              "07_silos_clinics.png"]


def test_describe_names_a_rank_only_when_the_notebook_takes_one(tmp_path):
    from pace_nb.notebooks import setup_notebook

    plain = setup_notebook("01_local_training", "demo", figures_dir=str(tmp_path))
    assert "rank=" not in plain.describe() and plain.rank == 6  # figure-data keys keep the paper's r
    assert "rank=4" in setup_notebook("02_lowrank_transport", "demo", rank=4, figures_dir=str(tmp_path)).describe()
