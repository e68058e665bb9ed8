"""SPEAR analyses (SPEAR §5, Tab. 2–4, Fig. 2, 4, 5): ablation, robustness, sweeps,
communication/time, representation study. Every function returns a tidy DataFrame whose
rows follow the result-row schema (``evaluation.make_row``; ``acc`` in percent, method
"spear") plus analysis columns (beta, gamma, T, a, rho, eta, …).

SPEAR is training-free, so its only randomness is the *data seed* (Dirichlet partition and
masks): multi-seed results vary the federation, not the method.
"""
from __future__ import annotations

import hashlib
import json
import time
import warnings
from dataclasses import replace
from typing import Any
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from pace_nb.methods.spear import core as sp
from pace_nb.core.errors import ConfigError, unknown
from pace_nb.methods.evaluation import federation_fields, make_row
from pace_nb.data.perturb import perturb_federated

NAN = float("nan")
#: Keys of :func:`sweep_hyperparameter` and their paper ranges (Fig. 4b).
HYPER_GRIDS = {"gamma": (0.01, 0.03, 0.1, 0.3, 1.0), "T": (0, 1, 2, 3, 4, 5),
               "a": (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95)}
BETA_GRID = (0.05, 0.1, 0.15, 0.2, 0.25)
K_GRID = (3, 5, 10, 15, 20)


# ----------------------------------------------------------------------------- rows
def spear_row(fg, variant: str, acc: float, config: sp.SpearConfig, *, run_seed: int = -1, **extra) -> dict:
    """One tidy row: schema columns via ``make_row`` (acc fraction → percent; study "spear",
    evaluation "complete_graph", ``seed`` = ``data_seed``; ``run_seed`` -1: SPEAR has none, a trained
    comparison names its own) + SPEAR columns; ``extra`` (also kept in ``params``) may set ``scope``."""
    cfg = getattr(fg, "config", {}) or {}
    fed = dict(federation_fields(fg), partition=cfg.get("scheme", cfg.get("partition", "dirichlet")))
    schema = {k: extra.pop(k) for k in ("bytes_up", "bytes_down", "seconds", "n_test") if k in extra}
    beta = cfg.get("beta", NAN)
    row = make_row(**fed, seed=fed["data_seed"], run_seed=int(run_seed), study="spear", evaluation="complete_graph",
                   method="spear", variant=variant, rank=0, receiver=-1, acc=100.0 * acc,
                   scope=str(extra.get("scope", "")),
                   params={"T": config.T, "a": config.a, "gamma": config.gamma, "beta": beta, **extra}, **schema)
    row.update(gamma=config.gamma, T=config.T, a=config.a, **extra)
    return row


def _frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows).reset_index(drop=True)


class _Cache:
    """Client uploads and complete-graph Z per (T, a): sweeps reuse propagations."""

    def __init__(self, fg):
        self.fg, self.up, self.z = fg, {}, {}

    def uploads(self, T, a):
        key = (int(T), float(a))
        if key not in self.up:
            self.up[key] = sp.client_prototypes(self.fg, *key)
        return self.up[key]

    def zg(self, T, a):
        key = (int(T), float(a))
        if key not in self.z:
            self.z[key] = sp.global_representation(self.fg, *key)
        return self.z[key]

    def run(self, config: sp.SpearConfig, variant: str = "full") -> sp.SpearResult:
        cfg, _ = config.for_variant(variant)
        return sp.run_spear(self.fg, config, variant, z_global=self.zg(cfg.T, cfg.a), uploads=self.uploads(cfg.T, cfg.a))


# ----------------------------------------------------------------------------- ablation (Tab. 4)
def ablation(fg, config: sp.SpearConfig | None = None, variants: Iterable[str] = tuple(sp.VARIANTS)) -> pd.DataFrame:
    """Accuracy of full / no_shrinkage / no_ppr / no_both (docs/DESIGN.md §7 semantics); ``label`` = paper name."""
    config, cache = config or sp.SpearConfig(), _Cache(fg)
    rows = []
    for v in variants:
        r = cache.run(config, v)
        rows.append(spear_row(fg, v, r.acc, r.config, label=sp.VARIANT_LABELS[v], val_acc=100 * r.val_acc,
                              n_test=int(fg.global_mask("test").sum()), bytes_up=r.bytes_up))
    return _frame(rows)


