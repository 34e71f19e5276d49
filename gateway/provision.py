"""Node provisioning: Mosquitto password-file entries and the settings a node needs.

Login scheme (see docs/security.md): a node's username *and* MQTT client id are
``<site_id>/<node_id>``. The shipped ACL (``deploy/mosquitto/acl``) then confines it
with two pattern lines, ``pattern write sumpwatch/v1/%u/telemetry`` and ``.../status``:
a node can publish only its own telemetry and availability, and read nothing.

Password entries are written in Mosquitto 2's own PBKDF2-SHA512 format
(``$7$<iterations>$<salt>$<hash>``, as ``mosquitto_passwd`` writes them) by this
module, so a password never appears on a command line or in ``ps``.

``sumpwatch provision SITE [NODE...]`` is :func:`provision`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from gateway.contract import ID_RE, status_topic, telemetry_topic
from gateway.errors import ConfigError
from gateway.examples import EXAMPLE_SITES
from gateway.registry import load_registry

#: PBKDF2 rounds. mosquitto_passwd uses 101; Mosquitto reads the count from each
#: entry, and 1,000 costs the broker ~1 ms per CONNECT.
ITERATIONS = 1000
_SALT_BYTES = 12


def hash_password(password: str, *, iterations: int = ITERATIONS, salt: bytes | None = None) -> str:
    """A Mosquitto 2 password hash: ``$7$<iterations>$<b64 salt>$<b64 PBKDF2-SHA512>``."""
    salt = salt if salt is not None else secrets.token_bytes(_SALT_BYTES)
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)
    b64 = base64.b64encode
    return f"$7${iterations}${b64(salt).decode()}${b64(digest).decode()}"


def check_password(password: str, encoded: str) -> bool:
    """True when ``password`` matches a ``$7$`` entry (for tests and ``--check``)."""
    try:
        _, kind, rounds, salt, digest = encoded.split("$")
    except ValueError:
        return False
    if kind != "7":
        return False
    expected = hash_password(password, iterations=int(rounds), salt=base64.b64decode(salt))
    return hmac.compare_digest(expected.rsplit("$", 1)[1], digest)


def node_username(site_id: str, node_id: str) -> str:
    """A node's username and client id."""
    return f"{site_id}/{node_id}"


def read_passwd(path: Path) -> dict[str, str]:
    """A password file as ``{username: hash}`` (missing file: empty)."""
    if not path.exists():
        return {}
    entries: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        user, sep, encoded = line.partition(":")
        if not sep:
            raise ConfigError(f"{path}:{number}: not a 'username:hash' line")
        entries[user] = encoded
    return entries


