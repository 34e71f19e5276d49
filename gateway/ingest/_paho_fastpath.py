"""The ingest fast path: the one module allowed to drive paho/aiomqtt internals.

aiomqtt (on paho) reads one MQTT packet per event-loop turn with a ``recv`` per
header byte, wraps each message twice and creates an asyncio task per message;
acks cost two or three syscalls each. That capped the gateway at ~3,000 msg/s
(docs/performance.md). :class:`FastPath` keeps aiomqtt for connecting,
subscribing and reconnecting but takes over the receive and ack paths, which
needs private attributes of both libraries: they are touched here and nowhere
else (ruff's SLF rule is off for this file only), and ``paho-mqtt`` is pinned
below its next minor in pyproject.toml so an upgrade is a decision, tested by
tests/test_ingest.py and tests/test_faults.py.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol, TypeVar

import aiomqtt
import paho.mqtt.client as paho_mqtt
from paho.mqtt.enums import MQTTErrorCode

#: Bytes read from the socket at once (many ~300-byte PUBLISH packets).
_CHUNK = 256 * 1024
#: Packets parsed per readiness event before other tasks get a turn.
_PACKETS_PER_TURN = 2000
_PUBACK = struct.Struct("!BBH")  # fixed header 0x40, remaining length 2, packet id
_U16 = struct.Struct("!H")
_OK = MQTTErrorCode.MQTT_ERR_SUCCESS

T = TypeVar("T")

# The messages keep the ingest logger's name: operators filter on it.
log = logging.getLogger("gateway.ingest.mqtt")


async def unless_disconnected(client: aiomqtt.Client, pending: Awaitable[T]) -> T:
    """``pending``'s result, or ``aiomqtt.MqttError`` once the connection ends first.

    For the SUBACK and the birth message's PUBACK, which the broker queues behind the
    persistent session's backlog: up to a Receive Maximum (20,000) of PUBLISH packets
    that the gateway must validate, judge and commit before it reads the answer. Under
    load that took longer than aiomqtt's fixed 10 s and the gateway dropped a sound
    connection, to be sent the same 20,000 messages again (bench/drain.py, issue 17).
    A dead link is keepalive's to notice (paho pings and closes it); aiomqtt then ends
    ``_disconnected``, but does not fail the calls it has pending: hence the race."""
    call = asyncio.ensure_future(pending)
    lost: asyncio.Future[None] = client._disconnected
    try:
        await asyncio.wait((call, lost), return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not call.done():
            call.cancel()
    if call.done() and not call.cancelled():
        return call.result()
    raise aiomqtt.MqttError("the connection ended before the broker answered")


def enable_manual_ack(client: aiomqtt.Client) -> None:
    """Ack only what we say: aiomqtt has no public manual-ack switch; paho's client does."""
    client._client.manual_ack_set(True)


#: Receives one PUBLISH packet as the broker sent it: (topic, payload, packet id, QoS,
#: retain, when it was read). Plain arguments, not an object: at 1,000 sites a frozen
#: dataclass per message was ~1.8 us of the gateway's ~40 (issue 17).
OnPublish = Callable[[str, bytes, int, int, bool, datetime], None]


