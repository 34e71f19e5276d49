"""The secret key that keys session and API-token HMACs: where it comes from.

``settings.api.secret_key`` (``SUMPWATCH_API__SECRET_KEY``) when it is a real one; else the
file ``<data_dir>/secret_key`` (mode 600), which ``sumpwatch demo`` writes on its
first start so the demo's tokens and sessions survive restarts and ``sumpwatch user
token`` (same data dir) makes tokens the running demo accepts. A placeholder key
with no such file is refused at start: a key everyone knows keys nothing, and an
operator who sets a real one later would find every session and token void that day.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from pathlib import Path

from gateway.errors import ConfigError
from gateway.settings import ApiSettings

log = logging.getLogger(__name__)

#: Values shipped in the code and in .env.example: never a real key.
PLACEHOLDER_KEYS = frozenset({"change-me-in-production", "change-me-to-a-long-random-string"})
KEY_FILE = "secret_key"


def key_file(data_dir: Path) -> Path:
    """Where a data dir keeps its generated key."""
    return data_dir / KEY_FILE


def is_placeholder(api: ApiSettings) -> bool:
    """True when ``api.secret_key`` is one of the published placeholders."""
    return api.secret_key.get_secret_value() in PLACEHOLDER_KEYS


def _read(path: Path) -> str:
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        path.chmod(0o600)
        log.warning("%s was readable by others; now mode 600", path)
    value = path.read_text().strip()
    if not value:
        raise ConfigError(f"{path} is empty; delete it to have a new key made")
    return value


def resolve_secret_key(api: ApiSettings, data_dir: Path) -> str:
    """The key to use (``api.secret_key``, or the one ``data_dir`` keeps), or
    ConfigError when only a placeholder is configured."""
    if not is_placeholder(api):
        return api.secret_key.get_secret_value()
    path = key_file(data_dir)
    if path.exists():
        return _read(path)
    raise ConfigError(
        "secret_key is the published placeholder: set SUMPWATCH_API__SECRET_KEY to a long random "
        "value (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))') "
        f"or put one in {path} (mode 600)"
    )


def ensure_key_file(data_dir: Path) -> str:
    """The data dir's key, made (32 random bytes, mode 600) if it has none yet."""
    path = key_file(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read(path)
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_urlsafe(32) + "\n")
    return _read(path)
