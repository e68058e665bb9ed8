"""The same ServerApp and ClientApp in one process, without Ray (debugging, fast tests).

:class:`InProcessGrid` is a Flower ``Grid`` whose K nodes are ClientApp calls: every message
is shipped as the object contents Flower's runtime sends (``deflate`` of the message and its
records) and rebuilt (``inflate``) on the other side, so the two sides share no Python object.
A node listed in ``silent`` never answers (a disconnected client); a ClientApp exception
becomes an error reply, as on a SuperNode.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from pace_nb.flower.server import FlowerOutcome, make_server_app
from pace_nb.flower.settings import FlowerSettings

RUN_ID, SERVER_NODE, TASK_ID = 1, 0, 1


def ship(message):
    """A copy of ``message`` rebuilt from its serialized object contents (what crosses the wire)."""
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects
    from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents

    contents = {oid: obj.deflate() for oid, obj in get_all_nested_objects(message).items()}
    return inflate_object_from_contents(message.object_id, contents)


class InProcessGrid:
    """A Flower ``Grid`` delivering to K in-process ClientApp nodes (node id = partition id + 1)."""

    def __init__(self, client_app, num_nodes: int, node_config: dict | None = None, silent: Iterable[int] = (),
                 tap: Callable[[str, object], None] | None = None):
        from flwr.app import Context, RecordDict

        self.client_app, self.silent, self.tap = client_app, {int(k) for k in silent}, tap
        self.contexts = {k + 1: Context(run_id=RUN_ID, node_id=k + 1, state=RecordDict(), run_config={},
                                        node_config={**(node_config or {}), "partition-id": k,
                                                     "num-partitions": num_nodes})
                         for k in range(num_nodes)}

    # -- Grid API
    def get_node_ids(self):
        return list(self.contexts)

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None):
        from flwr.app import Message

        return Message(content, dst_node_id=dst_node_id, message_type=message_type, group_id=group_id, ttl=ttl)

    def _deliver(self, message):
        from flwr.app import Error, Message
        from flwr.supercore.task_identity import TaskIdentity

        node = int(message.metadata.dst_node_id)
        if node not in self.contexts:
            raise KeyError(f"no node {node}")
        message.metadata.__dict__["_message_id"] = message.object_id  # as the SuperLink assigns it
        arrived = ship(message)
        if self.tap:
            self.tap("down", arrived)
        if node - 1 in self.silent:
            return None
        TaskIdentity.node_id = node
        try:
            reply = self.client_app(arrived, self.contexts[node])
        except Exception as exc:  # a failing client is an error reply, as on a SuperNode
            reply = Message(Error(code=1, reason=f"{type(exc).__name__}: {exc}"), reply_to=arrived)
        finally:
            TaskIdentity.node_id = SERVER_NODE
        reply = ship(reply)
        if self.tap:
            self.tap("up", reply)
        return reply

    def push_messages(self, messages):
        self._pending = [self._deliver(m) for m in messages]
        return [str(i) for i in range(len(self._pending))]

    def pull_messages(self, message_ids):
        return [self._pending[int(i)] for i in message_ids if self._pending[int(i)] is not None]

    def send_and_receive(self, messages, *, timeout=None):
        return self.pull_messages(self.push_messages(list(messages)))


def run_inprocess(client_app, settings: FlowerSettings, *, node_config: dict | None = None, silent=(),
                  tap=None, run_config: dict | None = None, evaluation=None, federation=None) -> FlowerOutcome | None:
    """Run the ServerApp against :class:`InProcessGrid` → its outcome (None when it stored none).
    ``evaluation``: the evaluator's file or :class:`~pace_nb.flower.partitions.EvaluationGraph`
    (complete-graph methods); ``federation``: the exported partitions' folder (the server's public view)."""
    from flwr.app import Context, RecordDict
    from flwr.supercore.task_identity import TaskIdentity

    holder: list[FlowerOutcome] = []
    grid = InProcessGrid(client_app, settings.num_clients, node_config, silent, tap)
    app = make_server_app(None if run_config is not None else settings, sink=holder.append, evaluation=evaluation,
                          federation=federation)
    ctx = Context(run_id=RUN_ID, node_id=SERVER_NODE, state=RecordDict(), node_config={},
                  run_config=dict(run_config or {}))
    saved = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = RUN_ID, SERVER_NODE, TASK_ID
    t0 = time.perf_counter()
    try:
        app(grid, ctx)
    finally:
        TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved
    if not holder:
        return None
    return holder[0].finish(time.perf_counter() - t0, "inprocess")
