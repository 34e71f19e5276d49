"""Import direction of the state package and the alerts stage (issue 13.4), read from
the source: alerts reaches the gateway only through the kernel and the state
package's Database interface; the state package never imports a stage."""

from __future__ import annotations

import ast
from pathlib import Path

from gateway.settings import REPO_DIR

KERNEL = (
    "gateway.domain",
    "gateway.contract",
    "gateway.errors",
    "gateway.units",
    "gateway.tomlfile",
    "gateway.mqttconn",
    "gateway.aiotasks",
)


def _imports(folder: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        out[str(path.relative_to(REPO_DIR))] = names
    return out


def test_alerts_imports_only_the_kernel_and_the_state_interface() -> None:
    allowed = (*KERNEL, "gateway.state.database")
    bad = {
        path: sorted(m for m in mods if m.startswith("gateway") and m not in allowed)
        for path, mods in _imports(REPO_DIR / "alerts").items()
    }
    assert {p: m for p, m in bad.items() if m} == {}


def test_the_state_package_imports_no_stage() -> None:
    # The CLI module is composition (it reads Settings); everything else is state.
    allowed = (*KERNEL, "gateway.state")
    bad = {
        path: sorted(m for m in mods if m.startswith("gateway") and not m.startswith(allowed))
        for path, mods in _imports(REPO_DIR / "gateway" / "state").items()
        if not path.endswith("state/cli.py")
    }
    assert {p: m for p, m in bad.items() if m} == {}