class Gate(Protocol):
    """Where the fast path asks whether to take more messages (the batch writer)."""

    #: The most messages it holds (None: no bound); the source announces no larger
    #: Receive Maximum, so a broker that keeps to it never makes the reading pause.
    hold_max: int | None

    def full(self) -> bool:
        """True while no further message should be taken."""
        ...

    def when_room(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once messages may be taken again."""
        ...


class FastPath:
    """Takes over the receive and ack paths of one connected aiomqtt client.

    aiomqtt (on paho) keeps connecting, subscribing, keep-alive and reconnecting.
    This class reads the socket in large chunks and parses PUBLISH packets itself
    (topic, packet id, payload; v5 properties skipped: the broker sends none we
    use, as we grant no topic aliases); any other packet (SUBACK, PINGRESP,
    DISCONNECT...) is handed whole to paho. It relies on paho internals
    (``_sock_recv``, ``_packet_read``, ``_packet_queue``) that are stable across
    paho 1.6-2.2; tests/test_ingest.py and tests/test_faults.py exercise them.

    With a ``gate`` (the batch writer), a PUBLISH packet is handed on only while the
    gate is not full; otherwise it stays in our buffer, the socket's reader is removed
    and the unread messages wait in the kernel and at the broker (unacknowledged, so
    safe) until the gate calls back. What the gateway holds is then bounded whatever
    the broker sends. Packets before it (CONNACK, SUBACK, PINGRESP) are read as usual.
    """

    def __init__(
        self,
        client: aiomqtt.Client,
        on_publish: OnPublish,
        owns: Callable[[str], bool] | None = None,
        *,
        v5: bool = True,
        gate: Gate | None = None,
    ) -> None:
        self._aio = client
        self._gate = gate
        #: The socket's descriptor while its reader is removed (the gate is full).
        self._paused_fd: int | None = None
        #: Times the gate stopped the reading (a benchmark figure).
        self.pauses = 0
        self._v5 = v5
        self._owns = owns
        self._not_ours: list[int] = []  # packet ids of other shards' messages, to ack
        self.skipped = 0
        self._paho: paho_mqtt.Client = client._client
        self._sock_recv = self._paho._sock_recv
        self._on_publish = on_publish
        self._buf = bytearray()  # bytes read from the socket, not parsed yet
        self._for_paho = bytearray()  # one whole non-PUBLISH packet for paho to read
        self._paho._sock_recv = self._paho_recv  # type: ignore[method-assign]
        self._paho.loop_read = self._loop_read  # type: ignore[method-assign]

    def _paho_recv(self, bufsize: int) -> bytes:
        buf = self._for_paho
        if not buf:
            raise BlockingIOError  # paho never reads the socket itself any more
        data = bytes(buf[:bufsize])
        del buf[:bufsize]
        return data

    def _loop_read(self, max_packets: int = 1) -> MQTTErrorCode:
        paho = self._paho
        if paho._sock is None:
            return MQTTErrorCode.MQTT_ERR_NO_CONN
        buf = self._buf
        try:
            chunk = self._sock_recv(_CHUNK)
        except BlockingIOError:
            chunk = None
        except OSError:
            return paho._loop_rc_handle(MQTTErrorCode.MQTT_ERR_CONN_LOST)
        if chunk is not None:
            if not chunk:
                return paho._loop_rc_handle(MQTTErrorCode.MQTT_ERR_CONN_LOST)
            buf += chunk
            # TLS: a recv returns one record; decrypted bytes still buffered in the
            # SSL object make the socket look idle to the selector, so read them now.
            pending = getattr(paho._sock, "pending", None)
            while pending is not None and pending():
                try:
                    buf += self._sock_recv(_CHUNK)
                except (BlockingIOError, ssl.SSLWantReadError):
                    break
            paho._last_bytes_received = paho_mqtt.time_func()
        rc = self._parse()
        if rc != _OK:
            return paho._loop_rc_handle(rc)
        return _OK

    def _parse(self) -> MQTTErrorCode:
        buf = self._buf
        view = memoryview(buf)
        pos = 0
        end = len(buf)
        count = 0
        # One clock reading a parse: the packets of one socket read arrived together.
        now = datetime.now(UTC)
        try:
            while pos + 2 <= end:
                if count == _PACKETS_PER_TURN:
                    # Complete packets wait in our buffer, where the selector cannot
                    # see them: come back after the writer and acks had a turn.
                    asyncio.get_running_loop().call_soon(self._read_again)
                    break
                header = buf[pos]
                # Remaining length: 1-4 bytes, 7 bits each.
                length = 0
                shift = 0
                i = pos + 1
                while True:
                    if i >= end:
                        return _OK  # incomplete header
                    byte = buf[i]
                    length |= (byte & 0x7F) << shift
                    i += 1
                    if not byte & 0x80:
                        break
                    shift += 7
                    if shift > 21:
                        return MQTTErrorCode.MQTT_ERR_PROTOCOL
                if i + length > end:
                    break  # incomplete body
                if header & 0xF0 == paho_mqtt.PUBLISH:
                    if self._gate is not None and self._gated():
                        break  # the packet stays in our buffer until there is room
                    count += 1
                    self._publish(header, view[i : i + length], now)
                else:
                    count += 1
                    self._for_paho += view[pos : i + length]
                    rc = self._paho._packet_read()
                    if rc != _OK:
                        return rc
                pos = i + length
        finally:
            view.release()
            del buf[:pos]
            if self._not_ours:
                self.ack(self._not_ours)
                self._not_ours = []
        return _OK

    def _publish(self, header: int, body: memoryview, now: datetime) -> None:
        qos = (header >> 1) & 0x03
        n = _U16.unpack_from(body)[0]
        topic = str(body[2 : 2 + n], "utf-8")
        at = 2 + n
        mid = 0
        if qos:
            mid = _U16.unpack_from(body, at)[0]
            at += 2
        if self._owns is not None and not self._owns(topic):
            # Another shard's site: that gateway gets its own copy. Ack, drop.
            self.skipped += 1
            if qos:
                self._not_ours.append(mid)
            return
        plen = 0
        if self._v5:
            # v5 properties: a variable-length count, then the properties; skipped.
            shift = 0
            while True:
                byte = body[at]
                at += 1
                plen |= (byte & 0x7F) << shift
                if not byte & 0x80:
                    break
                shift += 7
        payload = body[at + plen :].tobytes()
        try:
            self._on_publish(topic, payload, mid, qos, bool(header & 0x01), now)
        except Exception:  # the handler never raises by contract; never drop the link
            log.exception("message handler failed on %r", topic)

    def _gated(self) -> bool:
        """True when the gate is full; the socket's reader is then off until it calls
        back (the kernel's receive window, then the broker, hold the rest)."""
        gate = self._gate
        if gate is None or not gate.full():
            return False
        sock = self._paho._sock
        if self._paused_fd is None and sock is not None:
            fd = sock.fileno()
            asyncio.get_running_loop().remove_reader(fd)
            self._paused_fd = fd
            self.pauses += 1
            gate.when_room(self._resume)
        return True

    def _resume(self) -> None:
        """The gate has room: watch the socket again and parse what is buffered."""
        fd, self._paused_fd = self._paused_fd, None
        sock = self._paho._sock
        if fd is None or sock is None or sock.fileno() != fd:
            return  # the connection closed meanwhile; a new one has its own reader
        asyncio.get_running_loop().add_reader(fd, self._readable)
        self._read_again()

    def _readable(self) -> None:
        """The socket's reader after a pause (what aiomqtt's own reader does)."""
        try:
            self._paho.loop_read()
        except Exception as exc:  # the connection broke, as in aiomqtt's callback
            disconnected = self._aio._disconnected
            if not disconnected.done():
                disconnected.set_exception(exc)

    def _read_again(self) -> None:
        if self._paho._sock is None:
            return
        try:
            rc = self._parse()
            if rc != _OK:
                self._paho._loop_rc_handle(rc)
        except Exception as exc:  # as aiomqtt's reader callback: the connection broke
            disconnected = self._aio._disconnected
            if not disconnected.done():
                disconnected.set_exception(exc)

    def ack(self, mids: Sequence[int]) -> None:
        """Send the PUBACKs of ``mids`` as one write (MQTT v5 short form: success)."""
        if not mids or self._paho._sock is None:
            return
        packet = b"".join(_PUBACK.pack(0x40, 2, mid) for mid in mids)
        self._paho._packet_queue(paho_mqtt.PUBACK, packet, 0, 0)


class PlainPath:
    """The fallback (``mqtt_fast_path = false``): aiomqtt's own message loop delivers
    each PUBLISH; acks go through paho's public ``ack`` one by one. The same
    interface as :class:`FastPath` for the source: ``owns``, ``ack`` and ``skipped``."""

    def __init__(self, client: aiomqtt.Client, owns: Callable[[str], bool] | None = None) -> None:
        self._paho: paho_mqtt.Client = client._client
        self.owns = owns
        self.skipped = 0

    def ack(self, mids: Sequence[int]) -> None:
        """Send the PUBACK of each of ``mids``."""
        if self._paho._sock is None:
            return
        for mid in mids:
            self._paho.ack(mid, 1)
