"""The build on clusters of other shapes: several one-CPU nodes (Ray's own
``ray.cluster_utils.Cluster``) give the same bytes as one node, and a pipeline the cluster
cannot place is refused at once, saying what it asked and what the cluster has."""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import build_job

from ray_jobs.config import load_settings
from ray_jobs.jobs.build_dataset import run_build
from ray_jobs.pipeline.preflight import (
    ClusterTooSmall,
    NodeCapacity,
    StageAsk,
    check_cluster,
    problems,
)
from ray_jobs.pmc.sample_corpus import write_corpus

N_ARTICLES = 6


def test_problems_on_constructed_clusters() -> None:
    cpu_only = [NodeCapacity("a", 2, 0), NodeCapacity("b", 2, 0)]
    small = [StageAsk("fetch", 1, 0, 1), StageAsk("panels", 1, 0, 2)]
    assert problems(small, cpu_only) == []  # 3 CPUs asked of 4, each actor fits a node
    too_many = [StageAsk("fetch", 1, 0, 3), StageAsk("panels", 1, 0, 2)]
    (total,) = problems(too_many, cpu_only)
    assert "need 5 CPU and 0 GPU in all" in total and "has 4 CPU and 0 GPU on 2 node" in total
    gpu = [StageAsk("panels", 1, 1, 1)]
    found = problems(gpu, cpu_only)
    assert len(found) == 2 and "stage panels asks 1 CPU and 1 GPU per actor" in found[0]
    wide = [StageAsk("relevance", 3, 0, 1)]  # 4 CPUs in all, but no node has 3
    (per_actor,) = problems(wide, cpu_only)
    assert "no node has that much (the largest have 2 CPU, 0 GPU)" in per_actor
    assert problems(small, []) == ["the cluster has no alive nodes"]
    with pytest.raises(ClusterTooSmall, match=r"pipeline\.autoscaling"):
        check_cluster(gpu, cpu_only, autoscaling=False)
    check_cluster(gpu, cpu_only, autoscaling=True)  # nodes may come: a warning only


def _config(corpus: Path, out: Path, **pipeline) -> dict:
    return {
        "source": {"kind": "local", "path": str(corpus)},
        "output": {"uri": str(out), "articles_per_part": 2},
        "pipeline": {"samples_per_shard": 4, **pipeline},
    }


