"""The wheel runs outside a checkout: templates, static files and example files are
package data, found from site-packages (importlib.resources), not from the source tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from gateway.settings import REPO_DIR

pytestmark = pytest.mark.slow

#: Runs inside the fresh venv, from an empty folder: start the app, read pages.
PROBE = """
import json, sys
from fastapi.testclient import TestClient
import gateway, gateway.pages
from gateway.app import create_app
from gateway.settings import Settings

settings = Settings(_env_file=None, data_dir="data", api={"auth_enabled": True})
with TestClient(create_app(settings)) as client:
    login = client.get("/login")
    css = client.get("/static/css/app.css")
print(json.dumps({
    "gateway": gateway.__file__,
    "templates": str(gateway.pages.TEMPLATES_DIR),
    "sites_file": str(Settings(_env_file=None).sites_file),
    "login": [login.status_code, "<form" in login.text],
    "css": [css.status_code, len(css.content)],
}))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(REPO_DIR)],
        check=True, timeout=300,
    )  # fmt: skip
    (built,) = out.glob("sumpwatch-*.whl")
    return built


def test_the_wheel_carries_templates_static_files_and_example_files(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "dashboards/web/templates/login.html" in names
    assert "dashboards/web/static/css/app.css" in names
    assert "gateway/examples/sites.example.toml" in names
    assert "gateway/rules/packs/edgar.toml" in names


def test_the_installed_wheel_serves_its_pages_from_an_empty_folder(
    wheel: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            text=True,
        ).strip()
    )
    # The dependencies come from this environment (no network in tests); a plain path
    # entry, so this environment's editable install of the checkout is not loaded.
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
         "--no-deps", "--no-index", str(wheel)],
        check=True, timeout=300,
    )  # fmt: skip
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUMPWATCH_")}
    env.pop("PYTHONPATH", None)
    # With sign-in on, the app refuses the published placeholder key (issue 12).
    env["SUMPWATCH_API__SECRET_KEY"] = "a-real-key-for-the-packaging-test-0123456789"
    result = subprocess.run(
        [str(python), "-c", PROBE], cwd=empty, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    for key in ("gateway", "templates", "sites_file"):
        assert seen[key].startswith(str(site)), (key, seen[key])
    assert seen["login"] == [200, True]
    assert seen["css"][0] == 200 and seen["css"][1] > 0
