"""Issue 20.12: the command line's traps (no data, where reports go, passwords without
a terminal, durations in words, help that fits the terminal)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gateway.accounts.cli import user_app
from gateway.cli import app as cli_app  # the mounted command, as `sumpwatch report`
from gateway.durations import DurationError, parse_duration, say_duration
from tests.test_reports_delivery import SEASON, _populate, _write_sites


def test_report_winter_refuses_a_data_folder_without_sumpwatch_data(tmp_path: Path) -> None:
    sites = _write_sites(tmp_path / "sites")
    empty = tmp_path / "nothing-here"
    result = CliRunner().invoke(
        cli_app,
        ["report", "winter", "--season", SEASON, "--site", "h1", "--data-dir", str(empty),
         "--sites", str(sites), "--out", str(tmp_path / "x.pdf")],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "no SumpWatch data at" in result.output and "--data-dir" in result.output
    assert not (empty / "sumpwatch.db").exists()  # nothing created behind the user's back
    assert not (tmp_path / "x.pdf").exists()


def test_report_winter_without_out_writes_under_the_data_folder_and_says_where(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    sites = asyncio.run(_populate(data))
    result = CliRunner().invoke(
        cli_app,
        ["report", "winter", "--season", SEASON, "--site", "h1", "--format", "csv",
         "--data-dir", str(data), "--sites", str(sites)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    written = (data / "reports" / "winter-2026-2027-site-h1.csv").resolve()
    assert written.exists()
    assert str(written) in result.output.replace("\n", "")


def test_user_add_without_a_terminal_points_to_password_stdin(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        user_app,
        ["add", "owner16", "--role", "homeowner", "--site", "elm-16"],
        env={"SUMPWATCH_DATA_DIR": str(tmp_path), "SUMPWATCH_API__SECRET_KEY": "k"},
    )
    assert result.exit_code == 2
    assert "--password-stdin" in result.output


@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("15 minutes", timedelta(minutes=15)),
        ("1 hour", timedelta(hours=1)),
        ("2 days", timedelta(days=2)),
        ("90s", timedelta(seconds=90)),
        ("6", timedelta(hours=6)),
    ],
)
def test_durations_are_read_in_words_or_short_units(text: str, span: timedelta) -> None:
    assert parse_duration(text) == span


def test_a_duration_that_is_not_one_says_what_to_type() -> None:
    with pytest.raises(DurationError, match="15 minutes"):
        parse_duration("a fortnight")


def test_durations_are_said_in_words() -> None:
    assert say_duration(timedelta(minutes=15)) == "15 minutes"
    assert say_duration(timedelta(hours=1)) == "1 hour"
    assert say_duration(timedelta(seconds=5400)) == "1.5 hours"


def test_help_fits_a_narrow_terminal_and_keeps_every_default_whole() -> None:
    env = {**os.environ, "COLUMNS": "60", "TERMINAL_WIDTH": "60"}
    help_text = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "report", "winter", "--help"],
        capture_output=True, text=True, env=env, check=True,
    ).stdout  # fmt: skip
    lines = help_text.splitlines()
    assert max(len(line) for line in lines) <= 60, help_text
    flat = " ".join(help_text.split())
    assert "[default: pdf]" in flat and "[default: us]" in flat
    assert "<data dir>/reports" in flat
