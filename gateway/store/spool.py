"""A durable, size-capped, append-only disk spool of write batches.

The InfluxDB store appends every batch it cannot deliver right now and replays the
spool, oldest first, when the server returns. Layout of the spool folder::

    00000000000000000001.seg   records, appended; a new segment past ``segment_bytes``
    00000000000000000002.seg
    cursor                     "<segment id> <offset>" of the first unacknowledged record
    rejected/                  records the server refused as malformed (kept for a person)

A record is ``length (4 bytes) | crc32 (4 bytes) | payload``. Each append is
fsync'd before it returns, so an acknowledged batch survives a crash or power
loss; a torn record at the end of the last segment (a crash mid-append) fails its
length or CRC check and is cut off when the spool is opened again. Records are
acknowledged in order; after a crash the last unacknowledged record may be sent a
second time, which the store's idempotent writes make harmless.

All methods are blocking (file I/O with fsync): call them through
``asyncio.to_thread``. A lock serialises appends and reads between threads.
"""

from __future__ import annotations

import os
import struct
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from gateway.errors import StoreUnavailable

_HEADER = struct.Struct("<II")
_SUFFIX = ".seg"
_CURSOR = "cursor"


class SpoolFull(StoreUnavailable):
    """The spool has reached its configured size; new batches are refused."""


@dataclass(frozen=True, slots=True)
class SpoolBatch:
    """Unacknowledged records read from the head of the spool, joined."""

    payload: bytes
    records: int
    #: Where the head moves to once the batch is acknowledged.
    segment: int
    offset: int


