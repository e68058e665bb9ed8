"""Ray scale-out of the experiment grid (docs/DESIGN.md §8, §11): one Ray task per grid cell.

The results store stays the single source of truth.  Workers only *compute*: a task runs
one cell and returns its rows; the driver writes them (``store.append`` inside
:func:`pace_nb.experiments.runner.run_grid`), so a cell is committed exactly once, atomically,
and a rerun after an interrupted grid computes only the missing cells.

* **Runtime.** ``address=None`` starts a private local Ray runtime bound to the loopback
  interface (no dashboard); ``"auto"``, ``"HOST:PORT"`` (GCS) or ``"ray://HOST:PORT"`` (Ray
  Client) join a running cluster.  A TCP probe with a bounded timeout runs first, so an
  unreachable address fails in seconds with a one-line :class:`ConfigError`.
* **Shared data.** The driver builds each ``FederatedGraph`` once per (dataset, partition,
  K, data seed, …) and ``ray.put``\\ s it; every task of that group receives the same object
  from the object store.  A group's object is released as soon as its last cell finished.
* **Failures.** Dead workers are retried by Ray (``max_retries``); cells that raise are
  resubmitted ``app_retries`` times (user errors, :class:`PaceNBError`, are not retried).
  Cells that still fail are reported together in one :class:`CellsFailedError` after all
  other cells were delivered — never silently dropped.
* **Resources.** A task asks for ``cpus_per_task`` CPUs; a CUDA cell (``device`` "cuda", or
  "auto" on a cluster that has GPUs) also asks for a ``gpus_per_task`` fraction.

Ray moves objects between the processes of one (trusted, token-authenticated) cluster with
its own serializer; nothing here is written to disk, and the store stays CSV + JSON.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import socket
import time
from dataclasses import dataclass, field, replace
from typing import Any
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence

from pace_nb.core.errors import ConfigError, PaceNBError
from pace_nb.core.limits import load_note

INSTALL_HINT = "pip install -e .[ray]  (or: pip install 'ray==2.60.0')"
CLIENT_HINT = "pip install 'ray[client]==2.60.0'"
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray binds every service to 127.0.0.1


class CellsFailedError(PaceNBError, RuntimeError):
    """Some grid cells failed on every attempt; the others were stored."""

    def __init__(self, failures: Sequence[CellFailure], total: int):
        self.failures = list(failures)
        shown = "; ".join(f"{f.key} ({f.error})" for f in self.failures[:3])
        more = f"; … {len(self.failures) - 3} more" if len(self.failures) > 3 else ""
        super().__init__(
            f"{len(self.failures)} of {total} grid cells failed after retries and were not stored "
            f"(the other cells are saved; rerun the same grid to retry only these): {shown}{more}")


@dataclass(frozen=True)
class CellFailure:
    key: str
    attempts: int
    error: str


@dataclass(frozen=True)
class RayOptions:
    """How the grid uses Ray.

    ``address``: None/"local" → private local runtime; "auto", "HOST:PORT", "ray://HOST:PORT"
    → join.  ``workers``: local runtime → CPUs it gets (default: all of this machine);
    cluster → most cells in flight at once (default: what the cluster's CPUs allow).
    """

    address: str | None = None
    workers: int | None = None
    cpus_per_task: float = 1.0
    gpus_per_task: float = 0.25
    max_retries: int = 2            # Ray-level: re-run a task whose worker process died
    app_retries: int = 1            # application-level: resubmit a cell that raised
    connect_timeout: float = 30.0   # seconds to join a cluster (the TCP probe: at most 5 s)
    startup_timeout: float = 120.0  # seconds a local runtime may take to start (Ray waits 30 s per try)
    device: str = "auto"            # device of cells that do not name one themselves

    def __post_init__(self):
        if self.workers is not None and (isinstance(self.workers, bool) or int(self.workers) < 1):
            raise ConfigError(f"--ray-workers must be a positive integer, got {self.workers!r}")
        if not self.cpus_per_task > 0:
            raise ConfigError(f"cpus_per_task must be > 0, got {self.cpus_per_task}")
        if not 0 < self.gpus_per_task <= 1:
            raise ConfigError(f"gpus_per_task must be a fraction in (0, 1], got {self.gpus_per_task}")
        if self.max_retries < 0 or self.app_retries < 0:
            raise ConfigError("max_retries and app_retries must be >= 0")
        if not self.connect_timeout > 0:
            raise ConfigError(f"connect_timeout must be > 0 seconds, got {self.connect_timeout}")
        if not self.startup_timeout > 0:
            raise ConfigError(f"startup_timeout must be > 0 seconds, got {self.startup_timeout}")


def require_ray():
    """Import Ray or explain the optional extra."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise ConfigError(f"--ray needs the optional Ray extra, which is not installed: {INSTALL_HINT}") from None


def parse_address(address: str | None) -> tuple[str, str | None, int | None]:
    """``(kind, host, port)`` with kind "local", "auto", "gcs" (HOST:PORT) or "client" (ray://)."""
    if address is None or str(address).strip().lower() in ("", "local"):
        return "local", None, None
    text = str(address).strip()
    if text.lower() == "auto":
        return "auto", None, None
    kind = "client" if text.startswith("ray://") else "gcs"
    hostport = text[len("ray://"):] if kind == "client" else text
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"bad Ray address {address!r}; use ray://HOST:PORT, HOST:PORT, 'auto', "
                          f"or no address for a local runtime")
    return kind, host.strip("[]"), int(port)


