"""The production time-series store: InfluxDB over its v1-compatible HTTP API.

Why this path: ``POST /write`` (line protocol) and ``GET /query`` (InfluxQL) are
served by InfluxDB 1.x (1.0 and later), by 2.x through its v1 compatibility API
(a DBRP mapping from database to bucket, token auth) and by 3.x (Core/Enterprise,
whose database is created on first write). ``influxdb-client`` speaks only the
``/api/v2`` API (Flux reads), which 1.x before 1.8 does not serve (the test suite
shows ``/api/v2/write`` answering 404 on the 1.6 server) and 3.x serves only for
writes, so it is not used here; ``docs/deploy.md`` has the table.

Data layout (documented in ``docs/deploy.md``):

* One measurement per node kind: ``pit``, ``discharge``, ``air``. Tags ``site_id``
  and ``node_id``; the point time is the device timestamp in nanoseconds. Fields
  are named as in :data:`gateway.contract.FIELDS`; booleans (``pump_on``,
  ``backup_pump_on``) are written as integers 0/1 so ``mean()`` gives a duty
  fraction and ``max()`` "ran at all"; plus ``seq`` (integer), ``boot`` (string),
  ``received_at`` (integer ns), ``battery_v`` and ``rssi_dbm``.
* A point's identity is measurement + tags + time, so a redelivered message
  overwrites itself: writes are idempotent. Two different messages of one node
  with the same device timestamp keep the later one.
* Rollups: measurements ``<kind>_1m`` and ``<kind>_1h`` with the same tags, time =
  bucket start, fields as in :func:`gateway.store.rollups.rollup_columns`.
* For the dashboards: ``node_status`` (tags site_id, node_id; ``online`` 0/1) and
  ``finding`` (tags site_id, rule_id; ``open`` 0/1, ``severity``, ``severity_rank``,
  ``level``, ``title``, ``finding_id``, ``change``), written by :meth:`write_events`.
  :func:`measurement_fields` lists everything.

Writes never block on the server: a batch goes straight to ``/write`` while the
server answers and nothing is spooled; otherwise it is appended to the disk spool
(fsync'd, so it counts as written) and a background task replays the spool in
order with exponential backoff and jitter. When the spool reaches
``influx_spool_max_bytes`` a write raises :class:`SpoolFull` (the gateway then
leaves the messages unacknowledged at the broker), logs an error, and ``stats()``
reports ``spool_full = 1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import logging
import random
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from gateway.aiotasks import cancel_one
from gateway.contract import FIELDS, NodeKind
from gateway.domain import FindingEvent, Reading, Severity, StatusChange
from gateway.errors import StoreError, StoreUnavailable
from gateway.settings import InfluxSettings
from gateway.state.database import SqliteDatabase
from gateway.store import rollups as rollup_math
from gateway.store.base import DayRollup, NodeHours, Resolution, Rollup, SeriesQuery
from gateway.store.spool import Spool, SpoolBatch, SpoolFull

log = logging.getLogger(__name__)

__all__ = [
    "TAGS",
    "InfluxStore",
    "SpoolFull",
    "format_event_lines",
    "format_lines",
    "measurement_fields",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NS = timedelta(microseconds=1)
_KINDS = tuple(k.value for k in NodeKind)
_BOOL_FIELDS = frozenset(name for name, spec in FIELDS.items() if spec.is_bool)
#: Fields written besides the contract's readings.
META_FIELDS = {"seq": "integer", "boot": "string", "received_at": "integer"}
META_FLOAT_FIELDS = ("battery_v", "rssi_dbm")


def measurement_fields() -> dict[str, set[str]]:
    """Every measurement the gateway writes and its fields (dashboards are checked
    against this)."""
    out: dict[str, set[str]] = {}
    for kind in NodeKind:
        out[kind.value] = {
            *rollup_math.KIND_FIELDS[kind],
            *META_FIELDS,
            *META_FLOAT_FIELDS,
        }
        for res in ("1m", "1h"):
            out[f"{kind.value}_{res}"] = set(rollup_math.rollup_columns(kind))
    out["node_status"] = {"online"}
    out["finding"] = {
        "open",
        "severity",
        "severity_rank",
        "level",
        "title",
        "finding_id",
        "change",
    }
    return out


#: Tag keys of every measurement.
TAGS = {"site_id", "node_id", "rule_id"}


def _ns(ts: datetime) -> int:
    # Exact integer arithmetic: a float timestamp would lose the nanoseconds.
    return (ts - _EPOCH) // _NS * 1000


def _field(name: str, value: float | bool) -> str:
    if name in _BOOL_FIELDS or isinstance(value, bool):
        return f"{name}={int(bool(value))}i"
    return f"{name}={float(value)!r}"


def format_lines(readings: Iterable[Reading]) -> bytes:
    """Line protocol for readings (ids match the contract's ``[a-z0-9_-]``, so tags
    and the ``boot`` string need no escaping)."""
    lines = []
    for r in readings:
        fields = [_field(name, value) for name, value in r.values.items()]
        if r.battery_v is not None:
            fields.append(f"battery_v={float(r.battery_v)!r}")
        if r.rssi_dbm is not None:
            fields.append(f"rssi_dbm={float(r.rssi_dbm)!r}")
        lines.append(
            f"{r.kind.value},site_id={r.site_id},node_id={r.node_id} "
            f'{",".join(fields)},seq={r.seq}i,boot="{r.boot}",received_at={_ns(r.received_at)}i '
            f"{_ns(r.ts)}"
        )
    lines.append("")
    return "\n".join(lines).encode()


def _tag(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")


def _string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


_SEVERITY_RANK = {Severity.INFO: 1, Severity.WARNING: 2, Severity.CRITICAL: 3}


def format_event_lines(statuses: Iterable[StatusChange], findings: Iterable[FindingEvent]) -> bytes:
    """Line protocol for ``node_status`` (online 0/1 at receipt time) and ``finding``
    (one point per change: open 0/1, severity, level, title, at the change's time)."""
    lines = [
        f"node_status,site_id={_tag(s.site_id)},node_id={_tag(s.node_id)} "
        f"online={int(s.online)}i {_ns(s.received_at)}"
        for s in statuses
    ]
    for event in findings:
        f = event.finding
        at = f.cleared_at or f.updated_at
        lines.append(
            f"finding,site_id={_tag(f.site_id)},rule_id={_tag(f.rule_id)} "
            f"open={int(f.is_open)}i,severity={_string(f.severity.value)},"
            f"severity_rank={_SEVERITY_RANK.get(f.severity, 0)}i,level={_string(f.level)},"
            f"title={_string(f.title)},finding_id={_string(f.id)},"
            f"change={_string(event.change.value)} {_ns(at)}"
        )
    if not lines:
        return b""
    lines.append("")
    return "\n".join(lines).encode()


def _rollup_lines(rollups: Iterable[Rollup]) -> bytes:
    lines = []
    for r in rollups:
        values = rollup_math.rollup_values(r)
        fields = []
        for name, value in values.items():
            if value is None:
                continue
            integral = name == "samples" or name.endswith("_count") or rollup_math.TOTALS.get(name)
            fields.append(f"{name}={int(value)}i" if integral else f"{name}={float(value)!r}")
        lines.append(
            f"{r.kind.value}_{r.resolution},site_id={r.site_id},node_id={r.node_id} "
            f"{','.join(fields)} {_ns(r.start)}"
        )
    lines.append("")
    return "\n".join(lines).encode()


def _dirty_from_lines(payload: bytes) -> set[rollup_math.DirtyKey]:
    """Rollup marks for spooled line protocol (parsed back, not kept twice)."""
    keys: set[rollup_math.DirtyKey] = set()
    for line in payload.split(b"\n"):
        if not line or line.startswith(b"#"):
            continue
        head, _, ts = line.rpartition(b" ")
        kind, site, node = head.split(b" ", 1)[0].decode().split(",")[:3]
        if kind not in _KINDS:
            continue
        minute = rollup_math.floor_to(int(ts) // 1_000_000_000, 60)
        keys.add((site.split("=", 1)[1], node.split("=", 1)[1], kind, minute))
    return keys


def _quote(value: str) -> str:
    """An InfluxQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class _Retryable(Exception):
    """The server did not take the batch now; try again later."""


class _Rejected(Exception):
    """The server refused the batch as malformed; retrying cannot help."""


class InfluxStore:
    """Time-series store on InfluxDB (1.x, 2.x, 3.x) with a disk spool."""

    name = "influxdb"

    def __init__(self, influx: InfluxSettings, db: SqliteDatabase, *, spool_dir: Path) -> None:
        self.influx = influx
        self.db = db
        self.dirty = rollup_math.DirtyLog(db)
        self.spool = Spool(
            spool_dir,
            influx.spool_max_bytes,
            segment_bytes=int(influx.spool_segment_bytes),
        )
        self.batch_bytes = int(influx.batch_bytes)
        self.timeout_s = float(influx.timeout_s)
        self.retry_min_s = float(influx.retry_min_s)
        self.retry_max_s = float(influx.retry_max_s)
        self.close_drain_s = float(influx.close_drain_s)
        self._client: httpx.AsyncClient | None = None
        self._params: dict[str, str] = {"db": influx.database}
        self._headers: dict[str, str] = {}
        self._write_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._drained = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None
        self._up = True
        self._spool_full = False
        self._counters: dict[str, float] = {
            "points_written": 0,
            "points_spooled": 0,
            "spool_replayed_records": 0,
            "write_errors": 0,
            "rejected_batches": 0,
        }
        self._last_error = ""

    # -- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        """Open the spool, create the database when the server allows it, and start
        replaying whatever the spool holds from an earlier run."""
        s = self.influx
        if s.token is not None:
            # 2.x (v1 compatibility) and 3.x accept the token in this header.
            self._headers["Authorization"] = f"Token {s.token.get_secret_value()}"
        elif s.username is not None:
            self._params["u"] = s.username
            if s.password is not None:
                self._params["p"] = s.password.get_secret_value()
        self._client = httpx.AsyncClient(
            base_url=s.url.rstrip("/"),
            timeout=httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 3.0)),
            headers=self._headers,
        )
        await asyncio.to_thread(self.spool.open)
        await self.dirty.open()
        with contextlib.suppress(StoreError):
            await self._create_database()
        if not self.spool.empty:
            log.warning(
                "InfluxDB spool holds %d batches from an earlier run; replaying",
                self.spool.pending_records,
            )
        self._flusher = asyncio.create_task(self._flush_loop(), name="influx-spool-replay")

    async def close(self) -> None:
        """Give the replay a few seconds to drain, then stop; what is left stays in
        the spool for the next run."""
        if self._flusher is not None:
            if not self.spool.empty and self._up:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.close_drain_s):
                        await self._drained.wait()
            await cancel_one(self._flusher)
            self._flusher = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        await asyncio.to_thread(self.spool.close)

    # -- writing -------------------------------------------------------------------------

    async def write(self, readings: Sequence[Reading]) -> int:
        """Deliver or durably spool a batch; return its size.

        InfluxDB cannot tell new points from overwritten ones, so every reading of a
        delivered or spooled batch counts. Raises :class:`SpoolFull` when the server
        is unreachable and the spool is at its cap.
        """
        if not readings:
            return 0
        await self._deliver(format_lines(readings), len(readings), rollup_math.dirty_keys(readings))
        return len(readings)

    async def reused(self, readings: Sequence[Reading]) -> list[Reading]:
        """Nothing: InfluxDB overwrites a point of the same identity and cannot tell
        (``write`` reports every reading as new, so this is never asked)."""
        return []

    async def write_events(
        self, statuses: Sequence[StatusChange] = (), findings: Sequence[FindingEvent] = ()
    ) -> None:
        """Copy node availability and finding changes into the ``node_status`` and
        ``finding`` measurements, which the Grafana dashboards read (same delivery
        and spool as readings)."""
        payload = format_event_lines(statuses, findings)
        if payload:
            await self._deliver(payload, len(statuses) + len(findings), set())

    async def _deliver(self, payload: bytes, points: int, marks: set[rollup_math.DirtyKey]) -> None:
        async with self._write_lock:
            if self._up and self.spool.empty:
                try:
                    await self.dirty.mark(marks)
                    await self._post(payload)
                except _Retryable as exc:
                    self._went_down(str(exc))
                except _Rejected as exc:
                    await self._reject_direct(payload, str(exc))
                    return
                else:
                    self._counters["points_written"] += points
                    return
            try:
                await asyncio.to_thread(self.spool.append, payload)
            except SpoolFull:
                if not self._spool_full:
                    log.error(
                        "InfluxDB spool is FULL (%d bytes): refusing writes until InfluxDB "
                        "at %s takes the backlog",
                        self.spool.size_bytes,
                        self.influx.url,
                    )
                self._spool_full = True
                raise
            self._spool_full = False
            self._counters["points_spooled"] += points
            self._drained.clear()
            self._wake.set()

    async def _post(self, payload: bytes, path: str = "/write") -> None:
        """POST line protocol; raise _Retryable or _Rejected unless it was taken."""
        client = self._require_client()
        headers = {"Content-Type": "text/plain; charset=utf-8"}
        body = payload
        if self.influx.gzip:
            body = await asyncio.to_thread(gzip.compress, payload, 1)
            headers["Content-Encoding"] = "gzip"
        try:
            resp = await client.post(
                path,
                params={**self._params, "precision": "ns"},
                content=body,
                headers=headers,
            )
        except httpx.HTTPError as exc:
            raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
        if resp.status_code in (200, 204):
            return
        text = resp.text[:500]
        if resp.status_code == 404 and "database not found" in text:
            with contextlib.suppress(StoreError):
                await self._create_database()
            raise _Retryable(text)
        if resp.status_code == 413:
            await self._post_halves(payload, path)
            return
        if resp.status_code == 400:
            raise _Rejected(text)
        # 401/403 (credentials), 429, 5xx: keep the data and retry.
        raise _Retryable(f"HTTP {resp.status_code}: {text}")

    async def _post_halves(self, payload: bytes, path: str) -> None:
        lines = payload.splitlines(keepends=True)
        if len(lines) < 2:
            raise _Rejected("a single point is larger than the server accepts")
        mid = len(lines) // 2
        await self._post(b"".join(lines[:mid]), path)
        await self._post(b"".join(lines[mid:]), path)

    async def _reject_direct(self, payload: bytes, reason: str) -> None:
        self._counters["rejected_batches"] += 1
        folder = self.spool.folder / "rejected"
        path = folder / f"{time.time_ns()}.lp"

        def save() -> None:
            folder.mkdir(parents=True, exist_ok=True)
            path.write_bytes(f"# {reason}\n".encode() + payload)

        await asyncio.to_thread(save)
        log.error("InfluxDB refused a batch (%s); kept in %s", reason, path)

    def _went_down(self, reason: str) -> None:
        self._counters["write_errors"] += 1
        self._last_error = reason
        if self._up:
            log.warning(
                "InfluxDB at %s unreachable (%s); spooling to disk",
                self.influx.url,
                reason,
            )
        self._up = False

    def _came_up(self) -> None:
        if not self._up:
            log.warning("InfluxDB at %s is back; replaying the spool", self.influx.url)
        self._up = True

    async def _flush_loop(self) -> None:
        """Replay the spool, oldest first, with exponential backoff and jitter."""
        backoff = self.retry_min_s
        while True:
            try:
                backoff = await self._replay_once(backoff)
            except asyncio.CancelledError:
                raise
            except Exception:
                # Never let the replay die silently (e.g. a disk error reading the spool).
                log.exception("InfluxDB spool replay failed; retrying")
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.retry_max_s)

    async def _replay_once(self, backoff: float) -> float:
        """Send the oldest spooled batch (or wait for one); return the next backoff."""
        self._wake.clear()
        batch: SpoolBatch | None = await asyncio.to_thread(self.spool.peek, self.batch_bytes)
        if batch is None:
            self._drained.set()
            await self._wake.wait()
            return backoff
        try:
            await self.dirty.mark(_dirty_from_lines(batch.payload))
            await self._post(batch.payload)
        except _Retryable as exc:
            self._went_down(str(exc))
            await asyncio.sleep(backoff * random.uniform(0.5, 1.0))
            return min(backoff * 2, self.retry_max_s)
        except _Rejected as exc:
            path = await asyncio.to_thread(self.spool.reject, batch, str(exc))
            self._counters["rejected_batches"] += 1
            log.error("InfluxDB refused a spooled batch (%s); kept in %s", exc, path)
            return backoff
        await asyncio.to_thread(self.spool.ack, batch)
        self._counters["spool_replayed_records"] += batch.records
        self._came_up()
        if self.spool.empty:
            self._spool_full = False
            log.info("InfluxDB spool drained")
        return self.retry_min_s

    # -- reading -------------------------------------------------------------------------

    async def _query(self, q: str, *, method: str = "GET") -> list[dict[str, Any]]:
        """Run InfluxQL; return each statement's ``series`` list (flattened)."""
        client = self._require_client()
        params = {**self._params, "q": q, "epoch": "ns"}
        try:
            if method == "GET":
                resp = await client.get("/query", params=params)
            else:
                resp = await client.post("/query", params=params)
        except httpx.HTTPError as exc:
            raise StoreUnavailable(f"InfluxDB query failed: {type(exc).__name__}: {exc}") from exc
        if resp.status_code >= 500:
            raise StoreUnavailable(f"InfluxDB query: HTTP {resp.status_code}: {resp.text[:300]}")
        try:
            body = resp.json()
        except ValueError as exc:
            raise StoreError(f"InfluxDB query: HTTP {resp.status_code}: {resp.text[:300]}") from exc
        if resp.status_code != 200 and "results" not in body:
            raise StoreError(f"InfluxDB query: HTTP {resp.status_code}: {body}")
        series: list[dict[str, Any]] = []
        for result in body.get("results", []):
            error = result.get("error")
            if error:
                if "database not found" in error:
                    continue
                raise StoreError(f"InfluxDB query error: {error}")
            series.extend(result.get("series", []))
        return series

    async def _create_database(self) -> None:
        # 1.x needs it; 2.x (DBRP mapping) and 3.x (created on first write) refuse or
        # ignore it, which is fine.
        await self._query(f'CREATE DATABASE "{self.influx.database}"', method="POST")

    @staticmethod
    def _rows(series: dict[str, Any]) -> Iterable[dict[str, Any]]:
        columns = series["columns"]
        tags = series.get("tags") or {}
        for values in series["values"]:
            row = dict(zip(columns, values, strict=True))
            row.update(tags)
            yield row

    @staticmethod
    def _reading(kind: NodeKind, row: dict[str, Any]) -> Reading:
        values: dict[str, float | bool] = {}
        for name in rollup_math.KIND_FIELDS[kind]:
            value = row.get(name)
            if value is None:
                continue
            values[name] = bool(value) if name in _BOOL_FIELDS else float(value)
        ts = int(row["time"])
        received = row.get("received_at")
        return Reading(
            site_id=row["site_id"],
            node_id=row["node_id"],
            kind=kind,
            ts=_EPOCH + timedelta(microseconds=ts // 1000),
            seq=int(row["seq"]),
            boot=str(row["boot"]),
            values=values,
            received_at=_EPOCH + timedelta(microseconds=int(received or ts) // 1000),
            battery_v=row.get("battery_v"),
            rssi_dbm=row.get("rssi_dbm"),
        )

    @staticmethod
    def _where(
        site_id: str, node_id: str | None, start: datetime | None, end: datetime | None
    ) -> str:
        where = [f"site_id = {_quote(site_id)}"]
        if node_id is not None:
            where.append(f"node_id = {_quote(node_id)}")
        if start is not None:
            where.append(f"time >= {_ns(start)}")
        if end is not None:
            where.append(f"time < {_ns(end)}")
        return " AND ".join(where)

    async def readings(self, query: SeriesQuery) -> list[Reading]:
        """Readings of a site in device-time order, merged across node kinds."""
        kinds = [
            k
            for k in NodeKind
            if not query.fields or set(query.fields) & set(rollup_math.KIND_FIELDS[k])
        ]
        if not kinds:
            return []
        where = self._where(query.site_id, query.node_id, query.start, query.end)
        statements = ";".join(
            f'SELECT * FROM "{k.value}" WHERE {where} ORDER BY time ASC LIMIT {query.limit}'
            for k in kinds
        )
        out: list[Reading] = []
        for series in await self._query(statements):
            kind = NodeKind(series["name"])
            out.extend(self._reading(kind, row) for row in self._rows(series))
        if query.fields:
            wanted = set(query.fields)
            out = [r for r in out if wanted & r.values.keys()]
        out.sort(key=lambda r: r.ts)
        return out[: query.limit]

    async def latest(self, site_id: str) -> dict[str, Reading]:
        """The newest reading per node of one site."""
        statements = ";".join(
            f'SELECT * FROM "{k}" WHERE site_id = {_quote(site_id)} '
            "GROUP BY node_id ORDER BY time DESC LIMIT 1"
            for k in _KINDS
        )
        out: dict[str, Reading] = {}
        for series in await self._query(statements):
            for row in self._rows(series):
                reading = self._reading(NodeKind(series["name"]), row)
                have = out.get(reading.node_id)
                if have is None or reading.ts > have.ts:
                    out[reading.node_id] = reading
        return out

    async def latest_of(self, site_ids: Sequence[str]) -> dict[str, dict[str, Reading]]:
        """The newest reading per node of each site: one query per node kind for all
        sites (grouped by site and node), kept to the sites asked for."""
        wanted = set(site_ids)
        statements = ";".join(
            f'SELECT * FROM "{k}" GROUP BY site_id, node_id ORDER BY time DESC LIMIT 1'
            for k in _KINDS
        )
        out: dict[str, dict[str, Reading]] = {site_id: {} for site_id in site_ids}
        for series in await self._query(statements):
            for row in self._rows(series):
                if row["site_id"] not in wanted:
                    continue
                reading = self._reading(NodeKind(series["name"]), row)
                latest = out[reading.site_id]
                have = latest.get(reading.node_id)
                if have is None or reading.ts > have.ts:
                    latest[reading.node_id] = reading
        return out

    async def count(self, site_id: str | None = None) -> int:
        """Stored points (each message is one point; ``seq`` is always present)."""
        where = "" if site_id is None else f" WHERE site_id = {_quote(site_id)}"
        statements = ";".join(f'SELECT count("seq") FROM "{k}"{where}' for k in _KINDS)
        total = 0
        for series in await self._query(statements):
            for row in self._rows(series):
                total += int(row["count"])
        return total

    async def healthy(self) -> bool:
        """True while writes are accepted: the server answers, or the spool has room."""
        if self._spool_full:
            return False
        if self._up:
            return True
        return not self.spool.would_overflow(0)

    def stats(self) -> dict[str, float]:
        """Gauges and counters for /metrics and /health: ``influx_up`` (0/1),
        ``spool_full`` (0/1), ``spool_bytes``, ``spool_max_bytes``,
        ``spool_pending_batches``, ``spool_rejected_records``, ``points_written``
        (delivered directly), ``points_spooled``, ``spool_replayed_records``,
        ``write_errors``, ``rejected_batches``."""
        return {
            "influx_up": 1.0 if self._up else 0.0,
            "spool_full": 1.0 if self._spool_full else 0.0,
            "spool_bytes": float(self.spool.size_bytes),
            "spool_max_bytes": float(self.spool.max_bytes),
            "spool_pending_batches": float(self.spool.pending_records),
            "spool_rejected_records": float(self.spool.rejected_records),
            **self._counters,
        }

    @property
    def spool_full(self) -> bool:
        """True while writes are being refused because the spool is at its cap."""
        return self._spool_full

    @property
    def last_error(self) -> str:
        """The last write error (empty when none)."""
        return self._last_error

    # -- rollups -------------------------------------------------------------------------

    async def rollups(
        self,
        site_id: str,
        resolution: Resolution,
        start: datetime,
        end: datetime,
        node_id: str | None = None,
    ) -> list[Rollup]:
        """Stored rollups whose bucket starts in [start, end), by start then node."""
        if resolution not in ("1m", "1h"):
            raise ValueError(f"unknown rollup resolution {resolution!r}")
        where = self._where(site_id, node_id, start, end)
        statements = ";".join(
            f'SELECT * FROM "{k}_{resolution}" WHERE {where} ORDER BY time ASC' for k in _KINDS
        )
        out = []
        for series in await self._query(statements):
            kind = NodeKind(series["name"].rsplit("_", 1)[0])
            for row in self._rows(series):
                start_at = _EPOCH + timedelta(microseconds=int(row["time"]) // 1000)
                out.append(
                    rollup_math.rollup_from_values(
                        row["site_id"], row["node_id"], kind, resolution, start_at, row
                    )
                )
        out.sort(key=lambda r: (r.start, r.node_id))
        return out

    async def save_rollups(self, rollups: Sequence[Rollup]) -> None:
        """Write rollup points directly (not spooled: a failed refresh is retried)."""
        if not rollups:
            return
        try:
            await self._post(_rollup_lines(rollups))
        except _Retryable as exc:
            raise StoreUnavailable(f"InfluxDB refused rollups: {exc}") from exc
        except _Rejected as exc:
            raise StoreError(f"InfluxDB refused rollups: {exc}") from exc

    async def refresh_rollups(self, until: datetime | None = None) -> int:
        """Recompute the rollup buckets that new points touched (see ``rollups``)."""
        return await rollup_math.refresh(self, self.dirty, until)

    async def day_rollups(self, site_id: str, start: datetime, end: datetime) -> list[DayRollup]:
        """A site's day rollups of the UTC days overlapping [start, end), by day then node.

        The documented fallback (docs/reports.md): reduced on read from the 1-hour
        rollups, with the same function the SQLite store keeps its table with, so
        both stores give the same days; only the read is not smaller here.
        """
        day = rollup_math.DAY_S
        first = rollup_math.floor_to(start.timestamp(), day)
        last = -rollup_math.floor_to(-end.timestamp(), day)  # whole days, as SQLite keeps them
        hourly = await self.rollups(
            site_id, "1h", datetime.fromtimestamp(first, UTC), datetime.fromtimestamp(last, UTC)
        )
        return rollup_math.reduce_days(hourly)

    async def hour_series(self, site_id: str, start: datetime, hours: int) -> list[NodeHours]:
        """The day rollups (reduced on read, above) as hourly series, as the SQLite
        store lays out its stored ones."""
        days = await self.day_rollups(site_id, start, start + timedelta(hours=hours))
        return rollup_math.hours_of_days(days, start, hours)

    def _require_client(self) -> httpx.AsyncClient:
        if self._client is None:
            raise StoreUnavailable("InfluxDB store is not open")
        return self._client
