"""FastAPI dependencies: the running Runtime, taken from app.state, and access control.

Every route is already behind ``access_control`` (app-wide): it authenticates and
checks any ``{site_id}`` / ``{alert_id}`` / ``{jurisdiction}`` path parameter and
``site`` / ``site_id`` / ``jurisdiction`` query parameter against the caller's scope.
A route that lists things of many sites takes ``scope: ScopeDep`` and filters with
``scope.filter(items, lambda x: x.site_id)`` (or passes ``scope.site_ids()`` to its
query); without ``ScopeDep`` or ``PrincipalDep`` it is admin-only. ``StaffDep``
limits a route to public works and admins. See docs/ui.md, "Access control".
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request

from gateway.accounts.access import (
    PrincipalDep,
    ScopeDep,
    StaffDep,
    access_control,
    register_resolver,
    require_role,
)
from gateway.registry import SiteConfig
from gateway.runtime import Runtime


def get_runtime(request: Request) -> Runtime:
    """The Runtime the lifespan built."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def get_site(site_id: str, runtime: RuntimeDep) -> SiteConfig:
    """The site named in the path, or 404."""
    site = runtime.registry.get(site_id)
    if site is None:
        raise HTTPException(status_code=404, detail=f"no site with id {site_id!r}")
    return site


SiteDep = Annotated[SiteConfig, Depends(get_site)]


__all__ = [
    "PrincipalDep",
    "RuntimeDep",
    "ScopeDep",
    "SiteDep",
    "StaffDep",
    "access_control",
    "get_runtime",
    "get_site",
    "register_resolver",
    "require_role",
]
