"""Notebook front door: the setup every notebook runs first, and the papermill batch runner.

* :func:`setup_notebook` — the first cell after ``parameters``: validates the dataset (a
  clear :class:`~pace_nb.core.errors.PaceNBError` for an unknown name or missing raw files),
  resolves seeds / folders, applies the figure style and returns a :class:`NotebookContext`
  whose ``save`` writes ``<figures_dir>/<nb>_<what>_<dataset>.png|pdf``.
* :func:`run_notebooks` — executes notebooks with papermill (``kernel_name="python3"``, a
  fresh kernel each, ``MPLBACKEND`` removed so inline figures land in the executed copy),
  writes executed copies to ``notebooks/_build/`` and skips a notebook whose inputs
  (notebook bytes + parameters + package version and source hash [+ results store]) are
  unchanged since its last successful run and whose figures still exist. A failing cell
  raises :class:`NotebookFailed` naming the notebook, the cell and the error.
"""
from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Sequence

from pace_nb import __version__
from pace_nb.core.config import repo_root
from pace_nb.core.errors import ConfigError, PaceNBError, unknown
from pace_nb.notebook_setup import (NotebookContext, default_figures_dir, notebook_figures_dir, resolve_seeds,
                                    setup_notebook)

__all__ = ["KERNEL", "QUICK_PARAMETERS", "NotebookContext", "NotebookFailed", "NotebookRun", "default_figures_dir",
           "execute_notebook", "list_notebooks", "notebook_figures_dir", "resolve_seeds", "run_notebooks",
           "select_notebooks", "setup_notebook"]

KERNEL = "python3"
PACKAGE_DIR = Path(__file__).resolve().parent
#: Small values for a quick run (tests, ``pace-nb figures --quick``: seconds per notebook), each
#: applied to the notebooks that declare that parameter. Notebooks never branch on "quick".
QUICK_PARAMETERS: dict[str, Any] = {
    "dataset": "demo", "seeds": 2, "interactive": False,
    "ranks": [2, 6, 0], "variants": ["full", "mean"],                      # 02: rank study, Table 2
    "baselines": ["fedavg"], "rounds": 5,                                   # 05: hidden layers
    "sweeps": {"beta": [0.05, 0.15, 0.25], "gamma": [0.01, 0.1, 1.0], "T": [0, 1, 2, 4], "a": [0.0, 0.5, 0.9]},
    "sweep_datasets": [],                                                   # 05: sweeps on `dataset` only
    "fill_empty": True,                                                     # 06: an in-memory run
}


class NotebookFailed(PaceNBError):
    """A notebook cell raised; the message names the notebook, the cell and the error."""


# ----------------------------------------------------------------------------- finding notebooks
def notebook_dir() -> Path:
    root = repo_root()
    if root is None:
        raise ConfigError("the notebooks live in the pace_nb source checkout; none found beside this package")
    return root / "notebooks"


def list_notebooks(directory: str | os.PathLike | None = None) -> list[Path]:
    """The numbered notebooks ``NN_*.ipynb`` in order."""
    d = Path(directory) if directory else notebook_dir()
    return sorted(p for p in d.glob("[0-9][0-9]_*.ipynb"))


def select_notebooks(names: Iterable[str] | None = None, directory=None) -> list[Path]:
    """Notebooks matching each name by stem, number prefix ("03") or unique substring."""
    books = list_notebooks(directory)
    if not names:
        return books
    out = []
    for raw in names:
        n = str(raw).strip().removesuffix(".ipynb")
        hits = [p for p in books if p.stem == n] or [p for p in books if p.stem.split("_")[0] == n] \
            or [p for p in books if n.lower() in p.stem.lower()]
        if len(hits) != 1:
            raise unknown("notebook", raw, [p.stem for p in books])
        out += [h for h in hits if h not in out]
    return out


def parameters_cell(nb, where: str = "a notebook") -> dict[str, Any]:
    """Default values of the (single) ``parameters``-tagged cell: literal assignments, else a
    :class:`ConfigError` naming the parameter (``rounds = 2 * 50``: papermill could not replace it)."""
    cells = [c for c in nb.cells if c.cell_type == "code" and "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ConfigError(f"{where}: a notebook needs exactly one cell tagged 'parameters', found {len(cells)}")
    try:
        body = ast.parse(cells[0].source).body
    except SyntaxError as exc:
        raise ConfigError(f"{where}: its parameters cell is not valid Python (line {exc.lineno}: {exc.msg})") from None
    out = {}
    for node in body:
        target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0] if isinstance(node, ast.Assign) else None
        if isinstance(target, ast.Name) and node.value is not None:
            try:
                out[target.id] = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                raise ConfigError(f"{where}: parameter {target.id!r} = {ast.unparse(node.value)[:80]} is not a literal; "
                                  f"a parameters cell holds plain values (numbers, strings, lists, dicts)") from None
    return out