# ----------------------------------------------------------------------------- robustness (Tab. 2)
def robustness(fg, config: sp.SpearConfig | None = None, rho: float = 0.5, eta: float = 0.5,
               seed: int = 0, variant: str = "full", mask_mode: str | None = None,
               scope: str = "clients") -> pd.DataFrame:
    """SPEAR on the clean graph, with ρ edge noise, with η feature zero-masking
    (:func:`pace_nb.data.perturb.perturb_federated`). ``scope="clients"`` (default, OpenFGL):
    only the clients' local graphs are perturbed, evaluation on the clean complete graph;
    ``scope="global"``: the complete graph, evaluation included.

    Columns ``condition`` (clean/edges/features), ``scope``, ``rho``, ``eta``, ``acc`` and ``drop`` = clean − perturbed (points).
    """
    config = config or sp.SpearConfig()
    cases = [("clean", 0.0, 0.0), ("edges", float(rho), 0.0), ("features", 0.0, float(eta))]
    rows = []
    for cond, r_, e_ in cases:
        g = fg if cond == "clean" else perturb_federated(fg, rho=r_, eta=e_, seed=seed, mask_mode=mask_mode, scope=scope)
        res = sp.run_spear(g, config, variant)
        mode = (g.config.get("perturb", {}).get("mask_mode", "") if e_ else "")
        rows.append(spear_row(fg, variant, res.acc, config, condition=cond, scope=scope, rho=r_, eta=e_,
                              perturb_seed=int(seed), mask_mode=mode))
    df = _frame(rows)
    df["drop"] = float(df.loc[0, "acc"]) - df["acc"]
    return df


# ----------------------------------------------------------------------------- sweeps (Fig. 4)
def sweep_hyperparameter(fg, name: str, values: Sequence | None = None, config: sp.SpearConfig | None = None,
                         variant: str = "full") -> pd.DataFrame:
    """Accuracy as one of γ, T, a varies (others at ``config``); column ``swept`` names the parameter."""
    if name not in HYPER_GRIDS:
        raise unknown("SPEAR sweep parameter", name, HYPER_GRIDS)
    config, cache = config or sp.SpearConfig(), _Cache(fg)
    rows = []
    for v in (HYPER_GRIDS[name] if values is None else values):
        cfg = replace(config, **{name: v})  # type: ignore[arg-type]  # name is a SpearConfig field (checked above)
        r = cache.run(cfg, variant)
        rows.append(spear_row(fg, variant, r.acc, r.config, swept=name, val_acc=100 * r.val_acc))
    return _frame(rows)


def federation(dataset: str, beta: float = 0.05, num_clients: int = 10, seed: int = 2024, data_root=None):
    """The Dirichlet federation SPEAR is evaluated on (``federation.build_federated``)."""
    from pace_nb.data.federation import build_federated

    return build_federated(dataset, scheme="dirichlet", num_clients=num_clients, seed=seed, beta=beta,
                           data_root=data_root)


def sweep_federation(dataset: str, name: str, values: Sequence | None = None, config: sp.SpearConfig | None = None,
                     seeds: Sequence[int] = (2024,), beta: float = 0.05, num_clients: int = 10,
                     data_root=None, builder: Callable | None = None, variants=("full",),
                     skip_infeasible: bool = True) -> pd.DataFrame:
    """Accuracy as β (``name="beta"``) or K (``name="num_clients"``) varies, one federation per value × data seed.

    A setting the partitioner rejects (e.g. Dirichlet β = 0.05 with K = 20 on Cora cannot give every
    client ≥ 5 nodes) gives one row with acc NaN and the reason in ``note`` (``skip_infeasible``), else raises.
    """
    grids = {"beta": BETA_GRID, "num_clients": K_GRID}
    if name not in grids:
        raise unknown("federation sweep parameter", name, grids)
    builder = builder or (lambda **kw: federation(data_root=data_root, **kw))
    config = config or sp.SpearConfig()
    rows = []
    for v in (grids[name] if values is None else values):
        for s in seeds:
            kw = {"dataset": dataset, "beta": beta, "num_clients": num_clients, "seed": int(s), name: v}
            try:
                df = ablation(builder(**kw), config, variants)
                df["note"] = ""
            except ConfigError as exc:
                if not skip_infeasible:
                    raise
                df = pd.DataFrame([{**make_row(dataset=dataset, partition="dirichlet", num_clients=kw["num_clients"],
                                               seed=int(s), data_seed=int(s), run_seed=-1, study="spear",
                                               evaluation="complete_graph", beta=float(kw["beta"]), method="spear",
                                               variant=v_, rank=0, receiver=-1),
                                    "gamma": config.gamma, "T": config.T, "a": config.a,
                                    "note": str(exc)} for v_ in variants])
            df["swept"] = name
            rows.append(df)
    return pd.concat(rows, ignore_index=True)


