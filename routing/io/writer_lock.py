"""One writer per lake: the lock a job takes before it writes anything to a lake.

Two jobs writing one lake would run the same batches side by side; Delta refuses the
second commit of a batch to each table (:mod:`routing.io.storage`), but the loser has
then written some tables and not others, and a batch of its own may differ from the
winner's. So every job that writes a lake (``jobs.route``, ``jobs.replay``,
``jobs.demo``) holds :data:`WRITER_LOCK` while it runs, and a second one is refused
before it starts Spark, with who holds the lake.

The lock is the operating system's (``flock``) on a file in the lake: the kernel drops
it when its holder ends, however it ends, so a crashed job never blocks its restart,
and there is no lease to wait out. It holds on local and NFSv4 folders; a lake at another
file system's URI (``s3a://``) is refused (:class:`LakeNotLocal`): the job reads its
tables' logs and its checkpoints as files too.

Example::

    with WriterLock.take(Lake.at("lake"), "jobs.route"):
        ...  # write the lake
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from routing.broker.layout import WRITER_LOCK
from routing.io.lake import Lake

__all__ = ["Holder", "LakeBusy", "LakeNotLocal", "WriterLock"]


_HELD: set[str] = set()
"""Lock files this process holds: a job that runs another inside it (``jobs.replay`` runs
``jobs.route``) takes the lake once; the inner take is a no-op."""


@dataclass(frozen=True)
class Holder:
    """Who holds a lake: written into the lock file by its holder, read by who is refused."""

    job: str
    pid: int
    host: str
    since: str

    @classmethod
    def this_process(cls, job: str) -> Holder:
        now = datetime.now(UTC).replace(microsecond=0)
        return cls(job, os.getpid(), socket.gethostname(), now.isoformat().replace("+00:00", "Z"))

    @classmethod
    def from_text(cls, text: str) -> Holder | None:
        """The holder a lock file names (None: empty or not one of ours, e.g. mid-write)."""
        try:
            fields = json.loads(text)
            return cls(
                str(fields["job"]), int(fields["pid"]), str(fields["host"]), str(fields["since"])
            )
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        return f"{self.job} (pid {self.pid} on {self.host}, since {self.since})"


class LakeBusy(RuntimeError):
    """Another job holds the lake: the message says which, and how to take over."""

    def __init__(self, lake: Lake, holder: Holder | None) -> None:
        who = holder.describe() if holder is not None else "another job"
        stop = f"stop it (kill {holder.pid} on {holder.host})" if holder is not None else "stop it"
        super().__init__(
            f"{lake.root} is being written by {who}; one job writes a lake at a time: "
            f"{stop} to take over (a job that crashed holds nothing)"
        )
        self.holder = holder


class LakeNotLocal(ValueError):
    """The lake is not a folder of this machine's file system (:attr:`Lake.is_local`): the
    job cannot lock it, nor read its tables' logs and its checkpoints."""

    def __init__(self, lake: Lake) -> None:
        super().__init__(
            f"{lake.root} is not a folder of this machine's file system; the job reads the "
            "tables' Delta logs and its checkpoints as files: route a local or mounted folder"
        )


class WriterLock:
    """The lake's writer lock, held from :meth:`take` until :meth:`release` (or the end of
    the process). A context manager."""

    def __init__(self, lake: Lake, fd: int | None) -> None:
        self.lake = lake
        self._fd = fd

    @classmethod
    def take(cls, lake: Lake, job: str) -> WriterLock:
        """Hold ``lake`` for ``job``, or raise :class:`LakeBusy` naming who holds it, or
        :class:`LakeNotLocal` for a lake at another file system's URI."""
        if not lake.is_local:
            raise LakeNotLocal(lake)
        path = Path(lake.table(WRITER_LOCK))
        if str(path) in _HELD:
            return cls(lake, None)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = Holder.from_text(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
            os.close(fd)
            raise LakeBusy(lake, holder) from None
        except BaseException:
            os.close(fd)
            raise
        text = json.dumps(asdict(Holder.this_process(job))).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, text, 0)
        os.fsync(fd)
        _HELD.add(str(path))
        return cls(lake, fd)

    def release(self) -> None:
        """Let the lake go (the holder's name is cleared first: nobody holds it now)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        _HELD.discard(self.lake.table(WRITER_LOCK))
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing the last descriptor drops the flock

    def __enter__(self) -> WriterLock:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
