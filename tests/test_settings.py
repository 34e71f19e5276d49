"""The settings tree: nested sections from the environment, TOML and arguments, and
the flat names of the last release still accepted, with a warning naming the new one."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from pydantic import ValidationError

from gateway.settings import FLAT_NAMES, Settings, load_settings


def _settings(**values: object) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[arg-type]


def test_a_nested_environment_variable_sets_its_sections_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SUMPWATCH_MQTT__HOST", "broker.example")
    monkeypatch.setenv("SUMPWATCH_STORE__BATCH_MAX", "17")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        settings = _settings()
    assert settings.mqtt.host == "broker.example"
    assert settings.store.batch_max == 17


def test_a_toml_section_sets_its_keys(tmp_path: Path) -> None:
    config = tmp_path / "sumpwatch.toml"
    config.write_text('[mqtt]\nhost = "broker.example"\nport = 8883\n[alerts]\nfile = "a.toml"\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        settings = load_settings(config, mqtt={"port": None})
    assert (settings.mqtt.host, settings.mqtt.port) == ("broker.example", 8883)
    assert settings.alerts.file == Path("a.toml")


def test_an_override_wins_over_the_toml_file_key_by_key(tmp_path: Path) -> None:
    config = tmp_path / "sumpwatch.toml"
    config.write_text('[mqtt]\nhost = "broker.example"\nport = 8883\n')
    settings = load_settings(config, mqtt={"port": 1884})
    assert (settings.mqtt.host, settings.mqtt.port) == ("broker.example", 1884)


def test_a_flat_environment_variable_still_works_and_names_the_new_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SUMPWATCH_MQTT_HOST", "old.example")
    with pytest.warns(DeprecationWarning, match="SUMPWATCH_MQTT__HOST"):
        settings = _settings()
    assert settings.mqtt.host == "old.example"


def test_the_old_store_variable_still_chooses_the_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SUMPWATCH_STORE", "influxdb")
    with pytest.warns(DeprecationWarning, match="SUMPWATCH_STORE__BACKEND"):
        settings = _settings()
    assert settings.store.backend == "influxdb"


def test_a_nested_variable_wins_over_its_flat_spelling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUMPWATCH_MQTT_PORT", "1")
    monkeypatch.setenv("SUMPWATCH_MQTT__PORT", "2")
    with pytest.warns(DeprecationWarning):
        assert _settings().mqtt.port == 2


def test_a_flat_keyword_argument_still_works_and_names_the_new_key() -> None:
    with pytest.warns(DeprecationWarning, match=r"mqtt_port is deprecated; use mqtt\.port"):
        settings = _settings(mqtt_port=1884)
    assert settings.mqtt.port == 1884


def test_a_flat_toml_key_still_works(tmp_path: Path) -> None:
    config = tmp_path / "sumpwatch.toml"
    config.write_text('alerts_file = "routing.toml"\nstore = "influxdb"\n')
    with pytest.warns(DeprecationWarning) as caught:
        settings = load_settings(config)
    assert sorted(str(w.message) for w in caught) == [
        "setting alerts_file is deprecated; use alerts.file",
        "setting store is deprecated; use store.backend",
    ]
    assert settings.alerts.file == Path("routing.toml")
    assert settings.store.backend == "influxdb"


def test_every_flat_name_lands_on_a_field_of_its_section() -> None:
    sections = Settings.model_fields
    for flat, (section, key) in FLAT_NAMES.items():
        model = sections[section].annotation
        assert model is not None and key in model.model_fields, flat  # type: ignore[union-attr]


def test_an_unknown_key_in_a_section_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"mqtt\.hots"):
        _settings(mqtt={"hots": "typo.example"})


def test_the_alert_secrets_come_from_the_settings_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SUMPWATCH_ALERTS__WEBHOOK_SECRET", "s3cret")
    secret = _settings().alerts.webhook_secret
    assert secret is not None and secret.get_secret_value() == "s3cret"


def test_updated_validates_and_keeps_the_other_keys_of_a_section() -> None:
    base = _settings(mqtt={"host": "broker.example"})
    moved = base.updated(mqtt={"port": 1884})
    assert (moved.mqtt.host, moved.mqtt.port) == ("broker.example", 1884)
    with pytest.raises(ValidationError):
        base.updated(mqtt={"port": "not-a-port"})


def test_a_flat_variable_in_a_dotenv_file_still_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("SUMPWATCH_MQTT_HOST=dotenv.example\n")
    monkeypatch.delenv("SUMPWATCH_MQTT_HOST", raising=False)
    # The .env file's keys reach Settings as keyword arguments (prefix removed).
    with pytest.warns(DeprecationWarning, match=r"mqtt_host is deprecated; use mqtt\.host"):
        settings = Settings(_env_file=dotenv)  # type: ignore[call-arg]
    assert settings.mqtt.host == "dotenv.example"