# ----------------------------------------------------------------------------- communication / time (Tab. 3)
def communication(fg, config: sp.SpearConfig | None = None, multi_round: Callable | None = None,
                  rounds: int = 100) -> pd.DataFrame:
    """SPEAR's real upload bytes (NPZ-serialized prototypes + counts) and wall time, beside multi-round FedAvg.

    ``multi_round(fg, rounds) -> Params or list of per-client Params`` trains the comparison (default:
    :func:`federated_models` of FedAvg, 3 local epochs per round); its accuracy is the first
    client's deployed model on the complete graph (FedAvg: the global model); its bytes are
    2 × R × K × model bytes (download + upload of every client each round), its time is measured;
    its ``run_seed`` is the default run's (the first paper seed), -1 for a given ``multi_round``.
    """
    config = config or sp.SpearConfig()
    t0 = time.perf_counter()
    P, N = sp.client_prototypes(fg, config.T, config.a)
    per_client = sp.upload_bytes(P, N)
    res = sp.run_spear(fg, config, uploads=(P, N))
    secs = time.perf_counter() - t0
    rows = [spear_row(fg, "full", res.acc, config, bytes_up=float(sum(per_client)), bytes_down=0.0, seconds=secs,
                      bytes_per_client=float(np.mean(per_client)), rounds=1)]
    run_seed = -1
    if multi_round is None:
        from pace_nb.core.config import PAPER_SEEDS

        multi_round, run_seed = _default_multi_round(), PAPER_SEEDS[0]
    if multi_round is not None:
        from pace_nb.nn.gcn import num_params_bytes

        t0 = time.perf_counter()
        params = multi_round(fg, rounds)
        secs = time.perf_counter() - t0
        one = params[0] if isinstance(params, (list, tuple)) else params
        mb = num_params_bytes(one)
        total = 2.0 * rounds * fg.num_clients * mb
        row = spear_row(fg, "native", global_model_accuracy(fg, one), config, bytes_up=total / 2,
                        bytes_down=total / 2, seconds=secs, bytes_per_client=total / fg.num_clients,
                        rounds=int(rounds), model_bytes=mb, run_seed=run_seed)
        row["method"] = "fedavg"
        rows.append(row)
    df = _frame(rows)
    df["bytes_total"] = df["bytes_up"] + df["bytes_down"]
    df["speedup_vs_spear"] = df["seconds"] / df.loc[0, "seconds"]
    return df


@torch.no_grad()
def global_model_accuracy(fg, params) -> float:
    """Accuracy (fraction) of one GCN on the complete graph over the global test nodes."""
    from pace_nb.nn.gcn import gcn_forward, propagation_matrix

    d = fg.data
    logits = gcn_forward(params, d.x.float(), propagation_matrix(d.edge_index, int(d.num_nodes)))
    return sp.masked_accuracy(logits.argmax(1), d.y.view(-1), fg.global_mask("test"))


def federated_models(fg, method: str, rounds: int, seed: int | None = None, stage: str = "deployed", **kw) -> list:
    """Per-client Params of ``method`` after ``rounds`` rounds (``baselines.train_federated``, one run seed:
    the first paper seed unless given). ``stage="deployed"``: what each receiver deploys (FedAvg: the
    global model); ``"trained"``: each client's model after its last local update (before aggregation)."""
    from pace_nb.methods.baselines import train_federated
    from pace_nb.core.config import PAPER_SEEDS

    if stage not in ("deployed", "trained"):
        raise unknown("model stage", stage, ("deployed", "trained"))
    run = train_federated(fg, method, rounds=rounds, seeds=(PAPER_SEEDS[0] if seed is None else int(seed),),
                          progress=False, **kw)
    if stage == "deployed":
        return run.models()[0]
    return [{n: v[k] for n, v in run.trained.items()} for k in range(fg.num_clients)]


def _default_multi_round() -> Callable | None:
    try:
        from pace_nb.methods.baselines import train_federated  # noqa: F401
    except ImportError:
        return None
    return lambda fg, rounds: federated_models(fg, "fedavg", rounds)


# ----------------------------------------------------------------------------- representations (Fig. 2, 5)
def client_stack(fg, per_client: Callable[[int, Any], Tensor]) -> Tensor:
    """Stack a per-client representation [n_k, d] into global node order [N, d] (nodes of no client: NaN)."""
    parts = [(c.global_ids.long(), per_client(k, c)) for k, c in enumerate(fg.clients) if c.num_nodes]
    d = parts[0][1].shape[1]
    out = torch.full((int(fg.data.num_nodes), d), float("nan"))
    for ids, h in parts:
        out[ids] = h.float().cpu()
    return out


