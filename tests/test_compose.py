"""Issue 6: docker-compose.yml, the Dockerfile and .env.example, validated statically
(Docker does not run on these machines), plus the broker files they mount, on a real
Mosquitto."""

from __future__ import annotations

import os
import re
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import paho.mqtt.client as mqtt
import pytest
import typer
import yaml
from compose_spec import PyCompose
from pydantic import BaseModel
from typer.testing import CliRunner

from gateway.broker import BrokerProcess, mosquitto_binary, start_broker
from gateway.provision import NodeCredentials, provision_gateway, provision_nodes
from gateway.runtime import shard_client_id
from gateway.settings import REPO_DIR, Settings

COMPOSE_FILE = REPO_DIR / "docker-compose.yml"
ENV_EXAMPLE = REPO_DIR / ".env.example"
DOCKERFILE = REPO_DIR / "Dockerfile"
MOSQUITTO_CONF = REPO_DIR / "deploy" / "mosquitto" / "mosquitto.conf"
GRAFANA = REPO_DIR / "deploy" / "grafana" / "provisioning"

_VAR = re.compile(r"\$\{([A-Z0-9_]+)(?::?([-?])([^}]*))?\}")


#: The cluster profile's services: the state in PostgreSQL, ingest-only gateways (one
#: shard each) and web servers.
CLUSTER = ("postgres", "gateway-shard-0", "gateway-shard-1", "gateway-standby", "web-1", "web-2")


def env_example() -> dict[str, str]:
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's variable substitution: ${VAR}, ${VAR:-default}, ${VAR:?error}, $$."""

    def sub(match: re.Match[str]) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        if env.get(name):
            return env[name]
        if op == "?":
            raise KeyError(f"{name} is required: {arg}")
        return arg or ""

    return _VAR.sub(sub, text).replace("$$", "$")


#: What an operator adds to .env.example: the logins made with `sumpwatch provision`
#: and `sumpwatch provision-gateway`, and the TLS certificates' folder
#: (scripts/make_certs.sh); compose refuses to start without each.
OPERATOR = {
    "MOSQUITTO_PASSWD_FILE": "./deploy/mosquitto/passwd",
    "MOSQUITTO_GATEWAY_PASSWD_FILE": "./deploy/mosquitto/passwd.gateway",
    "SUMPWATCH_MQTT_PASSWORD": "printed-by-provision-gateway",
    "MOSQUITTO_CERTS_DIR": "./deploy/mosquitto/certs",
}
#: Files the operator makes; never in the repository (.gitignore).
OPERATOR_FILES = {
    "./deploy/mosquitto/passwd",
    "./deploy/mosquitto/passwd.gateway",
    "./deploy/mosquitto/sim-credentials.toml",
}