def test_a_pipeline_the_cluster_cannot_place_is_refused_before_any_work(
    ray_address, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    write_corpus(corpus, 2, "folders", seed=11)
    out = tmp_path / "dataset"
    settings = load_settings(
        environ={}, **_config(corpus, out, panels={"num_cpus": 0.25, "num_gpus": 1})
    )
    with pytest.raises(ClusterTooSmall, match=r"stage panels asks 0.25 CPU and 1 GPU"):
        run_build(settings)
    assert not (out / "_ledger").exists() and not (out / "shards").exists()


def _published(out: Path) -> dict[str, object]:
    """Shards, index and stats by name and content hash; rejects and failures (files named
    after the run) by their rows, less the time a failure was seen."""
    got: dict[str, object] = {
        p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for folder in ("shards", "index", "stats")
        for p in sorted((out / folder).glob("*"))
    }
    for folder in ("rejects", "failures"):
        rows = [
            {k: v for k, v in row.items() if k != "time"}
            for p in sorted((out / folder).glob("*.parquet"))
            for row in pq.read_table(p).to_pylist()
        ]
        got[folder] = sorted(rows, key=repr)
    return got


@contextlib.contextmanager
def _own_address():
    """Without the session's RAY_ADDRESS: Ray's node start-up and its state API both prefer
    that variable to the address they are given."""
    saved = os.environ.pop("RAY_ADDRESS", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["RAY_ADDRESS"] = saved


@pytest.fixture(scope="module")
def three_nodes(ray_address):
    """Three Ray nodes of one CPU each on this machine: the shape that once hung the build at
    its first step. Yields the GCS address and the dashboard (for the state API)."""
    from conftest import _free_port
    from ray.cluster_utils import Cluster

    port = _free_port()
    dashboard = f"http://127.0.0.1:{port}"
    with _own_address():
        cluster = Cluster(
            initialize_head=True,
            connect=False,
            head_node_args={
                "num_cpus": 1,
                "include_dashboard": True,
                "dashboard_host": "127.0.0.1",
                "dashboard_port": port,
            },
        )
        for _ in range(2):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        assert len(_alive_nodes(dashboard)) == 3  # the dashboard asked is this cluster's
    yield cluster.address, dashboard
    cluster.shutdown()


def _alive_nodes(dashboard: str) -> list[str]:
    from ray.util.state import list_nodes

    return [n.node_id for n in list_nodes(address=dashboard) if n.state == "ALIVE"]


def _nodes_by_task(dashboard: str) -> tuple[dict[str, set[str]], dict[str, int]]:
    """Which nodes ran each kind of task, and how many tasks of it ran, from Ray's state API."""
    from ray.util.state import list_tasks

    with _own_address():
        tasks = list_tasks(address=dashboard, limit=10_000, raise_on_missing_output=False)
    nodes: dict[str, set[str]] = {}
    count: dict[str, int] = {}
    for task in tasks:
        if task.node_id:
            nodes.setdefault(task.name, set()).add(task.node_id)
            count[task.name] = count.get(task.name, 0) + 1
    return nodes, count


def _reprint(corpus: Path, source: str, copy: str) -> None:
    """Article ``source`` again under the new PMC id ``copy``: the same figure files and
    captions in a second article, as a figure reused across articles reaches PMC. Every panel
    the source keeps is kept in the copy too (same image, same text) and is an exact duplicate
    of it whatever panels the detector finds, so dedup always has work to do."""
    old, new = source.removeprefix("PMC").encode(), copy.removeprefix("PMC").encode()
    version = next(corpus.glob(f"{source}.*")).name.removeprefix(f"{source}.")
    folder = corpus / f"{copy}.{version}"
    folder.mkdir()
    for path in (corpus / f"{source}.{version}").iterdir():
        data = path.read_bytes()
        if path.suffix in (".xml", ".nxml", ".json"):
            data = data.replace(old, new)
        (folder / path.name.replace(source, copy)).write_bytes(data)


def test_several_one_cpu_nodes_give_the_bytes_of_one_node(
    three_nodes, ray_address, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    write_corpus(corpus, N_ARTICLES, "folders", seed=12)
    _reprint(corpus, "PMC9000000", "PMC9000100")
    one, many = tmp_path / "one", tmp_path / "many"
    gcs, dashboard = three_nodes
    # one article per batch, many small buckets and write batches on the cluster: the bytes must
    # not depend on them, and there are enough tasks of each kind for SPREAD to place them apart
    one_by_one = {"num_cpus": 0.25, "batch_size": 1}
    small = {
        "dedup_rows_per_bucket": 3,
        "write": {"num_cpus": 0.1, "batch_size": 2},
        **{stage: one_by_one for stage in ("fetch", "panels", "relevance")},
    }
    for out, address, pipeline in ((one, ray_address, {}), (many, gcs, small)):
        config = _config(corpus, out, **pipeline)
        proc = build_job(config, tmp_path / f"{out.name}.yaml", address)
        assert proc.returncode == 0, proc.stderr[-4000:]
    got, want = _published(many), _published(one)
    assert any(k.startswith("shards/") for k in want) and want["rejects"]
    # dedup had work to do: the reprint's kept panels are dropped for the source's same panels
    copies = {
        r["key"]: r["duplicate_of"] for r in want["rejects"] if r["reason"] == "duplicate_exact"
    }
    reprinted = {k: v for k, v in copies.items() if k.startswith("PMC9000100")}
    assert reprinted and all(
        v == k.replace("PMC9000100", "PMC9000000") for k, v in reprinted.items()
    )
    assert got == want
    nodes, count = _nodes_by_task(dashboard)
    for kind in ("write_fragments", "assemble_part", "judge"):
        names = [name for name in nodes if kind in name]
        ran = set().union(*(nodes[name] for name in names))
        tasks = sum(count[name] for name in names)
        assert len(ran) > 1, f"{kind}: {tasks} task(s) ran on {len(ran)} node(s)"


def test_a_dead_cluster_address_fails_at_once_naming_it() -> None:
    """A head that died without cleaning up leaves an address nothing answers on: the run says
    so within the timeout instead of waiting on it."""
    import socket

    from ray_jobs.build.cluster import check_reachable

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        with pytest.raises(SystemExit, match=rf"the Ray cluster at {address} does not answer"):
            check_reachable(address, timeout_s=2)
    with pytest.raises(SystemExit, match="is not host:port"):
        check_reachable("nowhere", timeout_s=2)
    check_reachable("local", timeout_s=2)  # a local instance of the run's own: nothing to ask
