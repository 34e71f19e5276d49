"""Waivers are in force by instant: a date is the whole local day, a time is exact."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from gateway.registry.models import Waiver

CHICAGO = ZoneInfo("America/Chicago")


def test_a_date_waiver_covers_the_whole_local_end_day() -> None:
    w = Waiver(rule="sanitary_discharge", start="2026-12-01", end="2026-12-03")  # type: ignore[arg-type]
    late_on_the_last_local_day = datetime(2026, 12, 4, 5, 59, tzinfo=UTC)  # 23:59 CST
    assert w.covers_at(late_on_the_last_local_day, CHICAGO)
    assert not w.covers_at(datetime(2026, 12, 4, 6, 0, tzinfo=UTC), CHICAGO)


def test_a_waiver_ending_at_midnight_utc_does_not_stretch_into_the_local_evening() -> None:
    w = Waiver(
        rule="sanitary_discharge",
        start="2026-12-01T00:00:00Z",  # type: ignore[arg-type]
        end="2026-12-03T00:00:00Z",  # type: ignore[arg-type]
    )
    evening_of_dec_2_local = datetime(2026, 12, 3, 1, 0, tzinfo=UTC)  # 19:00 CST Dec 2
    assert not w.covers_at(evening_of_dec_2_local, CHICAGO)
    assert w.covers_at(datetime(2026, 12, 2, 23, 59, tzinfo=UTC), CHICAGO)


def test_a_waiver_time_without_an_offset_is_refused() -> None:
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="UTC offset"):
        Waiver(rule="x", start="2026-12-01T00:00:00", end="2026-12-02")  # type: ignore[arg-type]