def load(env: dict[str, str] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(
        interpolate(COMPOSE_FILE.read_text(), env or {**env_example(), **OPERATOR})
    )
    return data


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load()


def bind_mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(host path, container path) of every bind mount."""
    mounts = []
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith(("./", "/")):
            mounts.append((source, target))
    return mounts


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    assert isinstance(env, dict)
    return {k: str(v) for k, v in env.items()}


# -- the file as a whole -----------------------------------------------------------------


def test_the_file_is_a_valid_compose_specification() -> None:
    parsed = PyCompose.from_yaml(
        interpolate(COMPOSE_FILE.read_text(), {**env_example(), **OPERATOR})
    )
    assert set(parsed.service_names()) == {
        "mosquitto",
        "influxdb",
        "grafana",
        "gateway",
        "simulator",
        *CLUSTER,
    }


def test_the_validator_rejects_a_misspelt_key() -> None:
    with pytest.raises(ValueError):
        PyCompose.from_yaml("services:\n  gateway:\n    imagee: x\n")


def test_every_service_has_an_image_or_a_build_and_a_health_check(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        assert "image" in service or "build" in service, name
        if name != "simulator":
            assert service["healthcheck"]["test"], name
    assert compose["services"]["simulator"]["profiles"] == ["demo"]
    assert compose["services"]["gateway"]["build"] == "."
    assert DOCKERFILE.exists()


def test_dependencies_name_services_of_the_file(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, service in services.items():
        for dependency, rule in service.get("depends_on", {}).items():
            assert dependency in services, (name, dependency)
            assert "healthcheck" in services[dependency], (name, dependency)
            assert rule["condition"] == "service_healthy"


def test_every_bind_mounted_file_exists_in_the_repo(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for source, _target in bind_mounts(service):
            assert source.startswith("./"), f"{name}: absolute host path {source}"
            if source in OPERATOR_FILES:
                assert source.removeprefix(".") in (REPO_DIR / ".gitignore").read_text()
                continue
            assert (REPO_DIR / source).exists(), f"{name}: {source} is not in the repo"


def test_named_volumes_keep_every_services_data(compose: dict[str, Any]) -> None:
    declared = set(compose["volumes"])
    used = {
        volume.split(":")[0]
        for service in compose["services"].values()
        for volume in service.get("volumes", [])
        if not volume.startswith(("./", "/"))
    }
    assert (
        used
        == declared
        == {
            "mosquitto-data",
            "influxdb-data",
            "grafana-data",
            "gateway-data",
            "postgres-data",
            *(f"{name}-data" for name in CLUSTER if name != "postgres"),
        }
    )


def test_no_secret_is_written_in_the_file() -> None:
    raw = yaml.safe_load(COMPOSE_FILE.read_text())
    for name, service in raw["services"].items():
        for key, value in (service.get("environment") or {}).items():
            if re.search(r"PASSWORD|SECRET|TOKEN", key):
                assert re.fullmatch(r"\$\{[A-Z0-9_]+:\?[^}]+\}", str(value)), (name, key, value)


def test_env_example_names_every_variable_the_file_uses() -> None:
    used = set(_VAR.findall(COMPOSE_FILE.read_text()))
    documented = env_example()
    for name, op, _arg in used:
        assert name in documented, f"{name} is not in .env.example"
        if op == "?" and name not in OPERATOR:
            assert documented[name], f"{name} is required but empty in .env.example"


def test_a_required_secret_missing_from_env_stops_the_file_loading() -> None:
    env = {**env_example(), **OPERATOR}
    del env["INFLUXDB_ADMIN_PASSWORD"]
    with pytest.raises(KeyError, match="INFLUXDB_ADMIN_PASSWORD"):
        load(env)


@pytest.mark.parametrize("name", sorted(OPERATOR))
def test_compose_refuses_to_start_without_each_mqtt_credential(name: str) -> None:
    env = {**env_example(), **OPERATOR}
    del env[name]
    with pytest.raises(KeyError, match=name):
        load(env)


def test_compose_refuses_to_start_on_the_example_env_alone() -> None:
    # cp .env.example .env && docker compose up: stops, naming the password files.
    with pytest.raises(KeyError, match=r"MOSQUITTO_(GATEWAY_)?PASSWD_FILE"):
        load(env_example())


def test_compose_refuses_to_start_without_certificates_and_says_how_to_make_them() -> None:
    # The TLS listener is in the shipped config and no certificate is committed: a
    # default folder would start a broker that exits at once (issue 12).
    raw = yaml.safe_load(COMPOSE_FILE.read_text())
    (mount,) = [
        v for v in raw["services"]["mosquitto"]["volumes"] if v.endswith(":/mosquitto/certs:ro")
    ]
    assert re.match(r"\$\{MOSQUITTO_CERTS_DIR:\?[^}]*scripts/make_certs\.sh", mount), mount
    assert not env_example()["MOSQUITTO_CERTS_DIR"]
    env = {**env_example(), **OPERATOR}
    del env["MOSQUITTO_CERTS_DIR"]
    with pytest.raises(KeyError, match=r"make_certs\.sh"):
        load(env)


def test_the_certificate_script_writes_every_file_the_tls_listener_reads(tmp_path: Path) -> None:
    subprocess.run(
        ["bash", str(REPO_DIR / "scripts" / "make_certs.sh"), str(tmp_path)],
        check=True,
        capture_output=True,
    )
    conf = MOSQUITTO_CONF.read_text()
    for key in ("certfile", "keyfile", "cafile"):
        (path,) = re.findall(rf"^{key}\s+/mosquitto/certs/(\S+)", conf, re.M)
        assert (tmp_path / path).is_file(), key
    assert "/deploy/mosquitto/certs/*.key" in (REPO_DIR / ".gitignore").read_text()


def test_broker_password_files_have_no_default(compose: dict[str, Any]) -> None:
    raw = yaml.safe_load(COMPOSE_FILE.read_text())
    mounts = [v for v in raw["services"]["mosquitto"]["volumes"] if "/mosquitto/config/passwd" in v]
    assert len(mounts) == 2
    for volume in mounts:
        assert re.match(r"\$\{[A-Z_]+:\?", volume), volume  # required, never a fallback file


def test_the_repo_ships_no_broker_logins() -> None:
    shipped = [p.name for p in (REPO_DIR / "deploy" / "mosquitto").iterdir()]
    assert not [n for n in shipped if n.startswith("passwd") or "credentials" in n], shipped
    assert "published" not in env_example().get("SUMPWATCH_MQTT_PASSWORD", "")
    assert not env_example()["SUMPWATCH_MQTT_PASSWORD"]


def test_the_acl_lets_no_login_write_node_topics_but_the_nodes_own() -> None:
    user = None
    for line in (REPO_DIR / "deploy" / "mosquitto" / "acl").read_text().splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "user":
            user = words[1]
        elif words[0] == "pattern":
            assert words[1] == "write" and "%u" in words[2], line
        elif words[0] == "topic" and words[1] in ("write", "readwrite"):
            # Logins other than nodes write only what the gateway publishes: alert
            # state, Home Assistant discovery and state, the gateway's own availability;
            # never a node's topics.
            topic = words[2]
            gateway_output = (
                topic.endswith("/alerts")
                or topic.startswith(("homeassistant/", "sumpwatch/ha/"))
                or topic == "sumpwatch/v1/gateway/+/availability"
            )
            assert gateway_output and not topic.endswith(("/telemetry", "/status")), (user, line)


# -- the gateway's settings --------------------------------------------------------------


def _setting_names() -> set[str]:
    """Every environment name of the settings tree: top-level keys and SECTION__KEY."""
    names = set()
    for name, field in Settings.model_fields.items():
        section = field.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):
            names |= {f"SUMPWATCH_{name}__{key}".upper() for key in section.model_fields}
        else:
            names.add(f"SUMPWATCH_{name.upper()}")
    return names


def test_gateway_environment_is_valid_settings(compose: dict[str, Any]) -> None:
    env = environment(compose["services"]["gateway"])
    unknown = {k for k in env if k.startswith("SUMPWATCH_")} - _setting_names()
    assert not unknown, f"not settings of the tree (or a deprecated flat name): {unknown}"
    assert _settings_of(compose["services"]["gateway"]).store.backend == "influxdb"


def _settings_of(service: dict[str, Any]) -> Settings:
    """The settings a container of ``service`` builds from its environment, as the
    gateway does (nested names; a deprecated flat one would warn, and fails here)."""
    env = environment(service)
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for name in [k for k in os.environ if k.startswith("SUMPWATCH_")]:
            patch.delenv(name)
        for name, value in env.items():
            patch.setenv(name, value)
        return Settings(_env_file=None)  # type: ignore[call-arg]


# -- the cluster profile (issue 18.6) ------------------------------------------------------


def test_the_cluster_profile_runs_postgres_two_ingest_only_gateways_and_two_web_servers(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    assert all(services[name]["profiles"] == ["cluster"] for name in CLUSTER)
    commands = {name: services[name].get("command") for name in CLUSTER}
    assert commands == {
        "postgres": None,
        "gateway-shard-0": ["gateway", "--no-api"],
        "gateway-shard-1": ["gateway", "--no-api"],
        "gateway-standby": ["gateway", "--no-api", "--standby"],
        "web-1": ["api"],
        "web-2": ["api"],
    }


def test_every_cluster_process_shares_one_postgresql_state_and_one_secret_key(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    settings = [_settings_of(services[name]) for name in CLUSTER if name != "postgres"]
    urls = {s.store.state_url.get_secret_value() for s in settings if s.store.state_url is not None}
    assert len(settings) == 5 and len(urls) == 1
    url = urlsplit(urls.pop())
    postgres = environment(services["postgres"])
    assert (url.hostname, url.username, url.password, url.path) == (
        "postgres",
        postgres["POSTGRES_USER"],
        postgres["POSTGRES_PASSWORD"],
        "/" + postgres["POSTGRES_DB"],
    )
    assert len({s.api.secret_key.get_secret_value() for s in settings}) == 1  # sessions


def test_each_cluster_gateway_owns_a_shard_a_client_id_and_a_data_volume(
    compose: dict[str, Any],
) -> None:
    names = ("gateway-shard-0", "gateway-shard-1", "gateway-standby")
    gateways = [compose["services"][name] for name in names]
    settings = [_settings_of(g) for g in gateways]
    assert [(s.mqtt.shards, s.mqtt.shard) for s in settings] == [(2, 0), (2, 1), (2, None)]
    # The standby takes a shard over under that shard's client id (its session).
    shard_ids = {shard_client_id(s, s.mqtt.shard) for s in settings if s.mqtt.shard is not None}
    standby = settings[2]
    assert shard_ids == {shard_client_id(standby, 0), shard_client_id(standby, 1)}
    assert len(shard_ids) == 2
    assert [g["volumes"][0].split(":")[0] for g in gateways] == [f"{n}-data" for n in names]


def test_gateway_reaches_the_broker_and_influxdb_by_service_name(compose: dict[str, Any]) -> None:
    services = compose["services"]
    env = environment(services["gateway"])
    assert env["SUMPWATCH_MQTT__HOST"] == "mosquitto"
    conf = MOSQUITTO_CONF.read_text()
    # The gateways' own listener: it reads passwd.gateway and is never published.
    listener = conf.split(f"listener {env['SUMPWATCH_MQTT__PORT']}\n", 1)[1].split("listener")[0]
    assert "password_file /mosquitto/config/passwd.gateway" in listener
    assert "use_username_as_clientid" not in listener
    ports = services["mosquitto"]["ports"]
    assert not any(p.endswith(f":{env['SUMPWATCH_MQTT__PORT']}") for p in ports)
    url = urlsplit(env["SUMPWATCH_INFLUX__URL"])
    assert (url.hostname, url.port) == ("influxdb", 8086)
    influx = environment(services["influxdb"])
    assert influx["INFLUXDB_DB"] == env["SUMPWATCH_INFLUX__DATABASE"]
    assert influx["INFLUXDB_USER"] == env["SUMPWATCH_INFLUX__USERNAME"]
    assert influx["INFLUXDB_USER_PASSWORD"] == env["SUMPWATCH_INFLUX__PASSWORD"]


def test_gateway_port_health_check_and_paths_agree(compose: dict[str, Any]) -> None:
    gateway = compose["services"]["gateway"]
    env = environment(gateway)
    port = env["SUMPWATCH_API__PORT"]
    assert any(p.endswith(f":{port}") for p in gateway["ports"])
    assert f"127.0.0.1:{port}/health" in " ".join(gateway["healthcheck"]["test"])
    assert f"EXPOSE {port}" in DOCKERFILE.read_text()
    targets = {v.split(":")[1] for v in gateway["volumes"]}
    assert env["SUMPWATCH_DATA_DIR"] in targets
    assert env["SUMPWATCH_SITES_FILE"] in targets


def test_the_image_runs_the_sumpwatch_gateway_command() -> None:
    text = DOCKERFILE.read_text()
    assert 'ENTRYPOINT ["sumpwatch"]' in text and 'CMD ["gateway"]' in text
    assert 'sumpwatch = "gateway.cli:main"' in (REPO_DIR / "pyproject.toml").read_text()
    for line in text.splitlines():
        if line.startswith("COPY") and "--from" not in line:
            for source in line.split()[1:-1]:
                assert (REPO_DIR / source).exists(), f"Dockerfile copies missing {source}"


# -- the broker and Grafana files the services mount --------------------------------------


def test_mosquitto_mounts_every_file_its_config_names(compose: dict[str, Any]) -> None:
    targets = {target for _s, target in bind_mounts(compose["services"]["mosquitto"])}
    conf = MOSQUITTO_CONF.read_text()
    for key in ("password_file", "acl_file", "certfile", "keyfile", "cafile"):
        paths = re.findall(rf"^{key}\s+(\S+)", conf, re.M)
        assert paths, key
        for path in paths:
            assert any(path == t or path.startswith(t.rstrip("/") + "/") for t in targets), path
    assert "/mosquitto/config/mosquitto.conf" in targets


def test_grafana_gets_every_variable_its_provisioning_uses(compose: dict[str, Any]) -> None:
    grafana = compose["services"]["grafana"]
    env = environment(grafana)
    text = (GRAFANA / "datasources" / "sumpwatch.yaml").read_text()
    for name in re.findall(r"\$\{([A-Z0-9_]+)\}", text):
        assert env.get(name), f"grafana lacks {name}"
    url = urlsplit(env["GRAFANA_INFLUX_URL"])
    assert (url.hostname, url.port) == ("influxdb", 8086)
    influx = environment(compose["services"]["influxdb"])
    assert env["GRAFANA_INFLUX_USER"] == influx["INFLUXDB_READ_USER"]
    providers = yaml.safe_load((GRAFANA / "dashboards" / "sumpwatch.yaml").read_text())
    targets = {target for _s, target in bind_mounts(grafana)}
    assert providers["providers"][0]["options"]["path"] in targets
    home = env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home.startswith(providers["providers"][0]["options"]["path"])
    assert (REPO_DIR / "dashboards" / "grafana" / "dashboards" / Path(home).name).exists()


@pytest.fixture
def provisioned_broker(tmp_path: Path) -> Any:
    """The shipped config and ACL with the logins the docs tell an operator to make."""
    if mosquitto_binary() is None:
        pytest.fail("mosquitto is not installed")
    app = typer.Typer()
    app.command()(provision_gateway)
    gateways = tmp_path / "passwd.gateway"
    made = CliRunner().invoke(app, ["--passwd-file", str(gateways)])
    assert made.exit_code == 0, made.output
    env = dict(line.split("=", 1) for line in made.stdout.splitlines() if "=" in line)
    nodes = tmp_path / "passwd"
    node = provision_nodes(nodes, "elm-12", ["pit"])[0]
    broker = start_broker(
        tmp_path / "mosquitto",
        password_file=nodes,
        acl_file=REPO_DIR / "deploy" / "mosquitto" / "acl",
        gateway_password_file=gateways,
    )
    yield broker, env, node
    broker.stop()


def _client(port: int, user: str, password: str, client_id: str) -> mqtt.Client:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id)
    client.username_pw_set(user, password)
    client.connect("127.0.0.1", port)
    return client


@pytest.mark.integration
def test_the_provisioned_logins_let_a_node_publish_and_the_gateway_read(
    provisioned_broker: tuple[BrokerProcess, dict[str, str], NodeCredentials],
) -> None:
    broker, env, node = provisioned_broker
    assert broker.gateway_port is not None
    received: list[str] = []
    gateway = _client(
        broker.gateway_port, env["SUMPWATCH_MQTT_USERNAME"], env["SUMPWATCH_MQTT_PASSWORD"], "gw"
    )
    gateway.on_message = lambda _c, _u, msg: received.append(msg.topic)
    gateway.loop_start()
    try:
        gateway.subscribe("sumpwatch/v1/+/+/telemetry", qos=1)
        pit = _client(broker.port, node.username, node.password, node.username)
        pit.loop_start()
        time.sleep(0.3)
        pit.publish("sumpwatch/v1/elm-12/pit/telemetry", b"{}", qos=1).wait_for_publish(5)
        deadline = time.monotonic() + 5
        while not received and time.monotonic() < deadline:
            time.sleep(0.05)
        pit.disconnect()
        pit.loop_stop()
    finally:
        gateway.disconnect()
        gateway.loop_stop()
    assert received == ["sumpwatch/v1/elm-12/pit/telemetry"]