def write_passwd(path: Path, entries: dict[str, str]) -> None:
    """Replace the password file atomically, readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".passwd-")
    try:
        with os.fdopen(fd, "w") as f:
            f.writelines(f"{user}:{encoded}\n" for user, encoded in entries.items())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def set_password(path: Path, username: str, password: str, *, replace: bool = False) -> None:
    """Add (or with ``replace``, change) one password-file entry."""
    if ":" in username or not username or any(c in username for c in "+#\n"):
        raise ConfigError(f"invalid MQTT username {username!r}")
    entries = read_passwd(path)
    if username in entries and not replace:
        raise ConfigError(f"{username!r} already has a password in {path}; use --rotate")
    entries[username] = hash_password(password)
    write_passwd(path, entries)


def remove_user(path: Path, username: str) -> bool:
    """Delete a password-file entry (revoke a node); False if it was not there."""
    entries = read_passwd(path)
    if entries.pop(username, None) is None:
        return False
    write_passwd(path, entries)
    return True


@dataclass(frozen=True)
class NodeCredentials:
    """What a node is configured with."""

    site_id: str
    node_id: str
    password: str
    host: str
    port: int
    tls_port: int | None
    ca_file: str | None

    @property
    def username(self) -> str:
        """Username and client id."""
        return node_username(self.site_id, self.node_id)

    def to_toml(self) -> str:
        """A ``["site/node"]`` table, the format ``sumpwatch simulate --credentials`` reads."""
        lines = [
            f'["{self.username}"]',
            f'username = "{self.username}"',
            f'password = "{self.password}"',
            f'client_id = "{self.username}"',
            f'host = "{self.host}"',
            f"port = {self.port}",
        ]
        if self.tls_port is not None:
            lines.append(f"tls_port = {self.tls_port}")
        if self.ca_file:
            lines.append(f'ca_file = "{self.ca_file}"')
        lines += [
            f'telemetry_topic = "{telemetry_topic(self.site_id, self.node_id)}"  # QoS 1',
            f'status_topic = "{status_topic(self.site_id, self.node_id)}"  # retained',
            'will = "offline"  # last will on status_topic: QoS 1, retained',
            "mqtt_version = 5",
        ]
        return "\n".join(lines) + "\n"


def provision_nodes(
    passwd_file: Path,
    site_id: str,
    node_ids: list[str],
    *,
    host: str = "127.0.0.1",
    port: int = 1883,
    tls_port: int | None = 8883,
    ca_file: str | None = None,
    rotate: bool = False,
) -> list[NodeCredentials]:
    """Create (or rotate) the logins of ``node_ids`` at ``site_id``; return their settings."""
    bad = [i for i in (site_id, *node_ids) if not ID_RE.match(i)]
    if bad:
        raise ConfigError(f"ids must match {ID_RE.pattern}: {bad}")
    if not node_ids:
        raise ConfigError("no nodes to provision")
    entries = read_passwd(passwd_file)
    taken = [n for n in node_ids if node_username(site_id, n) in entries]
    if taken and not rotate:
        raise ConfigError(
            f"already provisioned: {[node_username(site_id, n) for n in taken]}; "
            "use --rotate to issue new passwords"
        )
    creds = []
    for node_id in node_ids:
        password = secrets.token_urlsafe(24)
        entries[node_username(site_id, node_id)] = hash_password(password)
        creds.append(NodeCredentials(site_id, node_id, password, host, port, tls_port, ca_file))
    write_passwd(passwd_file, entries)
    return creds


def provision(
    site_id: Annotated[str, typer.Argument(help="Site id (as in the site registry)")],
    nodes: Annotated[
        list[str] | None,
        typer.Argument(help="Node ids (default: every node of the site in the registry)"),
    ] = None,
    passwd_file: Annotated[
        Path, typer.Option("--passwd-file", help="Mosquitto password file to update")
    ] = Path("deploy/mosquitto/passwd"),
    sites: Annotated[Path, typer.Option(help="Site registry (TOML)")] = EXAMPLE_SITES,
    host: Annotated[str, typer.Option(help="Broker host name the node connects to")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="Plain MQTT port (local network)")] = 1883,
    tls_port: Annotated[int, typer.Option(help="MQTT over TLS port")] = 8883,
    ca_file: Annotated[
        str | None, typer.Option(help="CA certificate path as installed on the node")
    ] = None,
    rotate: Annotated[bool, typer.Option(help="Issue new passwords to existing nodes")] = False,
    unknown_ok: Annotated[
        bool, typer.Option(help="Allow a site or node that is not in the registry")
    ] = False,
) -> None:
    """Create a site's node logins (password-file entries) and print each node's settings.

    Prints TOML on stdout (one ``["site/node"]`` table per node, readable by
    ``sumpwatch simulate --credentials``); the passwords are shown only this once.
    Reload Mosquitto afterwards (SIGHUP) so it rereads the password file.
    """
    registry = load_registry(sites)
    site = registry.get(site_id)
    if site is None and not unknown_ok:
        raise typer.BadParameter(f"site {site_id!r} is not in {sites} (or pass --unknown-ok)")
    known = [n.id for n in site.nodes] if site is not None else []
    node_ids = list(nodes or known)
    strangers = [n for n in node_ids if n not in known]
    if strangers and not unknown_ok:
        raise typer.BadParameter(f"site {site_id!r} has no node(s) {strangers}; known: {known}")
    try:
        creds = provision_nodes(
            passwd_file,
            site_id,
            node_ids,
            host=host,
            port=port,
            tls_port=tls_port,
            ca_file=ca_file,
            rotate=rotate,
        )
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from exc
    typer.echo(f"# {len(creds)} node login(s) for site {site_id}; written to {passwd_file}")
    typer.echo("# Keep this output secret; reload Mosquitto (kill -HUP) to apply.\n")
    for cred in creds:
        typer.echo(cred.to_toml())


#: The gateways' login name in the shipped ACL (deploy/mosquitto/acl). Not a secret:
#: gateways log in on their own listener, with a password only they know.
GATEWAY_USERNAME = "sumpwatch-gateway"


def provision_gateway(
    passwd_file: Annotated[
        Path,
        typer.Option(
            "--passwd-file", help="The gateways' Mosquitto password file (passwd.gateway)"
        ),
    ] = Path("deploy/mosquitto/passwd.gateway"),
    username: Annotated[
        str, typer.Option(help="Gateway login (the ACL grants sumpwatch-gateway)")
    ] = GATEWAY_USERNAME,
    rotate: Annotated[bool, typer.Option(help="Replace an existing password")] = False,
) -> None:
    """Create the gateways' login in their own password file; print it for .env.

    Gateways log in on the broker's gateway listener (1884), which reads only this
    file, so no node password opens a gateway session (docs/security.md). Prints
    ``SUMPWATCH_MQTT_USERNAME=...`` and ``SUMPWATCH_MQTT_PASSWORD=...`` lines for
    ``.env``; the password is shown only this once.
    """
    password = secrets.token_urlsafe(24)
    try:
        set_password(passwd_file, username, password, replace=rotate)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from exc
    typer.echo(f"# gateway login written to {passwd_file}; add to .env, keep secret:")
    typer.echo(f"SUMPWATCH_MQTT_USERNAME={username}")
    typer.echo(f"SUMPWATCH_MQTT_PASSWORD={password}")


#: Home Assistant's login in the shipped ACL: it may read discovery, the per-site
#: state and node availability, and write nothing of ours (docs/home-assistant.md).
HOMEASSISTANT_USERNAME = "homeassistant"


def provision_homeassistant(
    passwd_file: Annotated[
        Path,
        typer.Option(
            "--passwd-file",
            help="The node listeners' Mosquitto password file (passwd): Home Assistant "
            "connects where the nodes do, never on the gateways' listener",
        ),
    ] = Path("deploy/mosquitto/passwd"),
    host: Annotated[str, typer.Option(help="Broker host name Home Assistant connects to")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="Plain MQTT port (8883 with TLS)")] = 1883,
    rotate: Annotated[bool, typer.Option(help="Replace an existing password")] = False,
) -> None:
    """Create Home Assistant's broker login and print what its MQTT integration asks for.

    The login is ``homeassistant`` (the name the shipped ACL grants: read-only), in the
    node listeners' password file, where ``use_username_as_clientid`` makes its client
    id its name. The password is shown only this once; reload Mosquitto (SIGHUP).
    """
    password = secrets.token_urlsafe(24)
    try:
        set_password(passwd_file, HOMEASSISTANT_USERNAME, password, replace=rotate)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from exc
    typer.echo(f"# Home Assistant login written to {passwd_file}; reload Mosquitto (kill -HUP).")
    typer.echo("# In Home Assistant: Settings > Devices & services > Add integration > MQTT:")
    typer.echo(f"broker={host}")
    typer.echo(f"port={port}")
    typer.echo(f"username={HOMEASSISTANT_USERNAME}")
    typer.echo(f"password={password}")
