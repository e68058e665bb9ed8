"""Notebooks 01, 02 and 03 in a real JupyterLab, driven by headless Chromium (Playwright) in a
900 px window: each explorer cell holds exactly one live view (no static figure, no cell value
beside it) that fits the window, and moving its control changes the figure.

Needs the system Chromium (Debian package ``chromium``) and ``playwright`` (the ``test``
extra); skips with the reason when either is absent. The notebook is a papermill-parametrised
copy (demo graph, one seed, ``interactive = True``) in a temporary root; nothing is executed
outside the browser.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: notebook → the explorer's control (a slider moved with the arrow keys, or a dropdown).
EXPLORERS = {"01_local_training": "dropdown", "02_lowrank_transport": "slider", "03_alpha_paths": "slider"}
WIDTH = 900  # px: the explorers must be usable in a window this wide
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
WIDGET_VIEW = ".jp-OutputArea-output .jupyter-widgets.widget-vbox"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def _requirements():
    if not Path(CHROMIUM).is_file():
        pytest.skip("no system Chromium (Debian: apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright  # noqa: F401
    except ImportError:
        pytest.skip("playwright is not installed (pip install playwright==1.65.2, the 'test' extra)")
    try:
        import jupyterlab  # noqa: F401
        import jupyterlab_widgets  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"JupyterLab with the ipywidgets extension is not installed ({exc.name})")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _notebook_copy(folder: Path, notebook: Path) -> str:
    """The notebook with its parameters set (papermill injection, not executed)."""
    import nbformat
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    params = {"dataset": "demo", "seeds": 1, "device": "cpu", "interactive": True,
              "figures_dir": str(folder / "figures"), "results_dir": str(folder / "results")}
    nb = load_notebook_node(str(notebook))
    declared = "".join(next(c for c in nb.cells if "parameters" in c.metadata.get("tags", [])).source)
    nb = parameterize_notebook(nb, {k: v for k, v in params.items() if f"\n{k}:" in "\n" + declared})
    nbformat.write(nb, folder / notebook.name)
    return notebook.name


@pytest.fixture(params=list(EXPLORERS))
def lab(request, tmp_path):
    """A JupyterLab server on 127.0.0.1 (random port, token) rooted in a temporary folder."""
    _requirements()
    root = tmp_path / "root"
    root.mkdir()
    name = _notebook_copy(root, ROOT / "notebooks" / f"{request.param}.ipynb")
    port, token = _free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}  # the kernel draws inline
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p]),
               JUPYTER_CONFIG_DIR=str(tmp_path / "config"), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"), PACE_NB_PROGRESS="0", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
           "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--ServerApp.terminals_enabled=False",
           '--ServerApp.jpserver_extensions={"jupyter_lsp": False, "jupyter_server_terminals": False}'] + (["--allow-root"] if os.geteuid() == 0 else [])
    log = open(tmp_path / "lab.log", "wb")  # noqa: SIM115 (closed in the finally below)
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    pytest.fail(f"JupyterLab did not start: {(tmp_path / 'lab.log').read_text()[-2000:]}")
                time.sleep(0.5)
        yield request.param, f"{url}/lab/tree/{name}?token={token}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _image_digest(page, view) -> tuple[str, str]:
    """(src, sha256 of the bytes behind it) of the explorer's figure <img>."""
    img = view.locator("img")
    src = img.get_attribute("src")
    data = page.evaluate("async (s) => Array.from(new Uint8Array(await (await fetch(s)).arrayBuffer()))", src)
    return src, hashlib.sha256(bytes(data)).hexdigest()


def _move(page, view, control: str) -> str:
    """Move the explorer's control one way or the other; returns its value before."""
    if control == "dropdown":
        select = view.locator("select")
        assert select.count() == 1
        before = select.input_value()
        options = select.locator("option").all_inner_texts()
        select.select_option(label=options[1] if options[0] == before else options[0])
        return before
    handle = view.locator(".widget-slider .noUi-handle")
    assert handle.count() == 1
    readout = view.locator(".widget-readout").inner_text()
    try:
        key = "ArrowLeft" if float(readout) > 0.5 else "ArrowRight"  # α starts at α* in [0, 1]
    except ValueError:
        key = "ArrowLeft"  # the rank slider starts at rank 6, with ranks below it
    handle.focus()
    for _ in range(5):
        handle.press(key)
    return readout


def test_each_explorer_is_one_live_view_that_fits_and_redraws(lab):
    from playwright.sync_api import sync_playwright

    notebook, url = lab
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
            page.goto(url)
            page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget "
                                   "&& window.jupyterapp.shell.currentWidget.sessionContext "
                                   "&& window.jupyterapp.shell.currentWidget.sessionContext.session "
                                   "&& window.jupyterapp.shell.currentWidget.sessionContext.session.kernel",
                                   timeout=60_000)
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
            # done: every code cell has run (a number in its prompt) and the kernel is idle
            page.wait_for_function("""() => {
                const nb = window.jupyterapp.shell.currentWidget;
                const cells = nb.content.widgets.filter(c => c.model.type === 'code');
                return nb.sessionContext.session.kernel.status === 'idle'
                       && cells.every(c => c.model.executionCount !== null);
            }""", timeout=150_000, polling=500)
            errors = page.evaluate("""() => window.jupyterapp.shell.currentWidget.content.widgets
                .filter(c => c.model.type === 'code').flatMap(c => c.model.outputs.toJSON())
                .filter(o => o.output_type === 'error').map(o => o.ename + ': ' + o.evalue)""")
            assert errors == []
            views = page.locator(WIDGET_VIEW)
            views.first.locator("img").wait_for(timeout=30_000)
            # one explorer per notebook: exactly one live view, alone in its cell's output
            assert views.count() == 1
            cell = page.locator(".jp-CodeCell").filter(has=page.locator(WIDGET_VIEW))
            assert cell.count() == 1
            assert cell.locator(".jp-OutputArea-child").count() == 1, "static figure or cell value beside the widget"
            view = views.first
            assert view.locator("img").count() == 1
            view.scroll_into_view_if_needed()
            area = cell.locator(".jp-OutputArea-output").first.bounding_box()
            for part in [view.locator("img")] + ([view.locator("table")] if view.locator("table").count() else []):
                box = part.bounding_box()
                assert box["x"] + box["width"] <= area["x"] + area["width"] + 1, f"{notebook}: wider than {WIDTH} px"
            assert view.evaluate("v => v.scrollWidth <= v.clientWidth + 1"), f"{notebook}: explorer overflows"
            before = _image_digest(page, view)
            value = _move(page, view, EXPLORERS[notebook])
            page.wait_for_function("([sel, src]) => { const i = document.querySelector(sel + ' img');"
                                   " return i && i.getAttribute('src') !== src; }", arg=[WIDGET_VIEW, before[0]],
                                   timeout=30_000)
            after = _image_digest(page, view)
            now = (view.locator("select").input_value() if EXPLORERS[notebook] == "dropdown"
                   else view.locator(".widget-readout").inner_text())
            assert now != value
            assert after[0] != before[0] and after[1] != before[1]  # a new figure, not the same bytes again
            assert page.locator(WIDGET_VIEW).count() == 1
        finally:
            browser.close()