# ----------------------------------------------------------------------------- fingerprints
def package_fingerprint() -> str:
    """Version + sha256 over every source file of the package (what a notebook calls)."""
    h = hashlib.sha256(__version__.encode())
    for p in sorted(PACKAGE_DIR.rglob("*")):
        if p.suffix in (".py", ".csv", ".json", ".toml") and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(PACKAGE_DIR)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def store_fingerprint(results_dir: str | os.PathLike | None) -> str:
    """Names, sizes and mtimes of the results store's committed cells (cheap, no reads)."""
    from pace_nb.core.config import read_results_dir

    cells = read_results_dir(results_dir)[0] / "cells"
    h = hashlib.sha256()
    for p in sorted(cells.glob("*.json")) if cells.is_dir() else []:
        st = p.stat()
        h.update(f"{p.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


def input_key(path: Path, parameters: dict, package: str | None = None) -> str:
    """Key of one execution: notebook bytes, parameters, package fingerprint, and the results
    store for notebooks that read it."""
    body = Path(path).read_bytes()
    parts = {"notebook": hashlib.sha256(body).hexdigest(), "parameters": parameters,
             "package": package or package_fingerprint()}
    if b"nb.results_dir" in body:
        parts["store"] = store_fingerprint(parameters.get("results_dir"))
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


# ----------------------------------------------------------------------------- execution
def ensure_kernel(name: str = KERNEL) -> None:
    """Make sure a ``python3`` kernelspec exists (installs ipykernel's into the user dir if not)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:
        if name != KERNEL:
            raise unknown("kernel", name, KernelSpecManager().find_kernel_specs()) from None
        from ipykernel.kernelspec import install

        install(user=True, kernel_name=KERNEL)


@contextlib.contextmanager
def kernel_environment(**extra: str):
    """Environment for the kernel subprocess: no ``MPLBACKEND`` (pytest sets Agg; the kernel
    must use its inline backend so figures land in the executed notebook), quiet progress."""
    saved = dict(os.environ)
    os.environ.pop("MPLBACKEND", None)
    os.environ.setdefault("PACE_NB_PROGRESS", "0")
    os.environ.update(extra)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _failure(path: Path, output: Path, exc) -> NotebookFailed:
    first = (getattr(exc, "source", "") or "").strip().splitlines()[:1]
    where = (f"cell {exc.cell_index} of the executed copy (In [{exc.exec_count}]"
             + (f": {first[0][:60]}" if first else "") + ")")
    return NotebookFailed(f"notebook {path.name} failed in {where}: {exc.ename}: {exc.evalue} "
                          f"— executed copy with the traceback: {output}")


@functools.cache
def _kernel_manager() -> dict:
    """Kernel over IPC sockets where the OS has them (POSIX): nothing travels over TCP and the
    kernel does not warn about unencrypted TCP on every notebook. Shut down without the SIGINT
    jupyter_client sends first: papermill shuts a kernel down when its notebook is done, and the
    interrupt only made the kernel log "KeyboardInterrupt caught in kernel" on the terminal (the
    shutdown request itself travels on the control channel, which a busy kernel answers too)."""
    from jupyter_client.manager import AsyncKernelManager

    class QuietKernelManager(AsyncKernelManager):
        def __init__(self, **kw):
            super().__init__(**({"transport": "ipc"} if os.name == "posix" else {}), **kw)

        async def _async_interrupt_kernel(self) -> None:
            if not self.shutting_down:  # a timeout's interrupt still goes through
                await super()._async_interrupt_kernel()

    return {"kernel_manager_class": QuietKernelManager}


def execute_notebook(path: Path, output: Path, parameters: dict, timeout: int = 900, recompute: bool = False) -> None:
    """Execute one notebook with papermill in a fresh ``python3`` kernel (cwd = its folder);
    ``recompute``: its figure data is computed afresh, not read (``$PACE_NB_RECOMPUTE`` in the kernel)."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    from pace_nb.experiments.artifacts import RECOMPUTE_ENV

    ensure_kernel()
    output.parent.mkdir(parents=True, exist_ok=True)
    with kernel_environment(**({RECOMPUTE_ENV: "1"} if recompute else {})):
        try:
            pm.execute_notebook(str(path), str(output), parameters=parameters, kernel_name=KERNEL,
                                progress_bar=False, cwd=str(path.parent), execution_timeout=timeout,
                                **_kernel_manager())
        except PapermillExecutionError as exc:
            raise _failure(path, output, exc) from exc


@dataclass
class NotebookRun:
    """Outcome of one (notebook, dataset) job."""

    notebook: str
    dataset: str
    status: str  # "executed" | "skipped"
    seconds: float
    output: str
    figures: list[str]


def _stamp_path(output: Path) -> Path:
    return output.with_suffix(".json")


def _read_stamp(stamp: Path) -> dict:
    """A run stamp's fields; a missing, truncated or malformed one is none (the notebook runs again)."""
    try:
        old = json.loads(stamp.read_text(encoding="utf-8"))
        ok = isinstance(old["key"], str) and all(isinstance(f, str) for f in old.get("figures", []))
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return old if ok and isinstance(old.get("figures", []), list) else {}


def _new_files(folder: Path, since: float, prefix: str) -> list[str]:
    """Figures a notebook wrote: its number prefix ("03_"), modified during its run."""
    return sorted(p.name for p in folder.glob(f"{prefix}*") if p.is_file() and p.stat().st_mtime >= since)


def default_datasets(quick: bool, data_root=None) -> list[str | None]:
    """Datasets a batch run covers: quick → demo (+ Cora when its raw files are present);
    full → each notebook's own default (None)."""
    if not quick:
        return [None]
    from pace_nb.data.datasets import missing_files

    quick_sets: list[str | None] = ["demo"]
    return quick_sets + ([] if missing_files("Cora", data_root) else ["Cora"])


def run_notebooks(names: Iterable[str] | None = None, *, quick: bool = False, datasets: Sequence[str] | None = None,
                  force: bool = False, figures_dir: str | os.PathLike | None = None,
                  build_dir: str | os.PathLike | None = None, data_root: str | None = None,
                  results_dir: str | None = None, parameters: dict | None = None, notebooks_dir=None,
                  timeout: int = 900, log=None, recompute: bool = False) -> list[NotebookRun]:
    """Execute the selected notebooks for each dataset; returns one :class:`NotebookRun` per job.

    ``quick`` passes :data:`QUICK_PARAMETERS` (those each notebook declares); ``parameters``
    override per call and must be declared by every selected notebook; ``data_root`` /
    ``results_dir`` go to the notebooks that declare them. Executed copies
    go to ``build_dir`` (default ``notebooks/_build``) as ``<stem>__<dataset>.ipynb`` with a
    JSON stamp beside them; unchanged jobs are skipped unless ``force``. ``recompute`` (implies
    ``force``): every notebook computes its figure data afresh (training included) and stores it."""
    import nbformat

    books = select_notebooks(names, notebooks_dir)
    if not books:
        raise ConfigError(f"no notebooks found in {notebooks_dir or notebook_dir()}")
    figs = Path(figures_dir).resolve() if figures_dir else default_figures_dir()
    build = Path(build_dir).resolve() if build_dir else books[0].parent / "_build"
    figs.mkdir(parents=True, exist_ok=True)
    package = package_fingerprint()
    runs = []
    if datasets:  # registry names only: a name becomes part of the output path
        from pace_nb.data.datasets import canonical_name

        datasets = [canonical_name(d) for d in datasets]
    for ds in (datasets or default_datasets(quick, data_root)):
        for path in books:
            nb_defaults = parameters_cell(nbformat.read(path, as_version=4), path.name)
            small = {k: v for k, v in QUICK_PARAMETERS.items() if k in nb_defaults} if quick else {}
            params = {**small, **(parameters or {}), "figures_dir": str(figs)}
            if ds is not None:
                params["dataset"] = ds
            # absolute: the kernel runs in the notebooks' folder, not where the command was given
            given = {k: str(Path(v).resolve()) if v else v for k, v in (("data_root", data_root), ("results_dir", results_dir))}
            params.update({k: v for k, v in given.items() if v and k in nb_defaults})
            unknown_params = sorted(set(params) - set(nb_defaults))
            if unknown_params:
                raise ConfigError(f"{path.name} has no parameter(s) {unknown_params}; its parameters: "
                                  f"{', '.join(nb_defaults)}")
            label = str(params.get("dataset", nb_defaults.get("dataset")))
            output = build / f"{path.stem}__{label}.ipynb"
            key = input_key(path, params, package)
            stamp = _stamp_path(output)
            old = _read_stamp(stamp) if not (force or recompute) and output.exists() else {}
            if old.get("key") == key and all((figs / f).exists() for f in old.get("figures", [])):
                runs.append(NotebookRun(path.stem, label, "skipped", 0.0, str(output), old.get("figures", [])))
                if log:
                    log(f"{path.stem} [{label}]: unchanged, skipped")
                continue
            if log:
                log(f"{path.stem} [{label}]: executing …")
            t0 = time.time()
            stamp.unlink(missing_ok=True)
            execute_notebook(path, output, params, timeout, recompute=recompute)
            run = NotebookRun(path.stem, label, "executed", time.time() - t0, str(output),
                              _new_files(figs, t0, path.stem.split("_")[0] + "_"))
            from pace_nb.core.io import atomic_write_json

            atomic_write_json(stamp, {"key": key, **asdict(run), "parameters": params})
            runs.append(run)
    return runs