def client_of_nodes(fg) -> np.ndarray:
    """Owning client of every global node (−1 when none)."""
    owner = np.full(int(fg.data.num_nodes), -1)
    for k, c in enumerate(fg.clients):
        owner[c.global_ids.numpy()] = k
    return owner


def spear_representation(fg, config: sp.SpearConfig | None = None) -> Tensor:
    """SPEAR's client-side Z (each client's PPR on its own subgraph), in global node order."""
    cfg = config or sp.SpearConfig()
    return client_stack(fg, lambda k, c: sp.ppr_propagate(c.x, c.edge_index, cfg.T, cfg.a))


def hidden_representation(fg, params) -> Tensor:
    """Hidden layer (post-ReLU GCN layer 1) of client k's model on client k's subgraph, global order.
    ``params``: one Params shared by all clients or a list with one per client."""
    from pace_nb.nn.training import client_hidden

    pick = (lambda k: params[k]) if isinstance(params, (list, tuple)) else (lambda k: params)
    return client_stack(fg, lambda k, c: client_hidden(pick(k), c))


def silhouette(h, labels, sample_size: int | None = 4000, seed: int = 0) -> float:
    """Cosine silhouette score w.r.t. ``labels`` (scikit-learn; seeded subsample above ``sample_size``)."""
    from sklearn.metrics import silhouette_score

    h, labels = np.asarray(h, dtype=np.float64), np.asarray(labels)
    keep = np.isfinite(h).all(1) & (np.abs(h).sum(1) > 0)  # cosine undefined for zero rows
    h, labels = h[keep], labels[keep]
    n = len(labels)
    return float(silhouette_score(h, labels, metric="cosine",
                                  sample_size=sample_size if sample_size and n > sample_size else None,
                                  random_state=seed))


def umap_embedding(h, seed: int = 0, n_neighbors: int = 15, min_dist: float = 0.1, cache: bool = True) -> np.ndarray:
    """2-D UMAP (cosine) from an exact kNN graph (sklearn NearestNeighbors → ``precomputed_knn``), seeded;
    cached as NPZ in ``cache_dir()/umap`` keyed by a hash of the data and the settings."""
    from pace_nb.core.config import cache_dir
    from pace_nb.core.io import atomic_write_npz

    h = np.ascontiguousarray(np.asarray(h, dtype=np.float32))
    key = hashlib.sha256(h.tobytes() + json.dumps([h.shape, seed, n_neighbors, min_dist]).encode()).hexdigest()[:24]
    path = cache_dir() / "umap" / f"{key}.npz"
    if cache and path.exists():
        with np.load(path, allow_pickle=False) as f:
            return f["embedding"]
    from sklearn.neighbors import NearestNeighbors

    from pace_nb.core.extras import require

    umap = require("umap", "notebooks", "UMAP coordinates (SPEAR Fig. 2)")

    k = min(n_neighbors, len(h) - 1)
    dist, idx = NearestNeighbors(n_neighbors=k, metric="cosine", algorithm="brute").fit(h).kneighbors(h)
    with warnings.catch_warnings():  # "no NNDescent index: transform unavailable" — we never transform
        warnings.simplefilter("ignore", UserWarning)
        emb = umap.UMAP(n_neighbors=k, min_dist=min_dist, metric="cosine", random_state=seed, n_jobs=1,
                        precomputed_knn=(idx, dist)).fit_transform(h)
    if cache:
        atomic_write_npz(path, embedding=emb)
    return emb


def _cos_dist(a: Tensor, b: Tensor) -> Tensor:
    """1 − cos along the last axis."""
    return 1.0 - torch.nn.functional.cosine_similarity(a, b, dim=-1, eps=1e-12)


