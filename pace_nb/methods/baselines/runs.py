"""Evaluating a federated run (native and +CNLL rows per seed × receiver) and the train-then-evaluate
entry point of one collaborative baseline."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor

from pace_nb.core.config import PAPER_SEEDS
from pace_nb.data.federation import FederatedGraph
from pace_nb.core.errors import ConfigError
from pace_nb.methods.baselines.base import FederatedMethod, FederatedRun, train_federated
from pace_nb.nn.gcn import WEIGHT_KEYS
from pace_nb.nn.training import LocalModels, TrainConfig


def evaluate_run(fg: FederatedGraph, run: FederatedRun, local: LocalModels, *, variants=("native", "cnll"),
                 device="cpu", local_logits: dict[int, list[Tensor]] | None = None) -> list[dict[str, Any]]:
    """Result rows of a run: ``"native"`` (the returned model) and ``"cnll"`` (receiver-local
    CNLL between the receiver's Local logits and the returned model's logits, on its
    validation nodes). Uses :func:`pace_nb.methods.evaluation.evaluate_method`; ``local_logits[s]``
    (eval-mode Local logits of seed position ``s``) is used when given."""
    from pace_nb.methods.evaluation import evaluate_method
    from pace_nb.nn.gcn import num_params_bytes
    from pace_nb.nn.training import batched_logits

    if tuple(local.seeds) != tuple(run.seeds) or local.num_clients != run.num_clients:
        raise ConfigError("Local models and the federated run must share seeds and clients")
    bad = sorted(set(variants) - {"native", "cnll"})
    if bad:
        raise ConfigError(f"unknown variant(s) {bad}; valid: native, cnll")
    k_n = run.num_clients
    dense = num_params_bytes({k: v[0] for k, v in local.params.items() if k in WEIGHT_KEYS})
    rows = []
    for s, seed in enumerate(run.seeds):
        idx = list(range(s * k_n, (s + 1) * k_n))
        lp = {k: v[idx] for k, v in local.params.items()}
        rp = {k: v[idx] for k, v in run.returned.items()}
        z_local = (local_logits[s] if local_logits is not None and s in local_logits
                   else batched_logits(lp, fg.clients, list(range(k_n)), device=device))
        z_ext = (batched_logits(rp, fg.clients, list(range(k_n)), device=device) if run.forward is None else
                 [run.forward({n: v[k] for n, v in rp.items()}, fg.clients[k]) for k in range(k_n)])
        for variant in variants:
            rows += evaluate_method(
                fg, z_local, z_ext, alpha=None if variant == "native" else "cnll", seed=seed,
                method=run.method, variant=variant, bytes_up=run.bytes_up, bytes_down=run.bytes_down,
                dense_bytes=dense, seconds=run.seconds / len(run.seeds), params=run.params)
    return rows


def run_federated(fg: FederatedGraph, method: FederatedMethod | str, seeds: Sequence[int] = PAPER_SEEDS,
                  rounds: int = 1, local_epochs: int | None = None, *, config: TrainConfig = TrainConfig(),
                  local: LocalModels | None = None, device="auto", progress: bool = True,
                  method_params: dict | None = None, variants=("native", "cnll")) -> list[dict[str, Any]]:
    """Train (:func:`train_federated`) and evaluate (:func:`evaluate_run`) one method: native
    and +CNLL rows for every seed × receiver plus pooled rows. Local models (for CNLL) are
    trained with :func:`pace_nb.nn.training.train_local` unless given."""
    from pace_nb.nn.training import train_local

    seeds = tuple(int(s) for s in seeds)
    if local is None:
        local = train_local(fg, seeds, config, device=device, progress=progress)
    run = train_federated(fg, method, rounds, local_epochs, seeds, config=config, local=local, device=device,
                          progress=progress, method_params=method_params)
    return evaluate_run(fg, run, local, variants=variants)
