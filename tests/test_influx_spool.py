"""Issue 6: the disk spool behind the InfluxDB store (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.store.spool import Spool, SpoolFull


def _drain(spool: Spool, max_bytes: int = 1 << 20) -> list[bytes]:
    out = []
    while (batch := spool.peek(max_bytes)) is not None:
        out.extend(batch.payload.splitlines())
        spool.ack(batch)
    return out


def test_records_come_back_in_append_order_across_segments(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1 << 20, segment_bytes=200)
    spool.open()
    lines = [f"pit,site_id=s,node_id=n seq={i}i {i}".encode() for i in range(50)]
    for line in lines:
        spool.append(line + b"\n")
    assert len(list(tmp_path.glob("*.seg"))) > 3
    assert spool.pending_records == 50
    assert _drain(spool, max_bytes=300) == lines
    assert spool.empty and not list(tmp_path.glob("*.seg"))


def test_acknowledged_records_are_not_replayed_after_a_reopen(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1 << 20, segment_bytes=100)
    spool.open()
    for i in range(10):
        spool.append(f"m v={i}i {i}\n".encode())
    first = spool.peek(30)
    assert first is not None
    spool.ack(first)
    spool.close()
    again = Spool(tmp_path, max_bytes=1 << 20, segment_bytes=100)
    again.open()
    assert again.pending_records == 10 - first.records
    rest = _drain(again)
    assert rest == [f"m v={i}i {i}".encode() for i in range(first.records, 10)]


def test_a_record_torn_by_a_crash_is_cut_off_on_reopen(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1 << 20)
    spool.open()
    spool.append(b"m v=1i 1\n")
    spool.append(b"m v=2i 2\n")
    spool.close()
    segment = next(tmp_path.glob("*.seg"))
    segment.write_bytes(segment.read_bytes()[:-4])  # the second append half written
    again = Spool(tmp_path, max_bytes=1 << 20)
    again.open()
    assert again.pending_records == 1
    again.append(b"m v=3i 3\n")
    assert _drain(again) == [b"m v=1i 1", b"m v=3i 3"]


def test_appends_past_the_cap_are_refused(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=100)
    spool.open()
    spool.append(b"x" * 60)
    with pytest.raises(SpoolFull):
        spool.append(b"y" * 60)
    assert spool.pending_records == 1


def test_a_rejected_batch_is_set_aside_and_the_replay_moves_on(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1 << 20)
    spool.open()
    spool.append(b"bad line\n")
    spool.append(b"m v=1i 1\n")
    batch = spool.peek(5)
    assert batch is not None and batch.records == 1
    kept = spool.reject(batch, "unable to parse")
    assert kept.read_bytes() == b"# unable to parse\nbad line\n"
    assert _drain(spool) == [b"m v=1i 1"]
    assert spool.rejected_records == 1
