"""Issue 19, the ESPHome reference node: ESPHome's own `esphome config` accepts each
node file, and the payload its publish lambda renders passes the gateway's validator.

`esphome` runs from its own virtual environment (`.venv-esphome`, made by
`scripts/setup.sh --esphome`): it pins paho-mqtt 1.x, which the gateway's aiomqtt
cannot share. The payload is rebuilt from the lambda's own assignment lines, so a key
renamed in the YAML and not in the contract (or the other way round) fails here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.contract import FIELDS, READINGS_MODELS, status_topic, telemetry_topic
from gateway.domain import RawMessage, Reading
from gateway.provision import node_username
from gateway.validate import Validator

REPO = Path(__file__).resolve().parent.parent
NODE_DIR = REPO / "deploy" / "esphome"
NODE_FILES = ("sumpwatch-pit.yaml", "sumpwatch-outlet.yaml", "sumpwatch-air.yaml")
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ASSIGNMENT = re.compile(r'^\s*(?:if \(.*\)\s*)?(root|readings)\["(\w+)"\]\s*=\s*(.+?);\s*$')


def _esphome() -> str:
    found = os.environ.get("SUMPWATCH_ESPHOME") or str(REPO / ".venv-esphome" / "bin" / "esphome")
    if not Path(found).exists():
        pytest.fail("esphome is not installed: run scripts/setup.sh --esphome")
    return found


class _Loader(yaml.SafeLoader):
    """Reads ESPHome YAML: its tags (!secret, !include, !lambda) become plain text."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    return loader.construct_scalar(node) if isinstance(node, yaml.ScalarNode) else None


_Loader.add_multi_constructor("!", _tag)


def _node_config(name: str) -> dict[str, Any]:
    """A node file with its common package merged and its substitutions applied."""
    node_text = (NODE_DIR / name).read_text()
    subs: dict[str, Any] = yaml.load(node_text, Loader=_Loader)["substitutions"]

    def load(text: str) -> dict[str, Any]:
        for key, value in subs.items():
            text = text.replace("${" + key + "}", str(value))
        loaded: dict[str, Any] = yaml.load(text, Loader=_Loader)
        return loaded

    return {**load((NODE_DIR / "common.yaml").read_text()), **load(node_text)}


def _publish(config: dict[str, Any]) -> dict[str, Any]:
    """The node's mqtt.publish_json action."""
    then = config["interval"][0]["then"][0]["if"]["then"]
    return next(step["mqtt.publish_json"] for step in then if "mqtt.publish_json" in step)


def _sample(field: str) -> float | bool:
    return True if FIELDS[field].is_bool else 12.5


def _rendered_payload(config: dict[str, Any]) -> dict[str, Any]:
    """What the lambda writes, with sample values where it reads a sensor."""
    payload: dict[str, Any] = {"readings": {}}
    for line in _publish(config)["payload"].splitlines():
        match = ASSIGNMENT.match(line)
        if match is None:
            continue
        target, key, expr = match.groups()
        literal = re.fullmatch(r'"([^"]*)"|(\d+)', expr)
        if target == "readings":
            payload["readings"][key] = _sample(key)
        elif key == "ts":
            payload[key] = NOW.isoformat().replace("+00:00", "Z")  # strftime %Y-%m-%dT%H:%M:%SZ
        elif key == "seq":
            payload[key] = 0
        elif key == "boot":
            payload[key] = "1a2b3c4d5e6f"  # str_sprintf("%08x%04x", ...)
        elif key == "rssi_dbm":
            payload[key] = -67.0
        elif literal is not None:
            payload[key] = literal.group(1) if literal.group(1) is not None else int(expr)
        else:
            pytest.fail(f"no sample for root[{key!r}] = {expr}")
    return payload


@pytest.mark.parametrize("name", NODE_FILES)
def test_esphome_accepts_the_node_config(name: str, tmp_path: Path) -> None:
    for item in NODE_DIR.glob("*.yaml"):
        shutil.copy(item, tmp_path / item.name)
    shutil.copy(NODE_DIR / "secrets.example.yaml", tmp_path / "secrets.yaml")
    result = subprocess.run(
        [_esphome(), "config", name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Configuration is valid" in result.stdout + result.stderr


@pytest.mark.parametrize("name", NODE_FILES)
def test_the_payload_the_node_renders_passes_the_gateway_validator(name: str) -> None:
    config = _node_config(name)
    payload = _rendered_payload(config)
    subs = config["substitutions"]
    topic = _publish(config)["topic"]
    assert topic == telemetry_topic(subs["site_id"], subs["node_id"])
    raw = RawMessage(topic, json.dumps(payload).encode(), NOW)
    out = Validator(clock=lambda: NOW).validate(raw)
    assert isinstance(out, Reading), out
    assert out.kind.value == payload["kind"]
    model = READINGS_MODELS[out.kind]
    required = {name for name, info in model.model_fields.items() if info.is_required()}
    assert required <= set(payload["readings"]), "the node sends every required field"


@pytest.mark.parametrize("name", NODE_FILES)
def test_the_node_publishes_at_qos_1_with_a_retained_status_and_last_will(name: str) -> None:
    config = _node_config(name)
    subs = config["substitutions"]
    mqtt = config["mqtt"]
    status = status_topic(subs["site_id"], subs["node_id"])
    assert _publish(config)["qos"] == 1
    assert mqtt["birth_message"] == {"topic": status, "payload": "online", "qos": 1, "retain": True}
    assert mqtt["will_message"] == {"topic": status, "payload": "offline", "qos": 1, "retain": True}


@pytest.mark.parametrize("name", NODE_FILES)
def test_the_node_logs_in_with_its_provisioned_login_over_tls(name: str) -> None:
    config = _node_config(name)
    subs = config["substitutions"]
    login = node_username(subs["site_id"], subs["node_id"])
    mqtt = config["mqtt"]
    assert mqtt["username"] == login
    assert mqtt["client_id"] == login  # the broker binds client id to the login
    assert mqtt["port"] == 8883
    assert mqtt["certificate_authority"] == "mqtt_ca_certificate"  # a !secret
