"""SPEAR: training-free one-shot FGL with PPR prototypes and shrinkage (docs/DESIGN.md §7).

Pure functions over tensors, composed as

    client k:  X̃ = L2-rows(X_k);  Â = D̃⁻¹(A_k + I);  Z⁽⁰⁾ = X̃,  Z⁽ᵗ⁺¹⁾ = (1−a)X̃ + aÂZ⁽ᵗ⁾ (T steps)
               p_{k,c} = mean of Z over the client's *training* nodes of class c,  n_{k,c} = count
    server:    p̄_{−k,c} = unweighted mean of the other holders' p_{·,c}  (sole holder → p_{k,c})
               λ_{k,c} = 1/(1 + γ n_{k,c});  p̃ = (1−λ)p + λp̄;  g_c = Norm(Σ_k n p̃ / Σ_k n)
    inference: Z by the same PPR over the complete graph;  ŷ_i = argmax_c cos(z_i, g_c).

Classes that no client holds (Σ_k n_{k,c} = 0) get no global prototype: ``present[c]`` is
False, g_c is a zero row and the class is **never predicted** (its score is −∞). A client
with no nodes or no training nodes uploads nothing (all its counts are 0) and changes no
server quantity.

Ablation variants (docs/DESIGN.md §7): ``full`` = PPR + shrinkage + count weighting; ``no_ppr`` =
T = 0, shrinkage kept; ``no_shrinkage`` = PPR, the server takes the naive unweighted mean
of the local prototypes of each class; ``no_both`` = T = 0 and count-weighted prototypes
(the pooled class means of X̃ over all clients' training nodes).
"""
from __future__ import annotations

import io
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor

from pace_nb.core.errors import ConfigError, unknown
from pace_nb.core.validation import Interval, declared, param, validate_params
from pace_nb.core.schema import SPEAR_VARIANT_LABELS

#: Server aggregation modes: calibrated (Eq. shrinkage), naive unweighted mean, pooled counts.
AGGREGATIONS = ("shrinkage", "mean", "pooled")
#: Ablation variant → (use PPR, server aggregation).
VARIANTS: dict[str, tuple[bool, str]] = {
    "full": (True, "shrinkage"),
    "no_shrinkage": (True, "mean"),
    "no_ppr": (False, "shrinkage"),
    "no_both": (False, "pooled"),
}
#: Paper labels of the variants (SPEAR Table 4).
VARIANT_LABELS = SPEAR_VARIANT_LABELS


@declared
@dataclass(frozen=True)
class SpearConfig:
    """SPEAR hyperparameters (paper defaults): T PPR steps, propagation weight a, shrinkage γ."""

    T: int = param(2, Interval(int, 0, 64), help="PPR steps")  # a0^T weights vanish long before 64 steps
    a: float = param(0.5, Interval(float, 0.0, 1.0, closed="left"), help="propagation weight")
    gamma: float = param(0.1, Interval(float, 0.0, None, closed="neither"), help="shrinkage strength")

    def __post_init__(self):
        validate_params(self)

    def for_variant(self, variant: str) -> tuple[SpearConfig, str]:
        """(config with T = 0 when the variant drops PPR, server aggregation mode)."""
        if variant not in VARIANTS:
            raise unknown("SPEAR variant", variant, VARIANTS)
        use_ppr, aggregation = VARIANTS[variant]
        return (self if use_ppr else replace(self, T=0)), aggregation


# ----------------------------------------------------------------------------- client side
def normalize_rows(x: Tensor, eps: float = 1e-12) -> Tensor:
    """X̃: every row divided by its L2 norm (all-zero rows stay zero)."""
    x = x.float()
    return x / x.norm(dim=1, keepdim=True).clamp_min(eps)


