"""Sizes a run may ask for, judged before any work: fixed ceilings and this machine's memory.

Every entry point (CLI, grid configs, the Python API) checks its sizes here before it trains, so
a run that cannot finish fails at once with the number at fault, never after minutes of work.
The ceilings are far above the papers' settings (5 seeds, K <= 20, 100 rounds, rank <= 64).
"""
from __future__ import annotations

import numbers
import os
from typing import Any

from pace_nb.core.errors import ConfigError

#: Largest carrier rank (a rank above a layer's attainable rank is sent dense anyway).
MAX_RANK = 2**31 - 1
#: Most run seeds (or data seeds) of one run or grid cell: all are trained as one batch.
MAX_SEEDS = 256
#: Most clients K of one federation.
MAX_CLIENTS = 10_000_000
#: Most federated rounds (and local epochs) of a multi-round baseline.
MAX_ROUNDS = 100_000
#: Most cells one grid config may expand to (the dry run lists each one).
MAX_CELLS = 100_000
#: Share of the available memory one training may plan to use.
MEMORY_SHARE = 0.8


def check_count(value: Any, what: str, maximum: int, minimum: int = 1) -> int:
    """An integer in ``[minimum, maximum]``, else a :class:`ConfigError` naming the range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not minimum <= int(value) <= maximum:
        raise ConfigError(f"{what} must be an integer in [{minimum}, {maximum}], got {value!r}")
    return int(value)


def available_memory(device: Any = "cpu") -> int:
    """Bytes free for a new allocation: the CUDA device's free memory, else the host's available
    memory (``psutil``, else ``os.sysconf``)."""
    import torch

    dev = torch.device(device) if not isinstance(device, torch.device) else device
    if dev.type == "cuda" and torch.cuda.is_available():
        return int(torch.cuda.mem_get_info(dev)[0])
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:  # pragma: no cover - psutil is a dependency of ray/jupyter, not ours
        import os

        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def gcn_params(features: int, hidden: int, classes: int) -> int:
    """Parameters of the two-layer GCN: ``conv1`` [H, F] + [H], ``conv2`` [C, H] + [C]."""
    return hidden * features + hidden + classes * hidden + classes


def training_bytes(models: int, features: int, hidden: int, classes: int) -> int:
    """Bytes a batched training of ``models`` GCNs holds at least: each model's parameters in three
    float32 copies (the initial batch, the trained batch, their concatenation), plus one model's
    parameters, gradient and two Adam moments while it trains."""
    p = gcn_params(features, hidden, classes)
    return 4 * p * (3 * models + 4)


def check_memory(need: int, what: str, hint: str, device: Any = "cpu") -> None:
    """:class:`ConfigError` when ``need`` bytes exceed :data:`MEMORY_SHARE` of the available memory."""
    free = available_memory(device)
    if need > MEMORY_SHARE * free:
        raise ConfigError(f"{what} needs an estimated {need / 2**30:.1f} GiB, more than the "
                          f"{MEMORY_SHARE * free / 2**30:.1f} GiB this machine can give it "
                          f"({MEMORY_SHARE:.0%} of {free / 2**30:.1f} GiB available); {hint}")


def check_training_memory(models: int, features: int, hidden: int, classes: int, device: Any = "cpu") -> None:
    """Refuse a training whose :func:`training_bytes` would not fit, before anything is allocated."""
    check_memory(training_bytes(models, features, hidden, classes),
                 f"training {models} GCN models (hidden {hidden}, {features} features, {classes} classes)",
                 "use fewer seeds or clients, or a smaller train.hidden", device)


def load_note() -> str:
    """``"load average 5.2 on 2 CPUs: ..."``: how busy this machine is (what a runtime that failed
    to start names, so that an overloaded machine does not read as a code failure)."""
    try:
        return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs: is the machine overloaded?"
    except (AttributeError, OSError):
        return "is the machine overloaded?"
