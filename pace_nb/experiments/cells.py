"""Grid cells: what one unit of work is, and how its result rows are computed.

A :class:`Cell` is (dataset, partition [β], K, data seed, a batch of run seeds, a group of
methods); :func:`run_cell` computes its rows with ONE :func:`pace_nb.methods.protocol.run_protocol`
call (protocol cells) or SPEAR's ablation / robustness / efficiency / comparison (SPEAR cells).
A :class:`LocalReuse` carried from cell to cell lets the method groups of one setting share the
federation and the trained Local models.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import pandas as pd

from pace_nb.data.federation import FederatedGraph
from pace_nb.experiments.store import stable_key
from pace_nb.nn.training import LocalModels, TrainConfig


@dataclass(frozen=True)
class Cell:
    """One unit of work; ``key`` is a stable hash of every field (JSON).

    ``data`` is the fingerprint of the raw data the cell is computed on
    (:func:`~pace_nb.data.datasets.data_fingerprint`, attached by :func:`~pace_nb.experiments.runner.run_grid`):
    the same setting on changed raw files is another cell. A cell without one (``""``: not yet
    attached, or written before fingerprints were kept) has the key it always had — :attr:`setting_key`.
    """

    kind: str  # "protocol" | "spear"
    dataset: str
    partition: str
    num_clients: int
    beta: float | None
    data_seed: int
    seeds: tuple[int, ...]
    methods: tuple[str, ...]
    variants: tuple[str, ...] = ("full",)  # PACE variants (protocol) or SPEAR ablation variants (spear)
    ranks: tuple[int, ...] = (6,)
    options: str = "{}"  # JSON: train config / method params (protocol), SPEAR options (spear)
    data: str = ""  # fingerprint of the raw data ("" = none attached)

    @property
    def key(self) -> str:
        return stable_key(asdict(self)) if self.data else self.setting_key

    @property
    def setting_key(self) -> str:
        """The key of the setting alone (every field but ``data``): the key of cells stored without
        a data fingerprint."""
        fields = asdict(self)
        fields.pop("data")
        return stable_key(fields)

    @property
    def label(self) -> str:
        part = self.partition + (f"(β={self.beta:g})" if self.beta is not None else "")
        seeds = f"{len(self.seeds)} seeds" if len(self.seeds) > 1 else f"seed {self.seeds[0]}"
        what = "+".join(self.methods) if len(self.methods) <= 4 else f"{self.methods[0]}+…+{self.methods[-1]} ({len(self.methods)})"
        if self.kind == "spear":
            opts = json.loads(self.options)
            what += f" [{','.join(self.variants)}]" + "".join(f" +{k}" for k in ("robustness", "efficiency") if opts.get(k))
        elif self.variants != ("full",) or self.ranks != (6,):
            what += f" [{','.join(self.variants)}; r={','.join(map(str, self.ranks))}]"
        return f"{self.dataset} {part} K={self.num_clients} {seeds} {what}"

    def describe(self) -> dict:
        fields = asdict(self)
        if not self.data:
            fields.pop("data")
        return {**fields, "key": self.key, "label": self.label}


# -- running one cell -----------------------------------------------------------------------
def _spear_alone(cell: Cell) -> bool:
    """A SPEAR cell of SPEAR's method alone runs its own analyses; with other methods, the comparison."""
    from pace_nb.methods.registry import registered
    from pace_nb.methods.spear.method import Spear

    return len(cell.methods) == 1 and issubclass(registered()[cell.methods[0]], Spear)


def _run_spear_cell(cell: Cell, data_root=None) -> pd.DataFrame:
    from pace_nb.methods.spear import analysis as sa
    from pace_nb.methods.spear.core import SpearConfig

    assert cell.beta is not None  # SPEAR's cells are Dirichlet ones: grid.expand gives each its beta
    opts = json.loads(cell.options)
    config = SpearConfig(**{k: opts[k] for k in ("T", "a", "gamma") if k in opts})
    frames = []
    for seed in cell.seeds:
        fg = sa.federation(cell.dataset, beta=cell.beta, num_clients=cell.num_clients, seed=seed, data_root=data_root)
        if not _spear_alone(cell):  # SPEAR's comparison (Tab. 1/3): every method on the complete graph
            from pace_nb.core.config import PAPER_SEEDS
            from pace_nb.methods.oneshot.compare import run_comparison

            frames.append(run_comparison(fg, cell.methods, rounds=int(opts.get("rounds", 100)),
                                         local_epochs=opts.get("local_epochs"),
                                         run_seed=int(opts.get("run_seed", PAPER_SEEDS[0])),
                                         config=TrainConfig(**opts.get("train", {})), spear_config=config,
                                         method_params=opts.get("method_params")))
            continue
        frames.append(sa.ablation(fg, config, cell.variants))
        if opts.get("robustness"):
            rob = sa.robustness(fg, config, rho=opts.get("rho", 0.5), eta=opts.get("eta", 0.5),
                                scope=opts.get("scope", "global"))
            rob = rob[rob["condition"] != "clean"].copy()  # clean = the ablation's "full" row
            rob["variant"] = rob["condition"].map({"edges": "edge_noise", "features": "feature_noise"})
            frames.append(rob)
        if opts.get("efficiency"):
            eff = sa.communication(fg, config, rounds=int(opts.get("rounds", 100)))
            eff["variant"] = eff["method"].map({"spear": "comm", "fedavg": "multiround"})
            frames.append(eff)
    return pd.concat(frames, ignore_index=True)


