"""Home Assistant's problem sensors come from the detector registry: every rule the
gateway can raise has one, and a new rule needs no edit of the discovery module."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from gateway.homeassistant.discovery import discovery_messages
from gateway.homeassistant.state import SiteHaState
from gateway.registry import load_registry
from gateway.rules.catalog import CATALOG, RULE_IDS
from tests.conftest import DEMO_SITES


def _finding_keys(doc: dict[str, object]) -> set[str]:
    return {k for k, v in doc.items() if v in ("ON", "OFF")} - {"pump_running"}


def test_each_rule_s_open_finding_turns_on_exactly_one_discovered_problem_sensor() -> None:
    site = next(iter(load_registry(DEMO_SITES)))
    configs = [c for _t, c in discovery_messages(site, "homeassistant", "http://x.example")]
    templates = {c["value_template"] for c in configs if "payload_on" in c}
    for rule_id in RULE_IDS:
        state = SiteHaState(ZoneInfo("America/Chicago"), 1000.0, open_rules={rule_id})
        doc = state.document()
        on = [k for k in _finding_keys(doc) if doc[k] == "ON"]
        assert len(on) == 1, rule_id
        assert "{{ value_json." + on[0] + " }}" in templates, rule_id


def test_a_rule_without_its_own_look_is_a_problem_sensor_named_by_its_catalog_title() -> None:
    assert "continuous_run" in RULE_IDS
    site = next(iter(load_registry(DEMO_SITES)))
    configs = [c for _t, c in discovery_messages(site, "homeassistant", "http://x.example")]
    (config,) = [c for c in configs if c["value_template"] == "{{ value_json.continuous_run }}"]
    assert config["name"] == CATALOG["continuous_run"].title
    assert config["device_class"] == "problem"
