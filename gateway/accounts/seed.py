"""Seed accounts from a TOML file (``[[user]]`` tables), e.g. the demo's users.

Only for demos and first setup: the file holds plain passwords. Existing users
are left as they are, so seeding twice changes nothing.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from gateway.accounts.models import Role, User
from gateway.accounts.repository import AccountStore
from gateway.tomlfile import load_toml


class SeedUser(BaseModel):
    """One ``[[user]]`` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    username: str = Field(min_length=1, max_length=64)
    password: str
    role: Role
    display_name: str = ""
    sites: tuple[str, ...] = ()
    jurisdictions: tuple[str, ...] = ()


class _SeedFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: list[SeedUser] = Field(default_factory=list)


def load_seed(path: Path) -> list[SeedUser]:
    """Read and validate a users file."""
    return load_toml(path, _SeedFile, "users file").user


async def seed_users(store: AccountStore, users: list[SeedUser]) -> list[User]:
    """Create the users that do not exist yet; return the ones created."""
    created = []
    for u in users:
        if await store.get_user(u.username) is not None:
            continue
        created.append(
            await store.add_user(
                u.username,
                u.password,
                u.role,
                site_ids=u.sites,
                jurisdictions=u.jurisdictions,
                display_name=u.display_name,
            )
        )
    return created


def describe_seed(users: list[SeedUser]) -> list[str]:
    """One line per seeded account, for the demo to print at start-up (demo passwords)."""
    lines = []
    for u in users:
        scope = ", ".join(u.sites or u.jurisdictions) or "everything"
        lines.append(f"{u.role.value:<13} {u.username:<10} password {u.password:<18} sees {scope}")
    return lines
