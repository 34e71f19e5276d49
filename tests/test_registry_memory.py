"""Issue 17 item 2: a large registry holds the parts its sites repeat once."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from gateway.registry.models import SiteConfig, load_registry
from gateway.settings import REPO_DIR
from gateway.tomlfile import load_toml

DEMO = REPO_DIR / "deploy" / "sites.example.toml"


def _copies(tmp_path: Path, n: int) -> Path:
    """``n`` copies of the demo's first site under other ids and owners."""
    demo = DEMO.read_text()
    first = demo.index("[[site]]")
    block = demo[first : demo.index("[[site]]", first + 1)]
    site_id = block.split('id = "', 1)[1].split('"', 1)[0]
    path = tmp_path / "sites.toml"
    path.write_text(
        "".join(
            block.replace(f'id = "{site_id}"', f'id = "s{i}"', 1).replace(
                f"owner-{site_id}@", f"owner-s{i}@"
            )
            for i in range(n)
        )
    )
    return path


def test_sites_with_equal_nodes_pit_and_installation_share_one_object_of_each(
    tmp_path: Path,
) -> None:
    a, b = list(load_registry(_copies(tmp_path, 2)))
    assert a.nodes is b.nodes
    assert a.pit is b.pit
    assert a.installation is b.installation
    assert a.contacts is not b.contacts  # each owner's own
    assert a.contacts[0].email != b.contacts[0].email


def test_the_shared_sites_equal_the_sites_as_parsed(tmp_path: Path) -> None:
    from gateway.registry.models import _RegistryFile

    path = _copies(tmp_path, 3)
    parsed = load_toml(path, _RegistryFile, "site registry").site
    loaded = list(load_registry(path))
    assert loaded == parsed
    for mine, theirs in zip(loaded, parsed, strict=True):
        assert mine.model_fields_set == theirs.model_fields_set
        assert mine.model_dump() == theirs.model_dump()
        assert hash(mine.nodes) == hash(theirs.nodes)


def test_the_demo_registry_loads_the_same_sites_shared_or_not() -> None:
    from gateway.registry.models import _RegistryFile

    parsed: list[SiteConfig] = load_toml(DEMO, _RegistryFile, "site registry").site
    assert list(load_registry(DEMO)) == parsed


def test_a_thousand_copied_sites_take_under_3_kb_each(tmp_path: Path) -> None:
    path = _copies(tmp_path, 1000)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        registry = load_registry(path)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(registry) == 1000
    # Parsed without sharing, each held ~5.5 kB (bench/site_state.py).
    assert held / 1000 < 3000