class Spool:
    """Append-only segment files with an ack cursor and a byte cap."""

    def __init__(self, folder: Path, max_bytes: int, *, segment_bytes: int = 16 << 20) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self._lock = threading.Lock()
        self._segments: list[int] = []
        self._sizes: dict[int, int] = {}
        self._head = (0, 0)  # (segment id, offset) of the first unacknowledged record
        self._records = 0  # unacknowledged records
        self._tail_fd: int | None = None
        self.rejected_records = 0

    # -- lifecycle -----------------------------------------------------------------

    def open(self) -> None:
        """Scan the folder: find segments, the cursor, and cut a torn tail record."""
        with self._lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._segments = sorted(
                int(p.stem) for p in self.folder.glob("*" + _SUFFIX) if p.stem.isdigit()
            )
            self._sizes = {seg: self._path(seg).stat().st_size for seg in self._segments}
            head = self._read_cursor()
            if head is None or head[0] not in self._sizes:
                head = (self._segments[0], 0) if self._segments else (0, 0)
            self._head = head
            # Drop fully consumed segments left behind by a crash between ack and unlink.
            for seg in [s for s in self._segments if s < head[0]]:
                self._unlink(seg)
            self._records = 0
            for seg in self._segments:
                start = head[1] if seg == head[0] else 0
                count, valid_end = self._scan(seg, start)
                self._records += count
                if valid_end < self._sizes[seg]:
                    # A torn record (crash mid-append): only the newest segment can have one.
                    os.truncate(self._path(seg), valid_end)
                    self._sizes[seg] = valid_end
            if self._segments:
                self._tail_fd = os.open(self._path(self._segments[-1]), os.O_WRONLY | os.O_APPEND)

    def close(self) -> None:
        """Close the tail segment (everything is already on disk)."""
        with self._lock:
            if self._tail_fd is not None:
                os.close(self._tail_fd)
                self._tail_fd = None

    # -- state -----------------------------------------------------------------------

    @property
    def pending_records(self) -> int:
        """Records appended and not yet acknowledged."""
        return self._records

    @property
    def size_bytes(self) -> int:
        """Bytes on disk in segment files (acknowledged records count until their
        segment is deleted)."""
        return sum(self._sizes.values())

    @property
    def empty(self) -> bool:
        """True when every appended record has been acknowledged."""
        return self._records == 0

    def would_overflow(self, nbytes: int) -> bool:
        """True when appending ``nbytes`` of payload would pass the cap."""
        return self.size_bytes + _HEADER.size + nbytes > self.max_bytes

    # -- append / read / ack ---------------------------------------------------------

    def append(self, payload: bytes) -> None:
        """Append one record and fsync it; raise :class:`SpoolFull` past the cap."""
        record = _HEADER.pack(len(payload), zlib.crc32(payload)) + payload
        with self._lock:
            if self.size_bytes + len(record) > self.max_bytes:
                raise SpoolFull(
                    f"spool {self.folder} is full ({self.size_bytes} of {self.max_bytes} bytes)"
                )
            if (
                self._tail_fd is None
                or self._sizes[self._segments[-1]] + len(record) > self.segment_bytes
            ):
                self._roll()
            assert self._tail_fd is not None
            os.write(self._tail_fd, record)
            os.fsync(self._tail_fd)
            self._sizes[self._segments[-1]] += len(record)
            if self._records == 0 and self._head[0] not in self._sizes:
                self._head = (self._segments[-1], self._sizes[self._segments[-1]] - len(record))
            self._records += 1

    def peek(self, max_bytes: int) -> SpoolBatch | None:
        """The oldest unacknowledged records, joined, up to about ``max_bytes``
        (at least one record); ``None`` when the spool is empty."""
        with self._lock:
            if self._records == 0:
                return None
            seg, offset = self._head
            parts: list[bytes] = []
            size = 0
            count = 0
            while count < self._records:
                if offset >= self._sizes[seg]:
                    later = [s for s in self._segments if s > seg]
                    if not later:
                        break
                    seg, offset = later[0], 0
                    continue
                with open(self._path(seg), "rb") as fh:
                    fh.seek(offset)
                    length, _crc = _HEADER.unpack(fh.read(_HEADER.size))
                    if parts and size + length > max_bytes:
                        break
                    payload = fh.read(length)
                parts.append(payload if payload.endswith(b"\n") else payload + b"\n")
                size += length
                count += 1
                offset += _HEADER.size + length
            return SpoolBatch(b"".join(parts), count, seg, offset)

    def ack(self, batch: SpoolBatch) -> None:
        """Mark a peeked batch delivered; delete segments it emptied."""
        with self._lock:
            self._records -= batch.records
            for seg in [s for s in self._segments if s < batch.segment]:
                self._unlink(seg)
            self._head = (batch.segment, batch.offset)
            tail = self._segments[-1] if self._segments else None
            if self._records == 0 and tail is not None:
                # Everything delivered: start afresh so the disk space comes back now.
                if self._tail_fd is not None:
                    os.close(self._tail_fd)
                    self._tail_fd = None
                for seg in list(self._segments):
                    self._unlink(seg)
                self._head = (tail + 1, 0)
            self._write_cursor()

    def reject(self, batch: SpoolBatch, reason: str) -> Path:
        """Set a batch the server refused aside in ``rejected/`` and acknowledge it."""
        folder = self.folder / "rejected"
        folder.mkdir(exist_ok=True)
        path = folder / f"{time.time_ns()}.lp"
        path.write_bytes(f"# {reason}\n".encode() + batch.payload)
        self.rejected_records += batch.records
        self.ack(batch)
        return path

    # -- internals -------------------------------------------------------------------

    def _path(self, seg: int) -> Path:
        return self.folder / f"{seg:020d}{_SUFFIX}"

    def _roll(self) -> None:
        if self._tail_fd is not None:
            os.close(self._tail_fd)
        last = self._segments[-1] if self._segments else self._head[0] - 1
        seg = max(last + 1, self._head[0])
        self._tail_fd = os.open(self._path(seg), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._segments.append(seg)
        self._sizes[seg] = 0
        self._fsync_dir()

    def _unlink(self, seg: int) -> None:
        self._path(seg).unlink(missing_ok=True)
        self._segments.remove(seg)
        del self._sizes[seg]

    def _scan(self, seg: int, start: int) -> tuple[int, int]:
        """Count whole, valid records from ``start``; return (count, end of the last)."""
        count = 0
        offset = start
        with open(self._path(seg), "rb") as fh:
            fh.seek(start)
            while True:
                header = fh.read(_HEADER.size)
                if len(header) < _HEADER.size:
                    break
                length, crc = _HEADER.unpack(header)
                payload = fh.read(length)
                if len(payload) < length or zlib.crc32(payload) != crc:
                    break
                count += 1
                offset += _HEADER.size + length
        return count, offset

    def _read_cursor(self) -> tuple[int, int] | None:
        try:
            seg, offset = (self.folder / _CURSOR).read_text().split()
            return int(seg), int(offset)
        except (OSError, ValueError):
            return None

    def _write_cursor(self) -> None:
        tmp = self.folder / (_CURSOR + ".tmp")
        with open(tmp, "w") as fh:
            fh.write(f"{self._head[0]} {self._head[1]}")
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(self.folder / _CURSOR)

    def _fsync_dir(self) -> None:
        fd = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
