"""The site registry: which sites exist, their jurisdiction, nodes and installation."""

from gateway.registry.models import (
    Contact,
    DischargeDestination,
    Installation,
    NodeConfig,
    PitConfig,
    SiteConfig,
    SiteRegistry,
    Waiver,
    load_registry,
)

__all__ = [
    "Contact",
    "DischargeDestination",
    "Installation",
    "NodeConfig",
    "PitConfig",
    "SiteConfig",
    "SiteRegistry",
    "Waiver",
    "load_registry",
]