def probe(host: str, port: int, timeout: float) -> None:
    """Fail fast (one line) when nothing accepts TCP connections at ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return
    except OSError as exc:
        reason = "timed out" if isinstance(exc, socket.timeout) else (exc.strerror or type(exc).__name__)
        raise ConfigError(f"cannot reach a Ray cluster at {host}:{port} ({reason} within {timeout:g} s); "
                          f"check the address and that `ray start --head` runs there") from None


@contextlib.contextmanager
def _loopback_only(ray):
    """Make a local runtime bind its services to 127.0.0.1 (env for the spawned daemons,
    constant for this already imported driver)."""
    consts: Any = importlib.import_module("ray._private.ray_constants")
    old_env, old_flag = os.environ.get(LOOPBACK_ENV), getattr(consts, "ENABLE_RAY_CLUSTER", None)
    os.environ[LOOPBACK_ENV] = "0"
    consts.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        consts.ENABLE_RAY_CLUSTER = old_flag
        if old_env is None:
            os.environ.pop(LOOPBACK_ENV, None)
        else:
            os.environ[LOOPBACK_ENV] = old_env


AUTH_HINT = ("; a cluster with token authentication (Ray 2.60's default) needs RAY_AUTH_MODE=token here "
             "and its token in ~/.ray/auth_token or RAY_AUTH_TOKEN")


def _init_bounded(ray, timeout: float, hint: str = "", **kw) -> None:
    """``ray.init`` that gives up after ``timeout`` s (Ray itself may wait minutes for a GCS)."""
    import threading

    box: dict[str, BaseException] = {}

    def target():
        try:
            ray.init(**kw)
        except BaseException as exc:  # handed to the caller (SystemExit included)
            box["error"] = exc

    th = threading.Thread(target=target, name="pace-nb-ray-init", daemon=True)
    th.start()
    th.join(timeout)
    address = kw.get("address")
    if th.is_alive():
        raise ConfigError(f"Ray cluster at {address} did not answer within {timeout:g} s "
                          f"(is it a Ray head node of version {ray.__version__}?){hint}")
    if "error" in box:
        exc = box["error"]
        msg = " ".join(str(exc).split())[:300] or type(exc).__name__
        if "ray[client]" in msg:
            raise ConfigError(f"joining {address} needs the Ray Client: {CLIENT_HINT}") from None
        if address == "auto":
            raise ConfigError("no running Ray cluster found for --ray auto (start one with `ray start --head`, "
                              "or give no address to use a private local runtime)") from None
        raise ConfigError(f"cannot join the Ray cluster at {address}: {msg}{hint}") from None


def connect(options: RayOptions) -> bool:
    """Connect this process to Ray as ``options`` says; True when it started the runtime.

    An already initialized Ray (e.g. in a notebook) is reused as is.
    """
    ray = require_ray()
    if ray.is_initialized():
        return False
    kind, host, port = parse_address(options.address)
    common = dict(include_dashboard=False, log_to_driver=False, logging_level="error",
                  namespace="pace_nb")
    if kind == "local":
        ncpu = int(options.workers or os.cpu_count() or 1) * options.cpus_per_task
        start = time.monotonic()
        while True:  # Ray gives its raylet a fixed 30 s: try again until startup_timeout on a busy machine
            try:
                with _loopback_only(ray):
                    ray.init(address="local", num_cpus=max(1, int(ncpu)), **common)
                return True
            except Exception as exc:  # Ray raises a bare Exception here
                ray.shutdown()
                if time.monotonic() - start >= options.startup_timeout:
                    raise ConfigError(f"the local Ray runtime did not start within {options.startup_timeout:g} s "
                                      f"({' '.join(str(exc).split())[:200]}); {load_note()}; see "
                                      "session_latest/logs in Ray's temporary folder") from None
    if kind in ("gcs", "client"):
        assert host is not None and port is not None  # parse_address gives both for these kinds
        probe(host, port, min(options.connect_timeout, 5.0))
    if kind == "client":
        common = dict(namespace="pace_nb", logging_level="error")  # the client rejects local-only flags
    auth = os.environ.get("RAY_AUTH_MODE", "").lower() == "token"
    _init_bounded(ray, options.connect_timeout, "" if kind != "client" or auth else AUTH_HINT,
                  address=options.address, **common)
    return False


def _run_task(fn: Callable, cell: Any, fg: Any) -> Any:
    """Body of one Ray task: quiet progress bars, then ``fn(cell[, fg=graph])``."""
    os.environ["PACE_NB_PROGRESS"] = "0"
    return fn(cell) if fg is None else fn(cell, fg=fg)


def graph_key(cell: Any) -> Hashable | None:
    """What a protocol cell's ``FederatedGraph`` depends on (None: the cell builds its own)."""
    if getattr(cell, "kind", None) != "protocol":
        return None  # SPEAR cells draw one partition per (data) seed inside the cell
    return (cell.dataset, cell.partition, cell.num_clients, cell.beta, cell.data_seed)


