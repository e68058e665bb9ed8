"""retained_heap: scoped glibc settings that leave every number unchanged."""
from __future__ import annotations

import resource

import torch

from pace_nb.core import memory


def _churn() -> tuple[torch.Tensor, int]:
    """Allocate and free a 64 MiB buffer 20 times; the sum of the last one and the minor page faults taken."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for i in range(20):
        t = torch.full((16 << 20,), float(i))
        s = t.sum()
        del t
    return s, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_retained_heap_reuses_freed_memory_and_restores_the_defaults(monkeypatch):
    monkeypatch.delenv("PACE_NB_MALLOC", raising=False)
    s0, faults_default = _churn()
    with memory.retained_heap() as on:
        with memory.retained_heap():  # nesting keeps the setting until the outermost block ends
            pass
        assert memory._depth == 1
        s1, faults_kept = _churn()
    assert memory._depth == 0
    assert torch.equal(s0, s1)
    if on:  # glibc: the buffer is page-faulted in once, not 20 times
        assert faults_kept < faults_default / 4


def test_retained_heap_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("PACE_NB_MALLOC", "default")
    with memory.retained_heap() as on:
        assert on is False
    assert memory._depth == 0
