"""SPEAR's main comparison (its Tables 1 and 3) on one Dirichlet federation.

Every method is evaluated as SPEAR's paper says ("after training or aggregation, the
server-side global model is evaluated centrally on the complete test graph"): accuracy of the
global model on the complete graph over the union of the clients' test masks.

* ``spear`` — :func:`pace_nb.methods.spear.core.run_spear` (real NPZ upload bytes);
* one-shot baselines (every :class:`~.base.OneShotMethod`; SPEAR's five are tagged ``oneshot``
  in the registry) — :func:`.base.run_oneshot`;
* multi-round baselines (every :class:`~pace_nb.methods.baselines.base.FederatedMethod`;
  SPEAR's eight, tagged ``multiround``: FedAvg, FedProx, FedOPT, MOON, FedProto, FedPub, FedGTA, FedTAD) —
  :func:`~pace_nb.methods.baselines.base.train_federated` for ``rounds`` rounds of
  ``local_epochs`` epochs; a method whose receivers all deploy the same model is scored by that
  global model; a personalized method (FedPub, FedGTA …) has no single server model, so its
  score is the mean over the receivers' deployed models, each on the complete graph
  (``params.evaluation`` says which). Bytes: R rounds × (upload + return) of the dense model.
  A run at another hidden width than the default 64 is stored as variant ``hidden<H>`` (SPEAR's
  Tab. 3 FedAvg figure is a width-256 GCN, docs/DESIGN.md §12).

One pooled row (``receiver = -1``) per method, study "comparison", evaluation "complete_graph";
``seed`` is the DATA seed of the federation (``data_seed``), the run seed (initialization,
dropout, sampling) is ``run_seed`` (-1 for SPEAR). Rows carry ``client_seconds`` /
``server_seconds`` where the phases are separable and ``bytes_per_client`` (mean upload).
"""
from __future__ import annotations

import time
from collections.abc import Sequence

import pandas as pd
import torch

from pace_nb.core.config import PAPER_SEEDS
from pace_nb.core.errors import ConfigError
from pace_nb.core.validation import check_names
from pace_nb.methods.evaluation import check_method_rows, federation_fields, make_row
from pace_nb.methods.oneshot import make_oneshot
from pace_nb.methods.oneshot.base import OneShotMethod, complete_graph_scores, run_oneshot
from pace_nb.methods.registry import METHODS, plugin_errors, spear_comparison
from pace_nb.methods.spear.method import Spear
from pace_nb.nn.training import TrainConfig


def _data_seed(fg) -> int:
    return int((getattr(fg, "config", {}) or {}).get("seed", -1))


def _row(fg, method: str, scores: dict, *, bytes_up: int, bytes_down: int, seconds: float, params: dict,
         variant: str = "native") -> dict:
    beta = (getattr(fg, "config", {}) or {}).get("beta")
    row = make_row(**federation_fields(fg), seed=_data_seed(fg), run_seed=int(params.get("run_seed", -1)),
                   study="comparison", evaluation="complete_graph", method=method, variant=variant, rank=0, receiver=-1,
                   acc=100 * scores["acc"], f1_weighted=100 * scores["f1_weighted"], f1_macro=100 * scores["f1_macro"],
                   bytes_up=int(bytes_up), bytes_down=int(bytes_down), seconds=float(seconds),
                   n_test=int(scores["n_test"]), params={"beta": beta, **params})
    return row


def spear_row(fg, config=None, method: str = Spear.name) -> dict:
    """SPEAR (full) scored like every other method, with its real upload bytes and wall time."""
    from pace_nb.methods.spear import core as sp

    cfg = config or sp.SpearConfig()
    t0 = time.perf_counter()
    P, N = sp.client_prototypes(fg, cfg.T, cfg.a)
    t1 = time.perf_counter()
    res = sp.run_spear(fg, cfg, uploads=(P, N))
    t2 = time.perf_counter()
    up = sp.upload_bytes(P, N)
    y, mask = fg.data.y.view(-1), fg.global_mask("test")
    from pace_nb.methods import metrics

    scores = {**metrics.scores(y[mask], res.pred[mask], fg.num_classes), "n_test": int(mask.sum())}
    return _row(fg, method, scores, bytes_up=sum(up), bytes_down=0, seconds=t2 - t0, variant="full",
                params={"T": cfg.T, "a": cfg.a, "gamma": cfg.gamma, "rounds": 1, "evaluation": "complete_graph",
                        "client_seconds": t1 - t0, "server_seconds": t2 - t1, "bytes_per_client": up})


