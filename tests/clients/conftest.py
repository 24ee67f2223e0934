"""The Node.js clients' fixture: `node`, with the pinned npm packages installed beside them.

The packages are pinned in `node/package.json` and `package-lock.json`; `npm ci` runs there
when one of them is missing from `node_modules` (the npm registry must be reachable then).
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).parent / "node"


@pytest.fixture(scope="session")
def node() -> str:
    """The `node` executable, every package of `node/package.json` installed."""
    executable = shutil.which("node")
    if executable is None or shutil.which("npm") is None:
        pytest.fail("Node.js and npm are needed to run the Node clients (README: Tests)")
    packages = json.loads((NODE_DIR / "package.json").read_text())["dependencies"]
    if not all((NODE_DIR / "node_modules" / name).is_dir() for name in packages):
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=NODE_DIR,
            check=True,
            timeout=600,
        )
    return executable