def build_graph(cell: Any, data_root=None) -> Any:
    """The ``FederatedGraph`` of a protocol cell: the same call ``run_protocol`` makes."""
    from pace_nb.data.federation import build_federated

    kw = {"beta": cell.beta} if cell.beta is not None else {}
    return build_federated(cell.dataset, scheme=cell.partition, num_clients=cell.num_clients,
                           seed=cell.data_seed, data_root=data_root, **kw)


def _describe(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    err = cause if isinstance(cause, BaseException) else exc
    text = " ".join(str(err).split()) or type(err).__name__
    return f"{type(err).__name__}: {text[:200]}"


def _is_user_error(exc: BaseException) -> bool:
    return isinstance(getattr(exc, "cause", None), PaceNBError)


def _cell_key(cell: Any) -> str:
    return str(getattr(cell, "key", cell))


@dataclass
class RayExecutor:
    """Executor for ``run_grid(config, store, executor=RayExecutor(...))``: one Ray task per cell.

    ``map(fn, cells)`` yields ``fn(cell)`` for every cell, in completion order; the caller
    (the driver) stores each result.  After :meth:`bind` with ``share_graphs=True`` (what
    ``run_grid`` does for its own runner) protocol cells of one :func:`graph_key` share ONE
    ``FederatedGraph``, built here by ``build_graph(cell, data_root)`` and ``ray.put`` once,
    and ``fn`` is called as ``fn(cell, fg=graph)``.  ``stats`` holds timings (benchmarks).
    """

    options: RayOptions = field(default_factory=RayOptions)
    graph_key: Callable[[Any], Hashable | None] = graph_key
    build_graph: Callable[..., Any] = build_graph
    share_graphs: bool = False
    data_root: Any = None
    failures: list[CellFailure] = field(default_factory=list, init=False)
    stats: dict[str, float] = field(default_factory=dict, init=False)

    def bind(self, *, data_root=None, device: str | None = None, share_graphs: bool = True) -> RayExecutor:
        """Called by ``run_grid`` before :meth:`map`: its data root, device and whether its
        runner takes ``fg=``."""
        self.data_root, self.share_graphs = data_root, bool(share_graphs)
        if device:
            self.options = replace(self.options, device=str(device))
        return self

    def _resources(self, ray, cell: Any) -> dict[str, float]:
        device = str(getattr(cell, "device", None) or self.options.device)
        gpus = float(ray.cluster_resources().get("GPU", 0))
        if device.startswith("cuda") and gpus <= 0:
            raise ConfigError(f"device {device!r} asked for, but the Ray cluster has no GPU (use --device cpu)")
        res = {"num_cpus": self.options.cpus_per_task}
        if device.startswith("cuda") or (device == "auto" and gpus > 0):
            res["num_gpus"] = self.options.gpus_per_task
        return res

    def _window(self, ray) -> int:
        """Cells in flight: one per worker slot, plus one queued so no slot idles."""
        if self.options.workers:
            return int(self.options.workers) + 1
        cpus = float(ray.cluster_resources().get("CPU", 1))
        return max(1, int(cpus // self.options.cpus_per_task)) + 1

    def map(self, fn: Callable, cells: Iterable[Any]) -> Iterator[Any]:
        """Run ``fn`` on every cell as Ray tasks; failing cells → :class:`CellsFailedError` at the end."""
        cells = list(cells)
        self.failures = []
        if not cells:
            return
        ray = require_ray()
        t0 = time.perf_counter()
        started = connect(self.options)
        self.stats.update(connect_s=time.perf_counter() - t0, build_s=0.0, put_s=0.0, graphs=0)
        running: dict[Any, int] = {}  # ObjectRef of a result → cell index
        try:
            yield from self._dispatch(ray, fn, cells, running)
        finally:  # also on Ctrl-C / an error in the caller's loop: stop what is in flight
            for ref in running:
                ray.cancel(ref, force=True)
            self.stats["total_s"] = time.perf_counter() - t0
            if started:
                ray.shutdown()
        if self.failures:
            raise CellsFailedError(self.failures, len(cells))

    def _dispatch(self, ray, fn: Callable, cells: list, running: dict) -> Iterator[Any]:
        """Keep ``window`` tasks in flight, build/put each group's graph when its first cell
        is submitted, free it after its last cell, resubmit failed cells up to ``app_retries``."""
        task = ray.remote(_run_task).options(max_retries=self.options.max_retries, retry_exceptions=False,
                                             **self._resources(ray, cells[0]))
        window = self._window(ray)
        fn_ref = ray.put(fn)
        groups = [self.graph_key(c) if self.share_graphs else None for c in cells]
        left = {g: groups.count(g) for g in set(groups) if g is not None}
        live: dict[Hashable, Any] = {}          # group → ObjectRef of its FederatedGraph
        attempts = [0] * len(cells)
        queue = list(range(len(cells)))[::-1]   # pop() from the end keeps the grid order

        def graph_ref(i: int):
            g = groups[i]
            if g is not None and g not in live:
                t = time.perf_counter()
                fg = self.build_graph(cells[i], self.data_root)
                t1 = time.perf_counter()
                live[g] = ray.put(fg)
                self.stats["build_s"] += t1 - t
                self.stats["put_s"] += time.perf_counter() - t1
                self.stats["graphs"] += 1
            return live.get(g)

        def settle(i: int) -> None:
            g = groups[i]
            if g is not None:
                left[g] -= 1
                if left[g] == 0:
                    live.pop(g, None)  # the last reference: Ray frees the object

        while queue or running:
            while queue and len(running) < window:
                i = queue.pop()
                attempts[i] += 1
                running[task.remote(fn_ref, cells[i], graph_ref(i))] = i
            done, _ = ray.wait(list(running), num_returns=1)
            i = running.pop(done[0])
            try:
                out = ray.get(done[0])
            except ray.exceptions.RayError as exc:
                if attempts[i] <= self.options.app_retries and not _is_user_error(exc):
                    queue.append(i)  # resubmitted next
                else:
                    self.failures.append(CellFailure(_cell_key(cells[i]), attempts[i], _describe(exc)))
                    settle(i)
                continue
            settle(i)
            yield out


def make_executor(address: str | None = None, workers: int | None = None, **options) -> RayExecutor:
    """The executor behind ``pace-nb grid --ray [ADDRESS] --ray-workers N`` (checks Ray first)."""
    require_ray()
    return RayExecutor(RayOptions(address=address, workers=workers, **options))
