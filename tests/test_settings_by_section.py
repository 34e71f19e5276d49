"""Each stage gets its section only (issue 13.5), read from the source: the whole
:class:`~gateway.settings.Settings` tree is imported only where settings are loaded
and handed out (the composition root, and each package's command module)."""

from __future__ import annotations

import ast
from pathlib import Path

from gateway.settings import REPO_DIR

#: Where the whole tree may be named: it is built or loaded there.
COMPOSITION = {"gateway/settings.py", "gateway/runtime.py", "gateway/app.py", "gateway/cli.py"}


def _names_settings(path: Path) -> bool:
    return any(
        isinstance(node, ast.ImportFrom)
        and node.module == "gateway.settings"
        and any(alias.name == "Settings" for alias in node.names)
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
    )


def test_only_the_composition_root_and_the_commands_import_the_settings_tree() -> None:
    offenders = [
        rel
        for folder in ("gateway", "alerts")
        for path in sorted((REPO_DIR / folder).rglob("*.py"))
        if (rel := str(path.relative_to(REPO_DIR))) not in COMPOSITION
        and path.name != "cli.py"  # a command loads the settings file it is given
        and _names_settings(path)
    ]
    assert offenders == []
