"""One run at a time per output: a lease object with owner, heartbeat and expiry.

Two runs on one output would each take the other's uncommitted files for a killed run's
orphans and delete them, and reuse the same shard numbers. So a run first takes
``_lease.json`` with a conditional create (S3 ``If-None-Match: *``, a hard link locally) and
keeps it alive from a heartbeat thread with conditional replaces (``If-Match`` the version it
last wrote). A second run refuses with the holder's name; a lease whose heartbeat stopped
(its run died without releasing it) may be taken over once it has expired, or at once when the
holder ran on this host and its process is gone. A run that finds its
lease gone or taken over stops before its next commit (:meth:`OutputLease.check`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ray_jobs.storage.store import Storage

log = logging.getLogger(__name__)

LEASE_KEY = "_lease.json"


class LeaseHeld(RuntimeError):
    """Another live run holds the output."""


class LeaseLost(RuntimeError):
    """This run's lease expired and was taken over, or was removed: it must not commit."""


@dataclass(frozen=True)
class LeaseRecord:
    run_id: str
    host: str
    pid: int
    acquired: float  # unix seconds
    heartbeat: float
    expires: float

    def describe(self) -> str:
        def iso(t: float) -> str:
            return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="seconds")

        return (
            f"run {self.run_id} on {self.host} (pid {self.pid}), last heartbeat "
            f"{iso(self.heartbeat)}, expires {iso(self.expires)}"
        )

    def holder_died(self) -> bool:
        """The holder ran on this host and its process is gone (a killed driver resubmitted on
        the same head node need not wait out the expiry). Elsewhere only expiry tells."""
        if self.host != socket.gethostname() or self.pid == os.getpid():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # alive, someone else's
            return False
        return False

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> LeaseRecord:
        fields: dict[str, Any] = json.loads(data)
        return cls(**{k: fields[k] for k in cls.__dataclass_fields__})


class OutputLease:
    """``with OutputLease(storage, run_id):`` holds the output for the block, or raises
    :class:`LeaseHeld` naming the run that holds it.

    ``ttl_s`` is how long a lease outlives its last heartbeat; the heartbeat renews it every
    ``ttl_s / 3``. ``clock`` is injectable so tests can expire a lease without waiting.
    """

    def __init__(
        self,
        storage: Storage,
        run_id: str,
        ttl_s: float = 300.0,
        *,
        clock: Callable[[], float] = time.time,
        heartbeat: bool = True,
    ):
        self.storage = storage
        self.run_id = run_id
        self.ttl_s = ttl_s
        self._clock = clock
        self._heartbeat = heartbeat
        self._version: str | None = None
        self._acquired = 0.0
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _record(self) -> LeaseRecord:
        now = self._clock()
        return LeaseRecord(
            self.run_id, socket.gethostname(), os.getpid(), self._acquired, now, now + self.ttl_s
        )

    def holder(self) -> LeaseRecord | None:
        try:
            return LeaseRecord.from_bytes(self.storage.read_versioned(LEASE_KEY)[0])
        except FileNotFoundError:
            return None

    def acquire(self) -> OutputLease:
        self._acquired = self._clock()
        record = self._record()
        self._version = self.storage.create(LEASE_KEY, record.to_bytes())
        if self._version is not None:
            log.info("took the lease on %s", self.storage.uri)
        else:
            try:
                data, version = self.storage.read_versioned(LEASE_KEY)
            except FileNotFoundError:  # released between our create and read: try once more
                return self.acquire()
            current = LeaseRecord.from_bytes(data)
            if current.expires > self._clock() and not current.holder_died():
                raise LeaseHeld(
                    f"{self.storage.uri} is being written by {current.describe()}; one run at "
                    f"a time per output. If that run is gone, its lease expires by itself; to "
                    f"take over at once, delete {self.storage.uri}/{LEASE_KEY}."
                )
            self._version = self.storage.replace(LEASE_KEY, record.to_bytes(), version)
            if self._version is None:
                raise LeaseHeld(f"{self.storage.uri}: another run took over the expired lease")
            log.warning("took over the lease of %s: it expired or its run died", current.describe())
        if self._heartbeat:
            self._thread = threading.Thread(target=self._beat, name="lease-heartbeat", daemon=True)
            self._thread.start()
        return self

    def renew(self) -> None:
        """Push the expiry out; marks the lease lost if someone else holds it now."""
        with self._lock:
            if self._lost or self._version is None:
                return
            record = self._record()
            version = self.storage.replace(LEASE_KEY, record.to_bytes(), self._version)
            if version is not None:
                self._version = version
                return
            holder = self.holder()
            self._lost = (
                f"the lease on {self.storage.uri} is now held by {holder.describe()}"
                if holder
                else f"the lease on {self.storage.uri} was removed"
            )
            log.error("%s; this run will not commit again", self._lost)

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            try:
                self.renew()
            except Exception:  # a storage hiccup: the next beat tries again before expiry
                log.exception("lease heartbeat failed")

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless this run still holds the output: before a commit."""
        if self._lost:
            raise LeaseLost(self._lost)
        holder = self.holder()
        if holder is None or holder.run_id != self.run_id:
            self._lost = (
                f"the lease on {self.storage.uri} is now held by {holder.describe()}"
                if holder
                else f"the lease on {self.storage.uri} was removed"
            )
            raise LeaseLost(self._lost)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            holder = self.holder()
            if not self._lost and holder is not None and holder.run_id == self.run_id:
                self.storage.delete(LEASE_KEY)
            self._version = None

    def __enter__(self) -> OutputLease:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
