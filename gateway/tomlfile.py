"""Reading a TOML file the project's way: one loader for settings, registries, rule
packs, accounts, alert routing and scenarios, so every such file fails alike, with a
``ConfigError`` that names the file, what it is and what is wrong (kernel: imports
only ``gateway.errors``)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from gateway.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """The file's tables, or ConfigError ("cannot read <what> <path>: ...", "<what>
    <path> is not valid TOML: ...")."""
    try:
        return tomllib.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} {path} is not valid TOML: {exc}") from exc


def validated(data: dict[str, Any], model: type[M], path: Path, what: str) -> M:
    """``data`` as ``model``, or ConfigError ("<what> <path> is invalid: ...")."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{what} {path} is invalid:\n{exc}") from exc


def load_toml(path: Path, model: type[M], what: str) -> M:
    """Read and validate one TOML file."""
    return validated(read_toml(path, what), model, path, what)
