"""Registries written for contract v1 before today's changes (the simulator's for each
scenario, and the demo's) still load: fields became optional (unknown facts) and new
ones were added, none was removed or renamed. An installed fleet's registry, or one an
independent model of other houses writes, must not stop the gateway at start."""

from pathlib import Path

import pytest

from gateway.registry import load_registry

OLD = sorted((Path(__file__).parent / "data" / "registries-v1").glob("*.toml"))


def test_the_old_registries_are_all_here() -> None:
    assert len(OLD) == 13


@pytest.mark.parametrize("path", OLD, ids=[p.stem for p in OLD])
def test_a_registry_written_before_today_still_loads(path: Path) -> None:
    registry = load_registry(path)
    assert len(registry) >= 1
    for site in registry:
        assert site.nodes  # every site keeps its nodes and their kinds
