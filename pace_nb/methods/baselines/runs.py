"""A federated run's result (:class:`FederatedRun`) and its evaluation: native and +CNLL rows per seed ×
receiver (:func:`evaluate_run`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from pace_nb.core.errors import ConfigError
from pace_nb.data.federation import FederatedGraph
from pace_nb.nn.gcn import WEIGHT_KEYS, Params
from pace_nb.nn.training import LocalModels


@dataclass
class FederatedRun:
    """Result of :func:`train_federated` (batched Params, seed-major ``b = s*K + k``, CPU)."""

    method: str
    seeds: tuple[int, ...]
    num_clients: int
    rounds: int
    local_epochs: int
    returned: Params  # what each receiver deploys after the last round
    trained: Params  # the client models of the last local phase (uploads)
    bytes_up: list[int]
    bytes_down: list[int]
    seconds: float
    params: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)
    forward: Any = None  # the method's eval_forward, when its deployed model is not the plain GCN

    def model(self, s: int, k: int) -> Params:
        """Deployed Params of client ``k`` under the ``s``-th seed."""
        if not (0 <= s < len(self.seeds) and 0 <= k < self.num_clients):
            raise ConfigError(f"no model (seed #{s}, client {k}); {len(self.seeds)} seeds × {self.num_clients} clients")
        return {n: v[s * self.num_clients + k] for n, v in self.returned.items()}

    def models(self) -> list[list[Params]]:
        """``[seed][client]`` deployed Params."""
        return [[self.model(s, k) for k in range(self.num_clients)] for s in range(len(self.seeds))]


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
