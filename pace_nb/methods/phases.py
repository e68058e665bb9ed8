"""What a one-round method's phases exchange and read, the same in process and on Flower (issue 40).

A method's phases run in the style of Flower strategies: client message → server → receiver /
evaluation (the hooks of :class:`~pace_nb.methods.contract.OneRoundMethod`). The server holds no
data: it sees the federation's :class:`PublicView` (feature, class and client counts, each client's
node and test-node counts — what ``federation.json`` publishes, never the
:class:`~pace_nb.data.federation.FederatedGraph`), the ``(client, message)`` pairs it received, and
the :class:`Failure` of every client that sent nothing usable (an empty upload, a drop-out, an
excluded upload), as Flower's ``aggregate_fit`` gets ``results`` and ``failures``. Every phase gets
the :class:`Round` (view, run seed, training config, device); a client's phase gives an
:class:`Upload`, the server screens it as its :class:`UploadSpec` says, the server phase gives a
:class:`ServerResult`, and a receiver of a ``"receivers"`` method builds a :class:`Receipt`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal
from collections.abc import Mapping, Sequence

from torch import Tensor

from pace_nb.nn.gcn import Params, init_params
from pace_nb.nn.training import TrainConfig


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


@dataclass
class Round:
    """One round as every phase sees it: the federation's :class:`PublicView` (a ``FederatedGraph``
    given here is reduced to it), the run seed, the Local / server training config, the device and
    ``w0``, the run seed's shared initialization (built from the view when not given)."""

    view: PublicView
    seed: int
    config: TrainConfig
    device: Any = "cpu"
    w0: Params | None = None

    def __post_init__(self) -> None:
        self.view = PublicView.of(self.view)

    def initial(self) -> Params:
        """W0 of the run seed (``init_params(F, C, hidden, seed)``), built once."""
        if self.w0 is None:
            v = self.view
            self.w0 = init_params(v.num_features, v.num_classes, self.config.hidden, self.seed)
        return self.w0


@dataclass(frozen=True)
class Upload:
    """A client phase's outcome: the bytes it uploads (empty: nothing to send) and, for a method
    evaluated at the receivers, the bytes the client keeps for its receive phase."""

    data: bytes
    kept: bytes | None = None


@dataclass(frozen=True)
class UploadSpec:
    """What a real client's upload is, for a server to screen it before its server phase
    (:mod:`pace_nb.flower.screening` parses it as ``wire`` says):

    * ``wire = "carriers"``: PACE's wire format (:func:`~pace_nb.methods.pace.lowrank.serialize`):
      ``header`` the exact header entries, or ``shapes`` the dense tensors' shapes (name → shape, a
      dimension ``None`` any size, a string a size shared by the tensors naming it; or several such
      layouts); ``bounds`` per carrier a (low, high) per wire tensor, or one magnitude for every value;
    * ``wire = "prototypes"``: SPEAR's NPZ of classes, counts and prototypes (``num_features`` wide,
      counts summing to at most ``max_count``).

    ``empty_ok``: an empty upload is a client with nothing to send; ``fixed``: every real client's
    upload has the same header, sizes included, of carriers of any kind (``header`` when declared, else
    the majority's; without it only dense tensors, and without ``shapes`` their names and dimensions
    are compared with the majority's); ``compared``: what the majority comparison names."""

    wire: Literal["carriers", "prototypes"] = "carriers"
    header: list | None = None
    shapes: Any = None
    bounds: Mapping[str, list[tuple[float, float]]] | float = math.inf
    empty_ok: bool = False
    fixed: bool = False
    num_features: int | None = None
    max_count: int | None = None
    compared: str = "uploaded tensors"


@dataclass(frozen=True)
class ServerResult:
    """A server phase's outcome: ``returns`` (client → bytes sent back) for a method evaluated at
    the receivers, else ``state``, what its complete-graph evaluation reads."""

    returns: dict[int, bytes] | None = None
    state: Any = None


@dataclass(frozen=True)
class Receipt:
    """A receiver's logits on its own subgraph: its Local model's, the External model's it built
    from the returned bytes, and how they are blended (``"cnll"``: α by CNLL, Eq. 10; else α)."""

    local: Tensor
    external: Tensor
    alpha: str | float = "cnll"
