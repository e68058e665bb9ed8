"""Run the apps on Flower's simulation engine (Ray backend): K virtual SuperNodes, one process tree.

:func:`simulate` exports the federation into per-client files (each virtual SuperNode reads
only its own ``client_<partition-id>.npz``) and the evaluator's file (read by the ServerApp
only for a complete-graph method), runs :func:`flwr.simulation.run_simulation` and
returns the :class:`~pace_nb.flower.server.FlowerOutcome` with the engine's start-up time
separated from the round (``timings["startup"]`` = total − the round the server measured).
"""
from __future__ import annotations

import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from pace_nb.core.errors import ConfigError, RuntimeStartError
from pace_nb.core.limits import load_note
from pace_nb.flower.client import make_client_app
from pace_nb.flower.partitions import export_evaluation, export_partitions
from pace_nb.flower.server import FlowerOutcome, make_server_app
from pace_nb.flower.settings import FlowerSettings


def require_flwr():
    """Import ``flwr`` or explain how to install it."""
    try:
        import flwr
    except ImportError:
        raise ConfigError("Flower is not installed: pip install 'pace_nb[flower]'") from None
    return flwr


def _start_error(exc: BaseException) -> RuntimeStartError | None:
    """A one-line error when Ray (under Flower's simulation engine) did not start, else ``None``."""
    seen: BaseException | None = exc
    while seen is not None:
        if "timed out during startup" in str(seen):
            return RuntimeStartError(f"Flower's simulation engine: the Ray runtime did not start "
                                     f"({' '.join(str(seen).split())[:160]}); {load_note()}")
        seen = seen.__cause__ or seen.__context__
    return None


def simulate(fg, settings: FlowerSettings, *, partition_dir=None, num_cpus: int | None = None,
             drop_partitions=(), verbose: bool = False) -> FlowerOutcome:
    """One round of ``settings.method`` on ``fg``'s K clients in Flower's simulation engine."""
    require_flwr()
    from flwr.simulation import run_simulation

    if settings.num_clients != fg.num_clients:
        raise ConfigError(f"settings ask for {settings.num_clients} clients; the federation has {fg.num_clients}")
    holder: list[FlowerOutcome] = []
    with tempfile.TemporaryDirectory(prefix="pace_nb_flower_") as tmp:
        directory = Path(partition_dir) if partition_dir is not None else Path(tmp)
        export_partitions(fg, directory)
        evaluation = export_evaluation(fg, Path(tmp) / "evaluator")  # read by complete-graph methods only
        cpus = int(num_cpus or os.cpu_count() or 1)
        backend: dict[str, dict[str, Any]] = {"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                   "init_args": {"num_cpus": cpus, "include_dashboard": False, "log_to_driver": verbose}}
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                run_simulation(server_app=make_server_app(settings, sink=holder.append, evaluation=str(evaluation),
                                                          federation=str(directory)),
                               client_app=make_client_app(str(directory), drop_partitions),
                               num_supernodes=fg.num_clients, backend_config=backend, verbose_logging=verbose)
            except RuntimeError as exc:
                start = _start_error(exc)
                if start is None:
                    raise
                raise start from exc
        total = time.perf_counter() - t0
    if not holder:
        raise ConfigError("the Flower simulation ended without a result (see the log above)")
    return holder[0].finish(total, "simulation")