def multiround_row(fg, method: str, *, rounds: int = 100, local_epochs: int | None = None, run_seed: int = PAPER_SEEDS[0],
                   config: TrainConfig = TrainConfig(), device="auto", progress: bool = False,
                   method_params: dict | None = None) -> dict:
    """A multi-round federated baseline trained R rounds, scored on the complete graph."""
    from pace_nb.methods.baselines import train_federated

    run = train_federated(fg, method, rounds, local_epochs, (int(run_seed),), config=config, device=device,
                          progress=progress, method_params=method_params)
    models = run.models()[0]
    same = all(all(torch.equal(models[0][k], m[k]) for k in models[0]) for m in models[1:])
    per = [complete_graph_scores(fg, m) for m in (models[:1] if same else models)]
    scores = {k: sum(s[k] for s in per) / len(per) for k in ("acc", "f1_weighted", "f1_macro")}
    scores["n_test"] = per[0]["n_test"]
    variant = "native" if config.hidden == TrainConfig().hidden else f"hidden{config.hidden}"
    return _row(fg, run.method, scores, bytes_up=sum(run.bytes_up), bytes_down=sum(run.bytes_down),
                seconds=run.seconds, variant=variant, params={**run.params, "run_seed": int(run_seed), "hidden": config.hidden,
                                             "evaluation": "complete_graph" if same else "complete_graph_mean_over_receivers",
                                             "bytes_per_client": list(run.bytes_up)})


def run_comparison(fg, methods: Sequence[str] | None = None, *, rounds: int = 100, local_epochs: int | None = None,
                   run_seed: int = PAPER_SEEDS[0], config: TrainConfig = TrainConfig(), spear_config=None,
                   method_params: dict | None = None, device="auto", progress: bool = False) -> pd.DataFrame:
    """SPEAR's comparison rows on ``fg`` (one row per method, default :func:`spear_comparison`;
    see the module docstring)."""
    from pace_nb.methods.baselines import FederatedMethod

    methods = spear_comparison() if methods is None else methods
    names = [METHODS.key(m) for m in check_names(methods, "methods")]
    params = {METHODS.key(k): dict(v) for k, v in (method_params or {}).items()}
    local, rows = None, []
    for name in names:
        obj = METHODS[name]
        got: list[dict] = []
        if isinstance(obj, type) and issubclass(obj, Spear):
            got.append(spear_row(fg, spear_config, name))
        elif isinstance(obj, type) and issubclass(obj, OneShotMethod):
            with plugin_errors(name):  # a plugin's exception: one line naming it and its module
                method = make_oneshot(name, **params.get(name, {}))
                if method.uses_local and local is None:
                    from pace_nb.nn.training import train_local

                    local = train_local(fg, (int(run_seed),), config, device=device, progress=progress)
                got += run_oneshot(fg, method, (int(run_seed),), config=config, local=local, device=device,
                                   progress=progress, row_seed=_data_seed(fg))
        elif isinstance(obj, type) and issubclass(obj, FederatedMethod):
            with plugin_errors(name):
                got.append(multiround_row(fg, name, rounds=rounds, local_epochs=local_epochs, run_seed=run_seed,
                                          config=config, device=device, progress=progress,
                                          method_params=params.get(name)))
        else:
            raise ConfigError(f"{name!r} is not part of SPEAR's comparison; valid: spear, a one-shot or a "
                              f"federated baseline ({', '.join(spear_comparison()[1:])}, …)")
        rows += check_method_rows(got, name, fg).to_dict("records")
    return pd.DataFrame(rows)