def transition_matrix(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Â = D̃⁻¹(A + I) as a sparse COO tensor: binary A (duplicates merged), self loops, rows sum to 1."""
    from torch_geometric.utils import coalesce, remove_self_loops

    ei, _ = remove_self_loops(edge_index.long())
    loops = torch.arange(num_nodes, device=ei.device).repeat(2, 1)
    ei = coalesce(torch.cat([ei, loops], dim=1), num_nodes=num_nodes)
    deg = torch.bincount(ei[0], minlength=num_nodes).float()
    vals = 1.0 / deg[ei[0]]
    return torch.sparse_coo_tensor(ei, vals, (num_nodes, num_nodes), check_invariants=False).coalesce()


def ppr_propagate(x: Tensor, edge_index: Tensor, T: int = 2, a: float = 0.5) -> Tensor:
    """Truncated PPR (APPNP): Z⁽⁰⁾ = X̃, Z⁽ᵗ⁺¹⁾ = (1−a)X̃ + aÂZ⁽ᵗ⁾, returns Z⁽ᵀ⁾ (X̃ when T = 0 or a = 0)."""
    xt = normalize_rows(x)
    n = xt.shape[0]
    if T == 0 or a == 0.0 or n == 0:
        return xt
    A = transition_matrix(edge_index.to(xt.device), n)
    z = xt
    for _ in range(int(T)):
        z = (1.0 - a) * xt + a * (A @ z)
    return z


def class_prototypes(z: Tensor, y: Tensor, mask: Tensor, num_classes: int) -> tuple[Tensor, Tensor]:
    """Per-class means of the rows of ``z`` selected by ``mask`` → (p [C, F], n [C] long); absent classes: zero rows, n = 0."""
    zs, ys = z[mask], y[mask].long()
    if ys.numel() and (ys.min() < 0 or ys.max() >= num_classes):
        raise ConfigError(f"labels must lie in [0, {num_classes}), got range [{int(ys.min())}, {int(ys.max())}]")
    counts = torch.bincount(ys, minlength=num_classes)
    sums = torch.zeros(num_classes, z.shape[1], dtype=z.dtype, device=z.device).index_add_(0, ys, zs)
    return sums / counts.clamp_min(1).unsqueeze(1).to(z.dtype), counts


def client_prototypes(fg, T: int = 2, a: float = 0.5) -> tuple[Tensor, Tensor]:
    """Every client's upload {p_{k,c}, n_{k,c}} stacked → (P [K, C, F], N [K, C]); empty clients give zeros."""
    F, C = fg.num_features, fg.num_classes
    P = torch.zeros(fg.num_clients, C, F)
    N = torch.zeros(fg.num_clients, C, dtype=torch.long)
    for k, c in enumerate(fg.clients):
        if c.num_nodes == 0 or not bool(c.train_mask.any()):
            continue  # contributes nothing
        z = ppr_propagate(c.x, c.edge_index, T, a)
        P[k], N[k] = class_prototypes(z, c.y, c.train_mask, C)
    return P, N


#: What a SPEAR upload holds (:func:`serialize_upload`): NPZ members and their dtypes.
UPLOAD_MEMBERS = {"classes": "<i4", "counts": "<i4", "prototypes": "<f4"}
#: A prototype is a mean of rows of Z = PPR(X̃) (:func:`ppr_propagate`): X̃'s rows have L2 norm at
#: most 1 and Â is row-stochastic, so every row of Z, and every prototype, has L2 norm at most 1.
MAX_PROTOTYPE_NORM = 1.0


def serialize_upload(protos: Tensor, counts: Tensor) -> bytes:
    """The bytes client k really sends: NPZ (in memory) of held class ids, int32 counts, float32 prototypes."""
    held = torch.nonzero(counts > 0).flatten()
    buf = io.BytesIO()
    np.savez(buf, classes=held.numpy().astype(np.int32), counts=counts[held].numpy().astype(np.int32),
             prototypes=protos[held].numpy().astype(np.float32))
    return buf.getvalue()


def parse_upload(data: bytes, num_classes: int) -> tuple[Tensor, Tensor]:
    """The server's view of an upload of :func:`serialize_upload`: ``(p [C, F] float32, n [C] long)``,
    absent classes zero; an empty upload (a client holding no class) is ``(p [C, 0], n = 0)``.
    Raises ``ValueError`` when the classes, counts and prototypes disagree."""
    if not data:
        return torch.zeros(num_classes, 0), torch.zeros(num_classes, dtype=torch.long)
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        classes, counts, protos = z["classes"], z["counts"], z["prototypes"]
    if ((classes.size and (classes.min() < 0 or classes.max() >= num_classes))
            or np.unique(classes).size != classes.size or (counts < 0).any()
            or protos.ndim != 2 or counts.shape != classes.shape or protos.shape[0] != classes.size):
        raise ValueError("malformed SPEAR upload: classes, counts and prototypes disagree")
    p = torch.zeros(num_classes, protos.shape[1], dtype=torch.float32)
    n = torch.zeros(num_classes, dtype=torch.long)
    idx = torch.from_numpy(classes.astype(np.int64))
    p[idx] = torch.from_numpy(protos.astype(np.float32))
    n[idx] = torch.from_numpy(counts.astype(np.int64))
    return p, n


def stack_uploads(parsed: list[tuple[Tensor, Tensor]], num_classes: int) -> tuple[Tensor, Tensor]:
    """The server's (P [K', C, F], N [K', C]) from parsed uploads (an empty one: zero prototypes)."""
    widths = {p.shape[1] for p, n in parsed if bool((n > 0).any())}
    if len(widths) != 1:
        raise ConfigError("no admitted SPEAR client uploaded a prototype (every upload was empty)" if not widths else
                          f"SPEAR uploads of several prototype widths {sorted(widths)}")
    f = widths.pop()
    P = torch.stack([p if p.shape[1] == f else torch.zeros(num_classes, f) for p, _ in parsed])
    return P, torch.stack([n for _, n in parsed])


def upload_bytes(P: Tensor, N: Tensor) -> list[int]:
    """Serialized upload size per client (bytes); a client holding no class sends nothing (0)."""
    return [len(serialize_upload(P[k], N[k])) if bool((N[k] > 0).any()) else 0 for k in range(P.shape[0])]


# ----------------------------------------------------------------------------- server side
def shrinkage_lambda(counts: Tensor, gamma: float) -> Tensor:
    """λ_{k,c} = 1 / (1 + γ n_{k,c})."""
    return 1.0 / (1.0 + float(gamma) * counts.float())


def peer_means(P: Tensor, N: Tensor) -> Tensor:
    """p̄_{−k,c}: unweighted mean of p_{k',c} over holders k' ≠ k; = p_{k,c} when no other client holds c."""
    h = (N > 0).to(P.dtype)                                # [K, C]
    total = (h.unsqueeze(-1) * P).sum(0, keepdim=True)      # [1, C, F]
    others = h.sum(0, keepdim=True) - h                     # [K, C] holders besides k (when k holds c)
    peer = (total - h.unsqueeze(-1) * P) / others.clamp_min(1).unsqueeze(-1)
    return torch.where((others > 0).unsqueeze(-1), peer, P)


def calibrate(P: Tensor, N: Tensor, gamma: float) -> Tensor:
    """Shrunk prototypes p̃_{k,c} = (1 − λ_{k,c}) p_{k,c} + λ_{k,c} p̄_{−k,c}."""
    lam = shrinkage_lambda(N, gamma).unsqueeze(-1)
    return (1.0 - lam) * P + lam * peer_means(P, N)


def global_prototypes(P: Tensor, N: Tensor, gamma: float = 0.1, aggregation: str = "shrinkage") -> tuple[Tensor, Tensor]:
    """(g [C, F] L2-normalized, present [C] bool). ``shrinkage``: Σ n p̃ / Σ n; ``pooled``: Σ n p / Σ n;
    ``mean``: unweighted mean of the holders' p (naive aggregation). Absent classes: zero row, present False."""
    if aggregation not in AGGREGATIONS:
        raise unknown("SPEAR aggregation", aggregation, AGGREGATIONS)
    w = N.to(P.dtype) if aggregation != "mean" else (N > 0).to(P.dtype)
    Q = calibrate(P, N, gamma) if aggregation == "shrinkage" else P
    present = N.sum(0) > 0
    g = (w.unsqueeze(-1) * Q).sum(0) / w.sum(0).clamp_min(1e-12).unsqueeze(-1)
    return normalize_rows(g) * present.unsqueeze(-1), present


def cosine_scores(z: Tensor, g: Tensor, present: Tensor) -> Tensor:
    """cos(z_i, g_c) [n, C]; classes without a global prototype score −∞ (never predicted)."""
    if not bool(present.any()):
        raise ConfigError("SPEAR has no global prototype: no client holds a labelled training node")
    s = normalize_rows(z) @ normalize_rows(g).T
    return s.masked_fill(~present.unsqueeze(0), float("-inf"))


def predict(z: Tensor, g: Tensor, present: Tensor) -> Tensor:
    """ŷ_i = argmax_c cos(z_i, g_c) over the present classes."""
    return cosine_scores(z, g, present).argmax(dim=1)


# ----------------------------------------------------------------------------- end to end
@dataclass
class SpearResult:
    """Outcome of one SPEAR run on a FederatedGraph (accuracies are fractions in [0, 1])."""

    variant: str
    config: SpearConfig
    P: Tensor          # [K, C, F] local prototypes
    N: Tensor          # [K, C] counts
    g: Tensor          # [C, F] global prototypes
    present: Tensor    # [C]
    pred: Tensor       # [n] predictions on the complete graph
    acc: float         # over fg.global_mask("test")
    val_acc: float     # over fg.global_mask("val")
    bytes_up: int


def global_representation(fg, T: int = 2, a: float = 0.5) -> Tensor:
    """Z over the complete graph ``fg.data`` (same PPR as the clients)."""
    return ppr_propagate(fg.data.x, fg.data.edge_index, T, a)


def masked_accuracy(pred: Tensor, y: Tensor, mask: Tensor) -> float:
    """Fraction correct over ``mask`` (NaN for an empty mask)."""
    m = mask.bool()
    return float((pred[m] == y[m].long()).float().mean()) if bool(m.any()) else float("nan")


def run_spear(fg, config: SpearConfig | None = None, variant: str = "full", *,
              z_global: Tensor | None = None, uploads: tuple[Tensor, Tensor] | None = None) -> SpearResult:
    """One SPEAR run (one variant). ``z_global`` / ``uploads`` may be passed to reuse propagations in sweeps."""
    cfg, aggregation = (config or SpearConfig()).for_variant(variant)
    P, N = uploads if uploads is not None else client_prototypes(fg, cfg.T, cfg.a)
    g, present = global_prototypes(P, N, cfg.gamma, aggregation)
    z = z_global if z_global is not None else global_representation(fg, cfg.T, cfg.a)
    pred = predict(z, g, present)
    y = fg.data.y.view(-1)
    return SpearResult(variant, cfg, P, N, g, present, pred, masked_accuracy(pred, y, fg.global_mask("test")),
                       masked_accuracy(pred, y, fg.global_mask("val")), sum(upload_bytes(P, N)))


def select_hyperparameters(fg, a_grid=(0.0, 0.25, 0.5, 0.75, 0.9), gamma_grid=(0.01, 0.1, 1.0),
                           T: int = 2) -> tuple[SpearConfig, object]:
    """Choose (a, γ) by accuracy on the global **validation** nodes only (ties → first in grid order).

    Returns (best SpearConfig, DataFrame with columns a, gamma, val_acc [percent]). Test labels are never read.
    """
    import pandas as pd

    if not len(a_grid) or not len(gamma_grid):
        raise ConfigError("select_hyperparameters needs non-empty a_grid and gamma_grid")
    val = fg.global_mask("val")
    if not bool(val.any()):
        raise ConfigError("select_hyperparameters: the federation has no validation nodes")
    y = fg.data.y.view(-1)
    rows = []
    for a in a_grid:
        P, N = client_prototypes(fg, T, SpearConfig(T=T, a=a).a)  # validates a
        z = global_representation(fg, T, a)
        for gamma in gamma_grid:
            g, present = global_prototypes(P, N, SpearConfig(T=T, a=a, gamma=gamma).gamma)  # validates γ
            rows.append({"a": float(a), "gamma": float(gamma), "val_acc": 100.0 * masked_accuracy(predict(z, g, present), y, val)})
    df = pd.DataFrame(rows)
    best = df.loc[df["val_acc"].idxmax()]
    return SpearConfig(T=T, a=float(best["a"]), gamma=float(best["gamma"])), df