def cell_params(cell: Cell) -> dict:
    """The cell's ``method_params`` with its variants and ranks set as the shared options of the
    methods that take them (:func:`~pace_nb.methods.registry.with_shared_options`: PACE's)."""
    from pace_nb.methods.registry import with_shared_options

    return with_shared_options(json.loads(cell.options).get("method_params"), cell.methods,
                               variants=tuple(cell.variants), ranks=tuple(int(r) for r in cell.ranks))


@dataclass
class LocalReuse:
    """The federation and Local models of the last protocol setting, handed to the next cell of the
    same setting: a grid's method groups train Local once (rows are bitwise those of separate runs).

    ``key``: :func:`local_key` of the held setting; ``trained`` / ``reused`` / ``loaded``: how often
    Local was trained / handed on / read from the on-disk cache (:mod:`~pace_nb.experiments.local_cache`,
    shared by every grid and process on this machine).
    """

    key: str | None = None
    fg: FederatedGraph | None = None
    local: LocalModels | None = None
    trained: int = 0
    reused: int = 0
    loaded: int = 0


def local_key(cell: Cell, device) -> str:
    """What Local's models depend on: the federation, the seeds, the training config and the device."""
    train = json.loads(cell.options).get("train", {})
    return stable_key(dict(dataset=cell.dataset, partition=cell.partition, num_clients=cell.num_clients, beta=cell.beta,
                           data_seed=cell.data_seed, seeds=list(cell.seeds), train=train, device=str(device)))


def by_setting(cells: Iterable[Cell]) -> list[Cell]:
    """``cells`` with those that share Local's models (:func:`local_key`) made consecutive, each group
    where its first cell was (a stable reordering): a grid's :class:`LocalReuse` then trains Local once
    per setting, also across experiments of a config (e.g. a table's variants of one setting)."""
    groups: dict[str, list[Cell]] = {}
    for cell in cells:
        groups.setdefault(setting_key(cell), []).append(cell)
    return [cell for group in groups.values() for cell in group]


def setting_key(cell: Cell) -> str:
    """What a cell shares Local's models with other cells by: its :func:`local_key` (protocol cells), else its own key."""
    return local_key(cell, "any") if cell.kind == "protocol" else cell.key


def _shared_local(cell: Cell, reuse: LocalReuse, fg, data_root, device, config):
    from pace_nb.methods.protocol import federation, needs_local
    from pace_nb.nn.training import train_local

    key = local_key(cell, device)
    if reuse.key != key:
        built = fg if fg is not None else federation(cell.dataset, partition=cell.partition, num_clients=cell.num_clients,
                                                     data_seed=cell.data_seed, beta=cell.beta, data_root=data_root)
        reuse.key, reuse.fg, reuse.local = key, built, None
    if reuse.local is None and needs_local(cell.methods):
        from pace_nb.core.config import resolve_device
        from pace_nb.experiments import local_cache

        assert reuse.fg is not None  # held since the key check above
        dev = resolve_device(device)  # cached on the CPU only (deterministic), for data with a fingerprint
        disk = local_cache.cache_key(local_key(cell, dev), cell.data) if cell.data and dev.type == "cpu" else None
        reuse.local = local_cache.load(disk, tuple(cell.seeds), reuse.fg.num_clients, config) if disk else None
        if reuse.local is not None:
            reuse.loaded += 1
        else:
            reuse.local = train_local(reuse.fg, cell.seeds, config, device=device, progress=False)
            reuse.trained += 1
            if disk:
                local_cache.save(disk, reuse.local)
    elif reuse.local is not None:
        reuse.reused += 1
    return reuse.fg, reuse.local


def run_cell(cell: Cell, *, data_root=None, device="auto", progress: bool = False, fg=None,
             reuse: LocalReuse | None = None) -> pd.DataFrame:
    """Compute one cell's result rows (pure of the store; safe to call on a remote worker).

    ``fg``: the cell's ready ``FederatedGraph`` (protocol cells; e.g. shared by Ray), else built here.
    ``reuse``: a :class:`LocalReuse` carried from cell to cell (protocol cells of one setting then
    share the federation and the Local models).
    """
    if cell.kind == "spear":
        rows = _run_spear_cell(cell, data_root)
    else:
        from pace_nb.core.memory import retained_heap
        from pace_nb.methods.protocol import run_protocol
        from pace_nb.nn.training import TrainConfig

        opts = json.loads(cell.options)
        config, local = TrainConfig(**opts.get("train", {})), None
        with retained_heap():  # a cell's methods and evaluations reuse their large buffers
            if reuse is not None:
                fg, local = _shared_local(cell, reuse, fg, data_root, device, config)
            rows = run_protocol(cell.dataset if fg is None else fg, partition=cell.partition, num_clients=cell.num_clients,
                                seeds=cell.seeds, methods=cell.methods, data_seed=cell.data_seed, data_root=data_root,
                                device=device, progress=progress, train_config=config, beta=cell.beta, local=local,
                                method_params=cell_params(cell))
    rows = pd.DataFrame(rows)
    if "beta" not in rows.columns:
        rows["beta"] = cell.beta if cell.beta is not None else math.nan
    return rows
