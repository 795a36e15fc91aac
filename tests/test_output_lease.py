"""One run at a time per output: the lease and the conditional writes under it, on a local
folder and on S3 (a moto server), and the build refusing an output another run holds."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from ray_jobs.config import load_settings
from ray_jobs.jobs.build_dataset import run_build
from ray_jobs.jobs.ingest import run_ingest
from ray_jobs.storage.lease import LEASE_KEY, LeaseHeld, LeaseLost, OutputLease
from ray_jobs.storage.store import S3Storage, Storage, open_storage


class Clock:
    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["local", "s3"])
def storage(request, tmp_path: Path) -> Storage:
    if request.param == "local":
        return open_storage(str(tmp_path / "out"))
    s3 = request.getfixturevalue("s3_admin")
    endpoint = request.getfixturevalue("moto_endpoint")
    bucket = f"lease-{abs(hash(str(tmp_path))) % 10**8}"
    s3.create_bucket(Bucket=bucket)
    from ray_jobs.config import S3Settings

    return S3Storage(bucket, "dataset", S3Settings(endpoint_url=endpoint, anonymous=False))


def test_conditional_writes(storage: Storage) -> None:
    first = storage.create("x.json", b"one")
    assert first is not None and storage.read_bytes("x.json") == b"one"
    assert storage.create("x.json", b"two") is None  # taken: nothing written
    assert storage.read_bytes("x.json") == b"one"
    data, version = storage.read_versioned("x.json")
    assert (data, version) == (b"one", first)
    second = storage.replace("x.json", b"two", version)
    assert second is not None and second != version
    assert storage.replace("x.json", b"three", version) is None  # a stale version loses
    assert storage.read_bytes("x.json") == b"two"
    storage.delete("x.json")
    assert storage.replace("x.json", b"four", second) is None  # gone: nothing to replace


def test_concurrent_creates_have_one_winner(storage: Storage) -> None:
    wins: list[bool] = []
    barrier = threading.Barrier(8)

    def race(i: int) -> None:
        barrier.wait()
        wins.append(storage.create("race.json", str(i).encode()) is not None)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 7 + [True]


def test_a_second_run_is_refused_naming_the_holder(storage: Storage) -> None:
    clock = Clock()
    with OutputLease(storage, "run-a", ttl_s=60, clock=clock, heartbeat=False):
        with pytest.raises(LeaseHeld, match=r"run run-a on .* \(pid \d+\)") as held:
            OutputLease(storage, "run-b", ttl_s=60, clock=clock, heartbeat=False).acquire()
        assert LEASE_KEY in str(held.value)  # says how to take over by hand
        clock.now += 59  # still alive
        with pytest.raises(LeaseHeld):
            OutputLease(storage, "run-b", ttl_s=60, clock=clock, heartbeat=False).acquire()
    assert not storage.exists(LEASE_KEY)  # released
    with OutputLease(storage, "run-b", ttl_s=60, clock=clock, heartbeat=False) as lease:
        assert lease.holder().run_id == "run-b"


def test_an_expired_lease_is_taken_over_and_its_run_stops_committing(storage: Storage) -> None:
    clock = Clock()
    stale = OutputLease(storage, "run-a", ttl_s=60, clock=clock, heartbeat=False).acquire()
    stale.check()  # holds it
    clock.now += 61  # run-a stopped beating
    fresh = OutputLease(storage, "run-b", ttl_s=60, clock=clock, heartbeat=False).acquire()
    assert fresh.holder().run_id == "run-b"
    with pytest.raises(LeaseLost, match="run-b"):
        stale.check()  # before its next commit, run-a learns it lost the output
    stale.renew()  # a late heartbeat does not take it back
    assert fresh.holder().run_id == "run-b"
    stale.release()  # nor does releasing delete the new holder's lease
    assert storage.exists(LEASE_KEY)
    fresh.release()
    assert not storage.exists(LEASE_KEY)


def test_the_heartbeat_keeps_a_lease_alive(storage: Storage) -> None:
    clock = Clock()
    lease = OutputLease(storage, "run-a", ttl_s=60, clock=clock, heartbeat=False).acquire()
    for _ in range(5):
        clock.now += 40  # each step alone would not expire it, together they would
        lease.renew()
    assert lease.holder().expires == clock.now + 60
    with pytest.raises(LeaseHeld):
        OutputLease(storage, "run-b", ttl_s=60, clock=clock, heartbeat=False).acquire()
    lease.release()


def test_a_lease_whose_process_died_on_this_host_is_taken_over_at_once(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = tmp_path / "out"
    script = (
        "import os, sys; from ray_jobs.storage.lease import OutputLease;"
        "from ray_jobs.storage.store import open_storage;"
        "OutputLease(open_storage(sys.argv[1]), 'killed-run', ttl_s=3600).acquire(); os._exit(9)"
    )
    assert subprocess.run([sys.executable, "-c", script, str(out)], timeout=60).returncode == 9
    storage = open_storage(str(out))
    assert json.loads(storage.read_bytes(LEASE_KEY))["run_id"] == "killed-run"  # not released
    with OutputLease(storage, "next-run", ttl_s=3600, heartbeat=False) as lease:
        assert lease.holder().run_id == "next-run"


def _held_by_another_run(out: Path) -> None:
    OutputLease(open_storage(str(out)), "other-run", ttl_s=3600, heartbeat=False).acquire()


def test_the_build_refuses_a_held_output_and_touches_nothing(tmp_path: Path) -> None:
    """The other run's uncommitted files look like a killed run's orphans: a build that ignored
    the lease would delete them. It must refuse before it looks."""
    out = tmp_path / "dataset"
    _held_by_another_run(out)
    inflight = out / "shards" / "train-000000.tar"
    inflight.parent.mkdir(parents=True)
    inflight.write_bytes(b"the other run is still writing this")
    settings = load_settings(
        environ={},
        source={"kind": "local", "path": str(tmp_path / "corpus")},
        output={"uri": str(out)},
    )
    with pytest.raises(LeaseHeld, match="other-run"):
        run_build(settings)
    assert inflight.read_bytes() == b"the other run is still writing this"
    assert json.loads((out / LEASE_KEY).read_text())["run_id"] == "other-run"


def test_the_ingest_refuses_a_held_output(tmp_path: Path) -> None:
    out = tmp_path / "articles"
    _held_by_another_run(out)
    settings = load_settings(
        environ={},
        source={"kind": "local", "path": str(tmp_path / "corpus")},
        output={"uri": str(out)},
    )
    with pytest.raises(LeaseHeld, match="other-run"):
        run_ingest(settings, progress=False)
    assert not (out / "_ledger").exists()
