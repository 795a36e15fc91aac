"""Before a build starts: can the cluster place every stage's minimum actor pool?

Ray Data waits for actors it cannot place, silently and for ever (a 3-node cluster of one CPU
each once sat at its first step for 13 minutes). So the driver compares what the stages ask
(per actor and in all, at their minimum pool sizes) with what the cluster's alive nodes have,
and refuses at once with both sides in the message. On an autoscaling cluster the nodes that
will come are not there yet, so the check only warns, and Ray Data's own timeouts
(``pipeline.actor_start_timeout_s``, ``pipeline.no_progress_timeout_s``) bound the wait.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ray_jobs.config import PipelineSettings, StageResources

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StageAsk:
    name: str
    num_cpus: float
    num_gpus: float
    min_actors: int


@dataclass(frozen=True)
class NodeCapacity:
    node_id: str
    cpus: float
    gpus: float


class ClusterTooSmall(RuntimeError):
    """The stages' minimum pools cannot be placed on this cluster."""


def stage_asks(pipeline: PipelineSettings, enrich: bool) -> list[StageAsk]:
    from ray_jobs.pipeline.stages import ENRICH_PHASE, STAGE_PHASE

    later = [s.name for s in ENRICH_PHASE] if enrich else []
    names = [s.name for s in STAGE_PHASE] + ["write", *later]

    def ask(name: str, res: StageResources) -> StageAsk:
        low = res.concurrency if isinstance(res.concurrency, int) else res.concurrency[0]
        return StageAsk(name, res.num_cpus, res.num_gpus, low)

    return [ask(n, getattr(pipeline, n)) for n in names]


def nodes_from_ray(nodes: Sequence[Mapping]) -> list[NodeCapacity]:
    """``ray.nodes()`` → the alive nodes' totals."""
    return [
        NodeCapacity(
            str(n.get("NodeID", "?"))[:12],
            float(n.get("Resources", {}).get("CPU", 0.0)),
            float(n.get("Resources", {}).get("GPU", 0.0)),
        )
        for n in nodes
        if n.get("Alive")
    ]


def problems(asks: Sequence[StageAsk], nodes: Sequence[NodeCapacity]) -> list[str]:
    """What cannot be placed, each as one sentence; empty when everything fits."""
    out: list[str] = []
    if not nodes:
        return ["the cluster has no alive nodes"]
    most_cpus = max(n.cpus for n in nodes)
    most_gpus = max(n.gpus for n in nodes)
    for a in asks:
        fits = [n for n in nodes if n.cpus >= a.num_cpus and n.gpus >= a.num_gpus]
        if not fits:
            out.append(
                f"stage {a.name} asks {a.num_cpus:g} CPU and {a.num_gpus:g} GPU per actor, but "
                f"no node has that much (the largest have {most_cpus:g} CPU, {most_gpus:g} GPU)"
            )
    cpus = sum(a.num_cpus * a.min_actors for a in asks)
    gpus = sum(a.num_gpus * a.min_actors for a in asks)
    have_cpus = sum(n.cpus for n in nodes)
    have_gpus = sum(n.gpus for n in nodes)
    if cpus > have_cpus or gpus > have_gpus:
        detail = ", ".join(
            f"{a.name} {a.min_actors}x({a.num_cpus:g} CPU, {a.num_gpus:g} GPU)" for a in asks
        )
        out.append(
            f"the minimum pools need {cpus:g} CPU and {gpus:g} GPU in all ({detail}), but the "
            f"cluster has {have_cpus:g} CPU and {have_gpus:g} GPU on {len(nodes)} node(s)"
        )
    return out


def check_cluster(
    asks: Sequence[StageAsk], nodes: Sequence[NodeCapacity], *, autoscaling: bool
) -> None:
    found = problems(asks, nodes)
    if not found:
        return
    message = "; ".join(found)
    if autoscaling:
        log.warning(
            "the cluster cannot place the pipeline yet (waiting for it to scale): %s", message
        )
        return
    raise ClusterTooSmall(
        f"{message}. Lower the stages' num_cpus / num_gpus / concurrency in pipeline.*, or add "
        "nodes (set pipeline.autoscaling: true where an autoscaler adds them)"
    )
