"""Tidy frames behind the notebooks' figures and widgets (no plotting, no I/O).

Each function turns package objects (``FederatedGraph``, ``LocalModels``, result rows,
SPEAR analysis frames) into the documented input of a :mod:`pace_nb.viz.pace` /
:mod:`pace_nb.viz.spear` function, so the notebooks stay thin and tests can reach
everything a notebook shows.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from pace_nb.core.errors import ConfigError

if TYPE_CHECKING:
    from pace_nb.methods.pace.sketch import SketchKind

SPLITS = ("train", "val", "test")


def partition_frame(fg) -> pd.DataFrame:
    """``client, class, split, count``: nodes of each class in each client's split."""
    recs = []
    for k, c in enumerate(fg.clients):
        for split in SPLITS:
            y = c.y[getattr(c, f"{split}_mask")].long()
            counts = torch.bincount(y, minlength=fg.num_classes).tolist()
            recs += [{"client": k, "class": cls, "split": split, "count": int(n)} for cls, n in enumerate(counts)]
    return pd.DataFrame(recs)


def curves_frame(local) -> pd.DataFrame:
    """``LocalModels.curves`` (model index b = s·K + k) with ``seed`` and ``client`` columns;
    ``val_acc`` (validation accuracy of the training forward, dropout on) is NaN for curves
    recorded before it existed."""
    if local.curves is None:
        raise ConfigError("these Local models were trained without curves; call train_local(..., record=True)")
    c = local.curves
    if "val_acc" not in c.columns:
        c = c.assign(val_acc=float("nan"))
    if "client" in c.columns and "seed" in c.columns:
        return c
    k = local.num_clients
    return c.assign(client=c["model"] % k, seed=[local.seeds[i] for i in c["model"] // k])


def _deltas(local, s: int) -> dict[str, Tensor]:
    """Stacked ``Δ_i = W_L − W0`` of seed position ``s``: name → [K, …]."""
    k = local.num_clients
    w0 = local.init[s]
    return {n: local.params[n][s * k:(s + 1) * k] - w0[n].unsqueeze(0) for n in w0}


def delta_spectra(local, s: int = 0) -> pd.DataFrame:
    """``param, client, index, sigma``: singular values of every client's Δ weight matrix."""
    recs = []
    for name, d in _deltas(local, s).items():
        if d.dim() != 3:
            continue
        sv = torch.linalg.svdvals(d.double())  # [K, min(d_out, d_in)]
        for client, row in enumerate(sv.tolist()):
            recs += [{"param": name, "client": client, "index": i, "sigma": v} for i, v in enumerate(row)]
    return pd.DataFrame(recs)


def rank_energy(spectra: pd.DataFrame, ranks: Sequence[int]) -> pd.DataFrame:
    """``param, client, rank, energy``: share of ‖Δ‖²_F kept by the rank-r truncation (Eckart–Young)."""
    recs = []
    for (p, c), f in spectra.groupby(["param", "client"], sort=True):
        s2 = np.sort(f["sigma"].to_numpy() ** 2)[::-1]
        tot = max(s2.sum(), 1e-300)
        recs += [{"param": p, "client": c, "rank": r, "energy": float(s2[:r].sum() / tot)} for r in ranks]
    return pd.DataFrame(recs)


def _sketches(fg, local, s: int, kind: SketchKind = "propagated") -> dict[str, Tensor]:
    from pace_nb.nn.gcn import propagation_matrix
    from pace_nb.methods.pace.sketch import SketchConfig, client_sketches

    out: dict[str, list] = {}
    for k, c in enumerate(fg.clients):
        x = c.x.to_dense() if c.x.is_sparse else c.x
        sk = client_sketches(local.model(s, k), x.float(), propagation_matrix(c.edge_index, c.num_nodes),
                             c.train_mask, SketchConfig(kind=kind))
        for n, v in sk.items():
            out.setdefault(n, []).append(v)
    return {n: torch.stack(v) for n, v in out.items()}


def sketch_frame(fg, local, s: int = 0, kind: SketchKind = "propagated") -> pd.DataFrame:
    """``param, client, column, c``: every client's per-layer sketch (Eq. 4–5)."""
    recs = []
    for name, c in _sketches(fg, local, s, kind).items():
        for client, row in enumerate(c.tolist()):
            recs += [{"param": name, "client": client, "column": j, "c": v} for j, v in enumerate(row)]
    return pd.DataFrame(recs)


def consensus_frame(fg, local, s: int = 0, rank: int = 6) -> pd.DataFrame:
    """``param, column, regmean, mean, weight``: column norms of Δ^C under RegMean (Eq. 7)
    and plain Mean, from the rank-r carriers Δ̄_i; ``weight`` = Σ_j c_j[d]."""
    from pace_nb.methods.pace.lowrank import compress, reconstruct
    from pace_nb.methods.pace.transport import TransportConfig, consensus

    deltas = reconstruct(compress(_deltas(local, s), rank, batch_dims=1))
    sk = _sketches(fg, local, s)
    reg = consensus(deltas, sk, TransportConfig("regmean"))
    mean = consensus(deltas, None, TransportConfig("mean"))
    recs = []
    for name in sk:
        r, m, w = reg[name].norm(dim=0), mean[name].norm(dim=0), sk[name].sum(0)
        recs += [{"param": name, "column": j, "regmean": float(a), "mean": float(b), "weight": float(c)}
                 for j, (a, b, c) in enumerate(zip(r, m, w, strict=True))]
    return pd.DataFrame(recs)


@dataclass
class ReceiverLogits:
    """Local and External logits of every receiver of one seed, with labels and masks."""

    z_local: list[Tensor]
    z_external: list[Tensor]
    y: list[Tensor]
    val_mask: list[Tensor]
    test_mask: list[Tensor]
    alpha_star: dict[int, float] = field(default_factory=dict)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Flat arrays (receivers concatenated, ``sizes`` per receiver) for figure-data storage."""
        cat = lambda ts: torch.cat([t.detach().cpu() for t in ts]).numpy()
        return {"z_local": cat(self.z_local), "z_external": cat(self.z_external), "y": cat(self.y),
                "val_mask": cat(self.val_mask), "test_mask": cat(self.test_mask),
                "sizes": np.array([len(t) for t in self.y], dtype=np.int64),
                "alpha_star": np.array([self.alpha_star.get(i, np.nan) for i in range(len(self.y))], dtype=np.float64)}

    @classmethod
    def from_arrays(cls, arrays) -> ReceiverLogits:
        """Inverse of :meth:`to_arrays`."""
        cuts = np.cumsum(arrays["sizes"])[:-1]
        split = lambda a: [torch.from_numpy(np.ascontiguousarray(x)) for x in np.split(np.asarray(a), cuts)]
        alpha = {i: float(a) for i, a in enumerate(arrays["alpha_star"]) if a == a}
        return cls(split(arrays["z_local"]), split(arrays["z_external"]), split(arrays["y"]),
                   split(arrays["val_mask"]), split(arrays["test_mask"]), alpha)

    def blend_predictions(self, receiver: int, alpha: float) -> Tensor:
        """Predicted classes of ``receiver``'s nodes at ``alpha`` (Eq. 1)."""
        from pace_nb.methods.calibration import blend

        return blend(self.z_local[receiver], self.z_external[receiver], alpha).argmax(-1)


def receiver_logits(fg, local, s: int = 0, rank: int = 6, variant: str = "full", device="cpu") -> ReceiverLogits:
    """Run one seed of the PACE protocol (:func:`pace_nb.methods.pace.protocol.transport_seed`) and keep the
    logits each receiver calibrates on, with its CNLL α*."""
    from pace_nb.methods.calibration import cnll_alpha
    from pace_nb.methods.pace.protocol import transport_seed, variant_config
    from pace_nb.nn.training import client_logits

    k = fg.num_clients
    w_l = [local.model(s, i) for i in range(k)]
    tr = transport_seed(fg, w_l, local.init[s], variant_config(variant, rank))
    zl = [client_logits(w, c, device=device) for w, c in zip(w_l, fg.clients, strict=True)]
    ze = [client_logits(w, c, device=device) for w, c in zip(tr.external, fg.clients, strict=True)]
    out = ReceiverLogits(zl, ze, [c.y for c in fg.clients], [c.val_mask for c in fg.clients],
                         [c.test_mask for c in fg.clients])
    for i in range(k):
        vm = out.val_mask[i]
        out.alpha_star[i] = cnll_alpha(zl[i][vm], ze[i][vm], out.y[i][vm])
    return out


def alpha_paths(logits: ReceiverLogits, num: int = 51) -> pd.DataFrame:
    """``receiver, alpha, val_nll, val_acc, test_acc`` for every receiver (calibration.alpha_path)."""
    from pace_nb.methods.calibration import alpha_path

    frames = [alpha_path(zl, ze, y, vm, tm, num=num).assign(receiver=i)
              for i, (zl, ze, y, vm, tm) in enumerate(zip(logits.z_local, logits.z_external, logits.y,
                                                           logits.val_mask, logits.test_mask, strict=True))]
    return pd.concat(frames, ignore_index=True)


def sweep_frame(rows: pd.DataFrame, hue: str = "dataset") -> pd.DataFrame:
    """SPEAR sweep rows (column ``swept`` names the parameter) → ``param, value, acc, <hue>``."""
    if "swept" not in rows.columns:
        raise ConfigError("sweep rows need a 'swept' column (spear_analysis.sweep_* output)")
    parts = [f.assign(param=p, value=pd.to_numeric(f[p])) for p, f in rows.groupby("swept", sort=False)]
    out = pd.concat(parts, ignore_index=True)
    if hue not in out.columns:
        raise ConfigError(f"sweep rows have no {hue!r} column")
    extra = [c for c in ("variant", "dataset", "num_clients", "seed") if c in out.columns and c != hue]
    return out[["param", "value", "acc", hue] + extra]


def local_results_note(rows: pd.DataFrame) -> str:
    """One line: what a rows frame holds (datasets, methods, seeds) for notebook captions."""
    if rows is None or rows.empty:
        return "no result rows"
    return (f"{len(rows)} rows · datasets {sorted(rows['dataset'].unique())} · methods "
            f"{sorted(rows['method'].unique())} · {rows['seed'].nunique()} seed(s)")


# ----------------------------------------------------------------------------- result rows
def protocol_rows(fg, local, methods: Sequence[str] = ("local", "pace"), *, variants: Sequence[str] = ("full",),
                  ranks: Sequence[int] = (6,), device="auto", method_params: dict | None = None) -> pd.DataFrame:
    """Result rows of registered methods on ALREADY trained Local models (the loop of
    :func:`pace_nb.methods.protocol.run_protocol` without retraining), so a notebook can show the
    models it trained and their rows together."""
    from pace_nb.methods.protocol import run_protocol
    from pace_nb.methods.registry import with_shared_options

    params = with_shared_options(method_params, methods, variants=tuple(variants), ranks=tuple(int(r) for r in ranks))
    return run_protocol(fg, seeds=local.seeds, methods=methods, method_params=params, local=local, device=device,
                        progress=False)


def with_store(rows: pd.DataFrame, results_dir=None, **filters) -> pd.DataFrame:
    """``rows`` plus the results store's rows of OTHER datasets (same filters), so figures
    show every dataset run so far beside the notebook's own run."""
    from pace_nb.experiments.store import load_results

    store = load_results(results_dir, **filters)
    if store.empty:
        return rows
    store = store[~store["dataset"].isin(set(rows["dataset"]))]
    return pd.concat([rows, store[[c for c in rows.columns if c in store.columns]]], ignore_index=True)


def store_first(rows: pd.DataFrame, results_dir=None, **filters) -> pd.DataFrame:
    """The results store's rows (same filters) plus ``rows`` of the datasets the store does not
    hold: a figure of a paper's table reads the committed cells, the notebook's own run fills in
    only what the store lacks (the inverse of :func:`with_store`)."""
    from pace_nb.experiments.store import load_results

    store = load_results(results_dir, **filters)
    if store.empty:
        return rows
    own = rows[~rows["dataset"].isin(set(store["dataset"]))]
    return pd.concat([store, own[[c for c in store.columns if c in own.columns]]], ignore_index=True)


def pace_rank_rows(rows: pd.DataFrame, rank: int = 6) -> pd.DataFrame:
    """Local rows and the full-PACE rows at ``rank`` (what Table 3 / Fig. 4 compare)."""
    return rows[(rows["method"] == "local") | ((rows["method"] == "pace") & (rows["variant"] == "full")
                                              & (rows["rank"] == rank))]


def silo_frame(rows: pd.DataFrame, rank: int = 6) -> pd.DataFrame:
    """``receiver, seed, alpha, diff``: each silo's CNLL α* and PACE − Local (points, on its own test
    nodes) per run seed, from result rows of Local and full PACE at ``rank`` (one setting)."""
    from pace_nb.analysis.diagnostics import receiver_units

    pace_rows = pace_rank_rows(rows, rank)
    units = receiver_units(pace_rows)[["seed", "receiver", "diff"]]
    pace = pace_rows[(pace_rows["method"] == "pace") & (pace_rows["receiver"] >= 0)][["seed", "receiver", "alpha"]]
    return units.merge(pace, on=["seed", "receiver"], how="left")[["receiver", "seed", "alpha", "diff"]]


def alpha_utilisation_frame(rows: pd.DataFrame, rank: int = 6) -> pd.DataFrame:
    """Table 3 per dataset: α use over receiver–seed units and mean upload / return ratios."""
    from pace_nb.analysis.diagnostics import alpha_utilisation

    pace = rows[(rows["method"] == "pace") & (rows["variant"] == "full") & (rows["rank"] == rank)]
    if pace.empty:
        raise ConfigError(f"no full-PACE rows at rank {rank}")
    util = alpha_utilisation(pace, by=("dataset",))
    comm = pace[pace["receiver"] < 0].groupby("dataset")[["upload_ratio", "return_ratio"]].mean().reset_index()
    return util.merge(comm, on="dataset")


# ----------------------------------------------------------------------------- SPEAR
def federated_hidden(fg, methods: Sequence[str], rounds: int, seed: int, device="auto") -> tuple[dict, dict]:
    """``representation_study(hidden=…)`` entries: the hidden layer of each client's model after
    ``rounds`` rounds of each method (one run seed), in global node order. A method that cannot
    run on this federation (e.g. a client without training nodes under extreme label skew) is
    left out and reported in the second return value (name → reason)."""
    from pace_nb.methods.baselines import train_federated
    from pace_nb.core.errors import PaceNBError
    from pace_nb.methods.spear.analysis import hidden_representation

    hidden, skipped = {}, {}
    for m in methods:
        try:
            fed = train_federated(fg, m, rounds=rounds, seeds=(seed,), device=device, progress=False)
        except PaceNBError as exc:
            skipped[m] = str(exc)
            continue
        h = hidden_representation(fg, [fed.model(0, k) for k in range(fg.num_clients)])
        hidden[m] = (lambda g, h=h: h)
    return hidden, skipped


def representation_frames(fg, baselines: Sequence[str], rounds: int, seed: int, device="auto"
                          ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """SPEAR Fig. 2 inputs: (silhouette scores, UMAP coordinates) of SPEAR's representations and
    the hidden layers of ``baselines`` after ``rounds`` rounds (:func:`federated_hidden`; a
    baseline that cannot run here is left out with a warning)."""
    import warnings

    from pace_nb.methods.spear.analysis import representation_study

    hidden, skipped = federated_hidden(fg, baselines, rounds=rounds, seed=seed, device=device)
    for name, why in skipped.items():
        warnings.warn(f"left out {name}: {why}", RuntimeWarning, stacklevel=2)
    return representation_study(fg, hidden=hidden, umap=True)


def prototype_frames(fg, config=None, seed: int = 0, coords: pd.DataFrame | None = None
                     ) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """SPEAR Fig. 5 inputs: (UMAP of nodes, UMAP of local/global prototypes, mean cosine
    distance to the true centroids per kind, in the clients' representation space). ``coords``:
    stored :func:`~pace_nb.methods.spear.analysis.prototype_umap` output (UMAP layouts differ
    between builds of its dependencies, so a notebook stores them as figure data); None computes it."""
    from pace_nb.methods.spear.analysis import prototype_alignment, prototype_umap

    if coords is None:
        coords = prototype_umap(fg, config, seed=seed)
    align, _ = prototype_alignment(fg, config)
    row = align[align["centroids"] == "client"].iloc[0]
    return (coords[coords["kind"] == "node"], coords[coords["kind"] != "node"],
            {"local": float(row["local_dist"]), "global": float(row["global_dist"])})


# ----------------------------------------------------------------------------- the papers' values on figures
def paper_paired_means(table1: pd.DataFrame) -> pd.DataFrame:
    """``dataset, metric, value``: the paper's PACE − Local per dataset (Fig. 4a–b; a seed-paired
    mean difference is the difference of the two means), from PACE Table 1's values."""
    keyed = table1.set_index(["dataset", "metric", "method"])["value"]
    recs = [{"dataset": d, "metric": m, "value": float(keyed[(d, m, "pace")] - keyed[(d, m, "local")])}
            for d, m in dict.fromkeys(zip(table1["dataset"], table1["metric"], strict=True))
            if (d, m, "pace") in keyed.index and (d, m, "local") in keyed.index]
    return pd.DataFrame(recs, columns=["dataset", "metric", "value"])


def paper_harm_units(table_a: pd.DataFrame) -> dict:
    """The paper's pooled receiver–seed units (App. A / Fig. 4c): ``datasets`` (the pooled ones)
    and ``helped``, ``tied``, ``harmed`` counts."""
    got = table_a.set_index("metric")["value"]
    return {"datasets": str(table_a["dataset"].iloc[0]).split("+"),
            **{k: int(got[k]) for k in ("helped", "tied", "harmed")}}


# ----------------------------------------------------------------------------- paper tables
def ours_vs_paper(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Long frame ``table, label, ours, paper, diff`` of every reproduced number
    (:func:`pace_nb.analysis.tables.build_tables` output; "not run" entries dropped)."""
    parts = [c.assign(table=t) for t, c in tables.items() if len(c)]
    if not parts:
        return pd.DataFrame(columns=["table", "label", "ours", "paper", "diff"])
    f = pd.concat(parts, ignore_index=True)
    f = f[f["status"] == "ok"]
    return pd.DataFrame({"table": f["table"], "label": f["table"] + ": " + f["row"].astype(str) + " / " + f["col"].astype(str),
                         "metric": f["metric"], "ours": pd.to_numeric(f["ours_mean"], errors="coerce"),
                         "paper": pd.to_numeric(f["paper_mean"], errors="coerce"),
                         "diff": pd.to_numeric(f["diff"], errors="coerce")}).reset_index(drop=True)


def rows_for_tables(results_dir=None, *, fill_empty: bool = False, dataset: str = "demo", runner=None,
                    **run_kw) -> tuple[pd.DataFrame, str]:
    """Rows behind notebook 06 and where they came from. The results store is the source;
    with ``fill_empty`` and no stored rows for ``dataset``, a small in-memory run of Local + PACE
    (``runner``, default :func:`pace_nb.methods.protocol.run_protocol`) is added and labelled as such
    (never written to the store). Without it nothing is run: missing values stay "not run"."""
    from pace_nb.experiments.store import load_results

    rows = load_results(results_dir)
    source = f"results store ({local_results_note(rows)})"
    if fill_empty and (rows.empty or not (rows["dataset"] == dataset).any()):
        if runner is None:
            from pace_nb.methods.protocol import run_protocol as runner
        extra = runner(dataset, progress=False, **run_kw)
        source += f" + small in-memory run, not stored ({local_results_note(extra)})"
        rows = pd.concat([rows, extra], ignore_index=True) if len(rows) else extra
    elif rows.empty:
        source = ("nothing: the results store is empty — fill it with `pace-nb grid configs/pace_main.toml` "
                  "(and the other configs), or rerun with fill_empty=True for a small in-memory run")
    return rows, source
