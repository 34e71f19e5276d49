"""Accounts, roles and the access scope they grant (frozen value types).

Three roles (issue 8): a *homeowner* sees only the sites listed on their account,
*public-works* staff see every site of the jurisdictions on their account, an
*admin* sees everything and alone may reach operational endpoints (dead letters,
metrics) that belong to no site.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Literal, TypeVar

from gateway.registry import SiteConfig, SiteRegistry

T = TypeVar("T")


class Role(StrEnum):
    """What an account may see and do."""

    HOMEOWNER = "homeowner"
    PUBLIC_WORKS = "public_works"
    ADMIN = "admin"


@dataclass(frozen=True, slots=True)
class User:
    """A stored account (without its password hash)."""

    id: int
    username: str
    role: Role
    display_name: str = ""
    site_ids: tuple[str, ...] = ()
    jurisdictions: tuple[str, ...] = ()
    disabled: bool = False
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ApiToken:
    """An API token's metadata; the secret itself is shown once, at creation."""

    id: int
    user_id: int
    name: str
    prefix: str  # the first characters, so a person can tell tokens apart
    created_at: datetime
    last_used_at: datetime | None = None
    revoked: bool = False


#: How a request proved who it is.
AuthVia = Literal["session", "token", "open"]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking, and what they may see."""

    username: str
    role: Role
    site_ids: frozenset[str] = frozenset()
    jurisdictions: frozenset[str] = frozenset()
    via: AuthVia = "session"
    user_id: int | None = None
    csrf_token: str | None = None
    display_name: str = ""

    @classmethod
    def of(cls, user: User, via: AuthVia, csrf_token: str | None = None) -> Principal:
        """The principal of a stored user."""
        return cls(
            username=user.username,
            role=user.role,
            site_ids=frozenset(user.site_ids),
            jurisdictions=frozenset(user.jurisdictions),
            via=via,
            user_id=user.id,
            csrf_token=csrf_token,
            display_name=user.display_name or user.username,
        )

    @property
    def is_admin(self) -> bool:
        """Sees everything."""
        return self.role is Role.ADMIN

    @property
    def is_staff(self) -> bool:
        """Public works or admin: may assign and resolve alerts, see the console."""
        return self.role in (Role.PUBLIC_WORKS, Role.ADMIN)

    def can_see(self, site: SiteConfig) -> bool:
        """True if this principal may see the site's data."""
        if self.role is Role.ADMIN:
            return True
        if self.role is Role.PUBLIC_WORKS:
            return site.jurisdiction in self.jurisdictions
        return site.id in self.site_ids

    def can_see_jurisdiction(self, jurisdiction: str) -> bool:
        """True if this principal may see a jurisdiction's console."""
        return self.role is Role.ADMIN or (
            self.role is Role.PUBLIC_WORKS and jurisdiction in self.jurisdictions
        )


#: The principal of every request when ``auth_enabled`` is off (tests, local dev).
OPEN_ACCESS = Principal(
    username="anonymous", role=Role.ADMIN, via="open", display_name="Open access"
)


@dataclass(frozen=True, slots=True)
class Scope:
    """The sites a principal may see, for filtering list endpoints.

    A router that lists things of many sites takes a ``ScopeDep`` and filters with
    :meth:`filter` (or passes :meth:`site_ids` to its query).
    """

    principal: Principal
    registry: SiteRegistry

    def allows(self, site_id: str) -> bool:
        """True if the site exists and the principal may see it."""
        site = self.registry.get(site_id)
        return site is not None and self.principal.can_see(site)

    def sites(self) -> list[SiteConfig]:
        """Every visible site, in registry order."""
        return [s for s in self.registry if self.principal.can_see(s)]

    def site_ids(self) -> frozenset[str] | None:
        """Visible site ids, or None for "all" (admin)."""
        if self.principal.is_admin:
            return None
        return frozenset(s.id for s in self.sites())

    def jurisdictions(self) -> list[str]:
        """Visible jurisdictions, sorted."""
        return sorted({s.jurisdiction for s in self.sites()})

    def filter(self, items: Iterable[T], site_of: Callable[[T], str]) -> list[T]:
        """Keep the items whose site the principal may see."""
        return [item for item in items if self.allows(site_of(item))]
