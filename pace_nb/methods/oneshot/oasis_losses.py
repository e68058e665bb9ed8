"""OASIS's losses as pure functions (:mod:`.oasis` is the method): the synthetic adjacency, the
topological codebook's VQ terms, WESAD and WDSRD.

From the paper's text (Wan et al., NeurIPS 2025, §3.2–3.3 and App. F; its equations are not in
the text this was built from, so where a term is named but not written out the form below is
the standard one and says so):

* :func:`synthetic_adjacency` — ``H = σ(X̂ X̂ᵀ)``, each row's ``k`` largest entries (§3.2; the
  node itself left out, the GCN adds self loops), symmetrised;
* :func:`quantize` — nearest token, straight-through, codebook term ``‖sg[h] − e_z‖²`` plus
  ``η ·`` commitment ``‖h − sg[e_z]‖²`` (VQ-VAE, van den Oord et al. 2017; η = 0.25);
* :func:`orthogonality` — "encouraging [code vectors] to be independent and avoiding convergence
  in the same direction": ``‖Ê Êᵀ − I‖²_F / M²`` over the l2-normalised codes ``Ê`` (form ours);
* :func:`head_cost` / :func:`wesad_loss` — WESAD: the entropic discrete Wasserstein distance
  between the teacher's and the student's temperature-τ softmax, with the cost
  ``c_ab = κ (1 − SA(C_a, C_b))`` and ``SA(C_a, C_b) = Σ ŵ_a ⊗ ŵ_b`` of the l2-normalised rows of
  the teacher head's weight matrix (κ = 1; the cost's exact form is ours: it falls as SA rises);
* :func:`soft_assignment` / :func:`assignment_w2` — WDSRD: soft assignments of node
  representations to the M codes (softmax of minus the squared Euclidean distance), each
  set summarised by its mean and covariance, and the closed-form squared 2-Wasserstein
  distance between the two Gaussians (:func:`gaussian_w2`).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor


def synthetic_adjacency(x: Tensor, k: int) -> Tensor:
    """Edges [2, e] of the synthetic graph: row i of ``σ(x xᵀ)`` keeps its ``k`` largest entries
    (i itself excluded), symmetrised and deduplicated."""
    n = x.shape[0]
    if n < 2 or k < 1:
        return torch.empty(2, 0, dtype=torch.long, device=x.device)
    h = torch.sigmoid(x.detach().float() @ x.detach().float().T)
    h.fill_diagonal_(float("-inf"))
    kk = min(int(k), n - 1)
    idx = h.topk(kk, dim=1).indices
    src = torch.arange(n, device=x.device).repeat_interleave(kk)
    ei = torch.stack([src, idx.reshape(-1)])
    flat = torch.unique(torch.cat([ei, ei.flip(0)], 1).mul(torch.tensor([[n], [1]], device=x.device)).sum(0))
    return torch.stack([flat // n, flat % n])


def quantize(h: Tensor, codebook: Tensor, eta: float = 0.25) -> tuple[Tensor, Tensor, Tensor]:
    """Nearest token (squared L2) of each row of ``h [n, D]``. Returns (straight-through
    quantized ``h + sg[e_z − h]``, token index [n], ``‖sg[h] − e_z‖² + η ‖h − sg[e_z]‖²`` averaged
    over rows)."""
    idx = torch.cdist(h.detach(), codebook.detach()).argmin(1)
    q = codebook[idx]
    loss = ((h.detach() - q) ** 2).sum(1).mean() + eta * ((h - q.detach()) ** 2).sum(1).mean()
    return h + (q - h).detach(), idx, loss


def orthogonality(codebook: Tensor) -> Tensor:
    """``‖Ê Êᵀ − I‖²_F / M²`` of the l2-normalised codes ``Ê`` [M, D]: zero when they are orthonormal."""
    e = F.normalize(codebook, dim=1)
    m = e.shape[0]
    return ((e @ e.T - torch.eye(m, dtype=e.dtype, device=e.device)) ** 2).sum() / m**2


def head_cost(weight: Tensor, kappa: float = 1.0) -> Tensor:
    """WESAD's class cost [C, C] from the teacher head's weight ``[C, H]``: ``κ (1 − ŵ_a · ŵ_b)``
    with ``ŵ`` its l2-normalised rows (clamped at 0, zero diagonal)."""
    w = F.normalize(weight.detach().float(), dim=1)
    return (kappa * (1.0 - w @ w.T)).clamp_min(0.0).fill_diagonal_(0.0)


def sinkhorn(p: Tensor, q: Tensor, cost: Tensor, eps: float = 0.1, iters: int = 50) -> Tensor:
    """Entropic optimal transport cost ``⟨T, cost⟩`` between the rows of ``p, q [n, C]``
    (histograms) with ground cost ``cost [C, C]``; log-domain Sinkhorn, differentiable."""
    log_k = -cost / eps
    log_p, log_q = p.clamp_min(1e-12).log(), q.clamp_min(1e-12).log()
    f = torch.zeros_like(p)
    g = torch.zeros_like(q)
    for _ in range(int(iters)):
        f = log_p - torch.logsumexp(log_k[None] + g[:, None, :], dim=2)
        g = log_q - torch.logsumexp(log_k[None] + f[:, :, None], dim=1)
    plan = (f[:, :, None] + log_k[None] + g[:, None, :]).exp()
    return (plan * cost[None]).sum((1, 2))


def wesad_loss(teacher_logits: Tensor, student_logits: Tensor, cost: Tensor, temperature: float,
               eps: float = 0.1, iters: int = 50) -> Tensor:
    """WESAD: mean over nodes of the entropic Wasserstein distance between ``softmax(teacher / τ)``
    and ``softmax(student / τ)`` with the class cost ``cost``."""
    p = F.softmax(teacher_logits.detach() / temperature, 1)
    return sinkhorn(p, F.softmax(student_logits / temperature, 1), cost, eps, iters).mean()


def soft_assignment(h: Tensor, codebook: Tensor) -> Tensor:
    """Soft assignment [n, M] of each row of ``h [n, D]`` to the codes: ``softmax_m(−‖h − e_m‖²)``."""
    return F.softmax(-torch.cdist(h, codebook) ** 2, dim=1)


def moments(b: Tensor) -> tuple[Tensor, Tensor]:
    """Mean [M] and (population) covariance [M, M] of the rows of ``b [n, M]``."""
    mu = b.mean(0)
    c = b - mu
    return mu, c.T @ c / b.shape[0]


def psd_sqrt(cov: Tensor) -> Tensor:
    """Symmetric square root of a PSD matrix (eigenvalues clamped at 0), computed in float64:
    float32 ``eigh`` fails to converge on the near-degenerate covariances of nearly one-hot
    assignments (Photo, data seed 2024)."""
    c = cov.double()
    w, v = torch.linalg.eigh((c + c.T) / 2)
    return ((v * w.clamp_min(0).sqrt()) @ v.T).to(cov.dtype)


def gaussian_w2(mu1: Tensor, cov1: Tensor, mu2: Tensor, cov2: Tensor) -> Tensor:
    """Squared 2-Wasserstein distance between ``N(μ₁, Σ₁)`` and ``N(μ₂, Σ₂)``:
    ``‖μ₁ − μ₂‖² + Tr(Σ₁ + Σ₂ − 2 (Σ₁^½ Σ₂ Σ₁^½)^½)``."""
    s1 = psd_sqrt(cov1)
    cross = psd_sqrt(s1 @ cov2 @ s1)
    return ((mu1 - mu2) ** 2).sum() + torch.trace(cov1) + torch.trace(cov2) - 2 * torch.trace(cross)


def assignment_w2(b_teacher: Tensor, b_student: Tensor) -> Tensor:
    """WDSRD of one proxy graph: :func:`gaussian_w2` between the Gaussians of the teacher's and the
    student's assignments [n, M], differentiable in the student's. The cross term
    ``Tr (Σ_T^½ Σ_S Σ_T^½)^½`` is the nuclear norm of ``Σ_T^½ B̄_Sᵀ / √n`` (``B̄_S`` the centred
    student assignments), whose singular values have stable gradients even where the rank-deficient
    covariances make eigen-gradients blow up."""
    mu_t, cov_t = moments(b_teacher.detach())
    mu_s = b_student.mean(0)
    c = b_student - mu_s
    n = b_student.shape[0]
    cross = torch.linalg.svdvals(psd_sqrt(cov_t) @ c.T / math.sqrt(n)).sum()
    return ((mu_t - mu_s) ** 2).sum() + torch.trace(cov_t) + (c ** 2).sum() / n - 2 * cross
