"""Faust's optional web endpoints, served when the app's settings ask for them:
``/performance/`` (``web_metrics_enabled=True``: the worker's metrics as Faust's JSON, from
``app.monitor``) and ``/graph/`` (``web_graph_enabled=True``, or ``debug=True`` when it is not
given, as Faust: the app's topology as a Graphviz graph; Faust renders its service tree as a PNG).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiohttp import web

from .responses import json_response

__all__ = ["metrics_enabled", "graph_enabled", "performance_metrics", "topology_dot", "FaustPages"]


def metrics_enabled(settings: Any) -> bool:
    return bool(settings.web_metrics_enabled)


def graph_enabled(settings: Any) -> bool:
    """Faust's ``web_graph_enabled``: when not given, it follows ``debug``."""
    given = settings.web_graph_enabled
    return bool(settings.debug if given is None else given)


def _tp_dict(offsets: Mapping[Any, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for tp, offset in offsets.items():
        out.setdefault(str(tp.topic), {})[str(tp.partition)] = int(offset)
    return out


def _summary(samples: Iterable[float]) -> dict[str, Any]:
    """Faust's latency summary: count, nearest-rank p50 and p95, max (None without samples)."""
    values = sorted(samples)

    def pct(q: float) -> float | None:
        return values[int(round(q * (len(values) - 1)))] if values else None

    return {"count": len(values), "p50": pct(0.50), "p95": pct(0.95), "max": values[-1] if values else None}


def performance_metrics(app: Any) -> dict[str, Any]:
    """Faust's ``/performance/`` payload, from the app's monitor (``app.monitor``)."""
    m = app.monitor
    read, committed, end = m.tp_read_offsets, m.tp_committed_offsets, m.tp_end_offsets
    lag = {tp: max(0, end[tp] - read[tp]) for tp in end if tp in read}  # Faust's: partitions read from
    return {
        "app": {"id": app.conf.id, "web_port": app.settings.web_port},
        "throughput": {
            "messages_active": m.messages_active,
            "messages_received_total": m.messages_received_total,
            "messages_s": m.messages_s,
            "messages_sent": m.messages_sent,
            "events_active": m.events_active,
            "events_total": m.events_total,
            "events_s": m.events_s,
        },
        "latency": {
            "events_runtime_avg": m.events_runtime_avg,
            "commit_latency": _summary(m.commit_latency),
            "send_latency": _summary(m.send_latency),
            "assignment_latency": _summary(m.assignment_latency),
            "rebalance_return_avg": m.rebalance_return_avg,
            "rebalance_end_avg": m.rebalance_end_avg,
            "http_response_latency_avg": m.http_response_latency_avg,
        },
        "consumer": {
            "lag_total": sum(lag.values()),
            "lag_by_partition": _tp_dict(lag),
            "read_offsets": _tp_dict(read),
            "committed_offsets": _tp_dict(committed),
            "end_offsets": _tp_dict(end),
            "rebalances": m.rebalances,
        },
        "tables": {name: state.asdict() for name, state in m.tables.items()},
        "errors": {
            "send_errors": m.send_errors,
            "assignments_completed": m.assignments_completed,
            "assignments_failed": m.assignments_failed,
        },
        "topic_buffer_full": {str(tp): n for tp, n in m.topic_buffer_full.items()},
    }


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def topology_dot(topology: Any, app_id: str) -> str:
    """The topology as a Graphviz digraph: topics (boxes) into agents' stages (ellipses) into the
    topics they write."""
    lines = [f"digraph {_quoted(app_id)} {{", "  rankdir=LR;"]
    topics: set[str] = set()
    for st in topology.subtopologies:
        node = f"{st.agent.name} (stage {st.stage})"
        lines.append(f"  {_quoted(node)} [shape=ellipse];")
        for topic in st.source_topics:
            topics.add(topic)
            lines.append(f"  {_quoted(topic)} -> {_quoted(node)};")
        for topic in st.sink_topics:
            topics.add(topic)
            lines.append(f"  {_quoted(node)} -> {_quoted(topic)};")
    lines += [f"  {_quoted(t)} [shape=box];" for t in sorted(topics)]
    lines.append("}")
    return "\n".join(lines) + "\n"


class FaustPages:
    """The handlers, for one app and its worker's topology (None until the worker built it)."""

    def __init__(self, app: Any, topology: Callable[[], Any]) -> None:
        self.app = app
        self.topology = topology

    async def performance(self, request: web.Request) -> web.Response:
        return json_response(performance_metrics(self.app))

    async def graph(self, request: web.Request) -> web.Response:
        topology = self.topology()
        if topology is None:
            return web.Response(status=503, text="the topology is not built yet (the worker is starting)\n")
        return web.Response(text=topology_dot(topology, self.app.conf.id), content_type="text/vnd.graphviz")
