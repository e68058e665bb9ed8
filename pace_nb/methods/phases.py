"""What a method's server phase may read, the same in process and on Flower (issue 40).

A method's phases run in the style of Flower strategies: client message → server → receiver /
evaluation. The server holds no data: it sees the federation's :class:`PublicView` (feature,
class and client counts, each client's node and test-node counts — what ``federation.json`` publishes, never
the :class:`~pace_nb.data.federation.FederatedGraph`), the ``(client, message)`` pairs it
received, and the :class:`Failure` of every client that sent nothing usable (an empty upload,
a drop-out, an excluded upload), as Flower's ``aggregate_fit`` gets ``results`` and ``failures``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Sequence


@dataclass(frozen=True)
class PublicView:
    """The federation as a party without its data sees it."""

    num_features: int
    num_classes: int
    num_clients: int
    #: Each client's node count, in client order (empty when the server was not told them).
    num_nodes: tuple[int, ...] = ()
    #: Each client's test-node count, in client order (empty when the server was not told them).
    num_test: tuple[int, ...] = ()

    @classmethod
    def of(cls, fg: Any) -> PublicView:
        """The public view of a federation (a ``FederatedGraph``; a view is returned as it is)."""
        if isinstance(fg, PublicView):
            return fg
        return cls(int(fg.num_features), int(fg.num_classes), int(fg.num_clients),
                   tuple(int(c.num_nodes) for c in fg.clients), tuple(int(c.test_mask.sum()) for c in fg.clients))


@dataclass(frozen=True)
class Failure:
    """Client ``client`` contributed nothing to the server phase, and why."""

    client: int
    reason: str


#: What a client sent with no payload (a client without training nodes builds no message).
EMPTY = "sent an empty upload (no training nodes)"


def split_uploads(uploads: Sequence[tuple[int, bytes]], failures: Sequence[Failure] = ()
                  ) -> tuple[list[tuple[int, bytes]], tuple[Failure, ...]]:
    """``(client, bytes)`` pairs → the non-empty pairs (in client order) and every failure, an empty
    upload being one (:data:`EMPTY`): the server can tell who sent what, and who did not."""
    pairs = sorted(((int(k), b) for k, b in uploads), key=lambda kb: kb[0])
    empty = [Failure(k, EMPTY) for k, b in pairs if not b]
    return [(k, b) for k, b in pairs if b], tuple(sorted((*failures, *empty), key=lambda f: f.client))
