"""FastAPI dependencies: the running Runtime, taken from app.state."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request

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
