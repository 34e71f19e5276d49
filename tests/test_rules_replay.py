"""Offline replay of a recorded telemetry file, and the audit/replay CLI commands."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from firmware_sim.cli import score
from firmware_sim.offline import run_offline, write_jsonl
from firmware_sim.scoring import registry_from_toml
from gateway.cases.cli import amended_sites
from gateway.rules.cli import audit_command, replay_command
from gateway.rules.pack import load_packs
from gateway.rules.replay import parse_line, replay_file
from gateway.settings import REPO_DIR
from gateway.validate import shape_only


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    run = run_offline("illegal_sanitary_hose", homes=1, duration=timedelta(hours=2))
    folder = tmp_path_factory.mktemp("rec")
    telemetry, sites = folder / "telemetry.jsonl", folder / "sites.toml"
    write_jsonl(run.messages, telemetry)
    with telemetry.open("a") as out:
        out.write("this is not json\n")
        out.write('{"no_topic": 1}\n')
        out.write("\n")
    sites.write_text(run.sites_toml)
    return telemetry, sites


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command("audit")(audit_command(amended_sites))
    app.command("replay")(replay_command(shape_only().validate))
    app.command("score")(score)
    return app


def test_parse_line_accepts_text_object_and_base64_payloads() -> None:
    topic = "sumpwatch/v1/a/pit/telemetry"
    assert parse_line(json.dumps({"topic": topic, "payload": "x"})) == (topic, b"x")
    assert parse_line(json.dumps({"topic": topic, "payload": {"v": 1}})) == (topic, b'{"v": 1}')
    assert parse_line(json.dumps({"topic": topic, "payload_b64": "/w=="})) == (topic, b"\xff")
    assert parse_line("not json") is None
    assert parse_line(json.dumps({"payload": "x"})) is None


def test_replay_finds_the_sanitary_hose_and_counts_bad_lines(
    recording: tuple[Path, Path],
) -> None:
    telemetry, sites = recording
    result = replay_file(
        telemetry,
        registry_from_toml(sites.read_text()),
        load_packs(),
        validate=shape_only().validate,
    )
    assert result.invalid_lines == 2
    assert [(f.site_id, f.rule_id) for f in result.findings] == [
        ("hose-always", "sanitary_discharge")
    ]


def test_replay_command_prints_findings_as_json_lines(recording: tuple[Path, Path]) -> None:
    telemetry, sites = recording
    out = CliRunner().invoke(_cli(), ["replay", str(telemetry), "--sites", str(sites)])
    assert out.exit_code == 0, out.output
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [(f["site_id"], f["rule_id"]) for f in lines] == [("hose-always", "sanitary_discharge")]
    first = lines[0]
    assert list(first) == [
        "id", "rule_id", "site_id", "severity", "level", "title", "opened_at", "updated_at",
        "cleared_at", "open", "audience", "evidence", "citations", "action",
    ]  # fmt: skip
    assert first["citations"][0]["section"] == "(b)"
    assert first["opened_at"].endswith("Z")


def test_replay_events_mode_prints_each_change(recording: tuple[Path, Path]) -> None:
    telemetry, sites = recording
    out = CliRunner().invoke(_cli(), ["replay", str(telemetry), "--sites", str(sites), "--events"])
    changes = [json.loads(x)["change"] for x in out.stdout.splitlines() if x.startswith("{")]
    assert changes[0] == "opened"


def test_audit_command_exits_1_and_lists_failures_with_citations() -> None:
    sites = REPO_DIR / "deploy" / "sites.example.toml"
    out = CliRunner().invoke(_cli(), ["audit", "--sites", str(sites), "--json"])
    assert out.exit_code == 1
    items = [json.loads(x) for x in out.stdout.splitlines()]
    oak7 = {i["requirement_id"] for i in items if i["site_id"] == "oak-7" and i["status"] == "fail"}
    assert oak7 == {"rigid_line", "pipe_min_diameter", "property_line_setback"}
    assert all(i["citations"] for i in items)


def test_audit_command_exits_0_for_a_compliant_site() -> None:
    sites = REPO_DIR / "deploy" / "sites.example.toml"
    out = CliRunner().invoke(_cli(), ["audit", "--sites", str(sites), "--site", "elm-12"])
    assert out.exit_code == 0, out.output


def test_the_audit_table_names_each_ordinance_and_section_and_json_keeps_the_file() -> None:
    # Issue 20.3: people read "Village of Edgar Sump Pump Ordinance §(c)(2)b"; the file
    # name of the ordinance text is for machines (--json) only.
    sites = REPO_DIR / "deploy" / "sites.example.toml"
    wide = {"COLUMNS": "400"}  # one table row per line, so a citation is not folded
    table = CliRunner().invoke(_cli(), ["audit", "--sites", str(sites)], env=wide)
    assert "Village of Edgar Sump Pump Ordinance §" in table.stdout
    assert ".txt" not in table.stdout
    lines = CliRunner().invoke(_cli(), ["audit", "--sites", str(sites), "--json"]).stdout
    files = {c["file"] for x in lines.splitlines() for c in json.loads(x)["citations"]}
    assert "000_86c7187f3bed6ca5.txt" in files
