"""FastAPI dependencies: the gateway's Services (gateway.services) and access control.

Every route is already behind ``access_control`` (app-wide): it authenticates and
checks any ``{site_id}`` / ``{alert_id}`` / ``{jurisdiction}`` path parameter and
``site`` / ``site_id`` / ``jurisdiction`` query parameter against the caller's scope.
A route that lists things of many sites takes ``scope: ScopeDep`` and filters with
``scope.filter(items, lambda x: x.site_id)`` (or passes ``scope.site_ids()`` to its
query); without ``ScopeDep`` or ``PrincipalDep`` it is admin-only. ``StaffDep``
limits a route to public works and admins. See docs/ui.md, "Access control".
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import Depends, HTTPException
from pydantic import AfterValidator

from gateway.accounts.access import (
    PrincipalDep,
    ScopeDep,
    StaffDep,
    access_control,
    register_resolver,
    require_role,
)
from gateway.registry import SiteConfig
from gateway.services import Services, ServicesDep, get_services


def get_site(site_id: str, services: ServicesDep) -> SiteConfig:
    """The site named in the path, or 404."""
    site = services.registry.get(site_id)
    if site is None:
        raise HTTPException(status_code=404, detail=f"no site with id {site_id!r}")
    return site


SiteDep = Annotated[SiteConfig, Depends(get_site)]


__all__ = [
    "PrincipalDep",
    "ScopeDep",
    "Services",
    "ServicesDep",
    "SiteDep",
    "StaffDep",
    "access_control",
    "get_services",
    "get_site",
    "register_resolver",
    "require_role",
]


def _utc_time(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("needs a time zone offset, e.g. 2026-11-29T10:00:00Z")
    try:
        utc = value.astimezone(UTC)
    except OverflowError as exc:  # e.g. 0001-01-01T00:00+00:01 is before year 1 in UTC
        raise ValueError("is out of range") from exc
    if not 1970 <= utc.year <= 9999:
        raise ValueError("must fall between 1970 and 9999")
    return utc


#: A time in a query string: RFC 3339 with an offset, returned in UTC (else 422).
UtcTime = Annotated[datetime, AfterValidator(_utc_time)]
#: Offsets beyond this are refused (422) instead of overflowing SQLite's integers.
MAX_OFFSET = 1_000_000_000