def prototype_alignment(fg, config: sp.SpearConfig | None = None) -> tuple[pd.DataFrame, dict]:
    """Mean cosine distance of local prototypes p_{k,c} (every held pair) and of global g_c to the true
    class centroids (Fig. 5). Centroid of c = mean over **all** nodes of class c (every split) of the
    representation: ``centroids="client"`` SPEAR's client-side Z (the space the prototypes live in),
    ``"global"`` the complete-graph Z used at inference. Returns (rows, arrays for plotting)."""
    config = config or sp.SpearConfig()
    res = sp.run_spear(fg, config)
    spaces = {"client": spear_representation(fg, config), "global": sp.global_representation(fg, config.T, config.a)}
    y = fg.data.y.view(-1).long()
    rows, arrays = [], {"P": res.P, "N": res.N, "g": res.g, "present": res.present}
    for space, z in spaces.items():
        ok = torch.isfinite(z).all(1)
        cent = torch.stack([z[ok & (y == c)].mean(0) if bool((ok & (y == c)).any()) else torch.zeros(z.shape[1])
                            for c in range(fg.num_classes)])
        held = res.N > 0
        local = _cos_dist(res.P, cent.expand_as(res.P))[held]
        glob = _cos_dist(res.g, cent)[res.present]
        rows.append(spear_row(fg, "full", res.acc, config, centroids=space, local_dist=float(local.mean()),
                              global_dist=float(glob.mean()), n_local=int(held.sum()), n_global=int(res.present.sum())))
        arrays[f"centroids_{space}"] = cent
    return _frame(rows), arrays


def representation_study(fg, config: sp.SpearConfig | None = None, hidden: dict[str, Callable] | None = None,
                         methods: Sequence[str] = ("fedavg", "fedproto", "fedgta"), rounds: int = 100,
                         sample_size: int | None = 4000, seed: int = 0, umap: bool = False,
                         stage: str = "deployed") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fig. 2: node representations (raw X, SPEAR Z, hidden layers of federated-trained GCNs) → cosine
    silhouette w.r.t. the true labels; optional UMAP coordinates coloured by class and client.

    ``hidden`` maps a representation name to ``f(fg) -> Tensor [N, d]`` (global node order); by default
    raw / spear plus ``methods`` trained by :func:`federated_models` (``rounds`` rounds, first paper seed,
    ``stage`` deployed or trained); each node's hidden vector comes from its own client's model on its own
    subgraph.
    Returns (one row per representation with ``representation``, ``silhouette``; UMAP coordinates
    with columns representation, node, x, y, label, client — empty unless ``umap``).
    """
    config = config or sp.SpearConfig()
    reps: dict[str, Callable] = {"raw": lambda g: g.data.x.float(), "spear": lambda g: spear_representation(g, config)}
    if hidden is None:
        hidden = {m: (lambda g, m=m: hidden_representation(g, federated_models(g, m, rounds, stage=stage)))
                  for m in methods}
    reps.update(hidden)
    y, owner = fg.data.y.view(-1).numpy(), client_of_nodes(fg)
    rows, coords = [], []
    for name, fn in reps.items():
        h = fn(fg).detach().cpu()
        keep = torch.isfinite(h).all(1).numpy() & (owner >= 0)
        rows.append(spear_row(fg, "full", NAN, config, representation=name,
                              silhouette=silhouette(h[keep], y[keep], sample_size, seed)))
        if umap:
            e = umap_embedding(h[keep].numpy(), seed=seed)
            coords.append(pd.DataFrame({"representation": name, "node": np.flatnonzero(keep), "x": e[:, 0],
                                        "y": e[:, 1], "label": y[keep], "client": owner[keep]}))
    return _frame(rows), (pd.concat(coords, ignore_index=True) if coords else pd.DataFrame())


def prototype_umap(fg, config: sp.SpearConfig | None = None, seed: int = 0) -> pd.DataFrame:
    """Fig. 5: one UMAP of SPEAR's client-side Z of every node together with the local prototypes
    (kind "local", one per held (k, c)) and the global prototypes (kind "global")."""
    config = config or sp.SpearConfig()
    _, arr = prototype_alignment(fg, config)
    z = spear_representation(fg, config)
    y, owner = fg.data.y.view(-1).numpy(), client_of_nodes(fg)
    keep = torch.isfinite(z).all(1).numpy() & (owner >= 0)
    kk, cc = torch.nonzero(arr["N"] > 0, as_tuple=True)
    gc = torch.nonzero(arr["present"]).flatten()
    pts = torch.cat([z[keep], arr["P"][kk, cc], arr["g"][gc]]).numpy()
    e = umap_embedding(pts, seed=seed)
    kind = ["node"] * int(keep.sum()) + ["local"] * len(kk) + ["global"] * len(gc)
    return pd.DataFrame({"kind": kind, "x": e[:, 0], "y": e[:, 1],
                         "label": np.concatenate([y[keep], cc.numpy(), gc.numpy()]),
                         "client": np.concatenate([owner[keep], kk.numpy(), np.full(len(gc), -1)])})
