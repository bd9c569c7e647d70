import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def shared_dir() -> Path:
    return Path(os.environ.get("WATTIO_SHARED", ROOT.parent / "shared"))


@pytest.fixture
def wattio_cli(tmp_path_factory):
    """Run the `wattio` command; returns the CompletedProcess.

    Without `cwd` it runs in an empty directory of its own, so a default output directory
    (`wattio-out/`) never lands in, or is read from, the checkout.
    """
    default_cwd = tmp_path_factory.mktemp("cwd")

    def run(*args, check=True, cwd=None):
        p = subprocess.run(
            [sys.executable, "-m", "wattio.cli", *map(str, args)],
            capture_output=True,
            text=True,
            cwd=default_cwd if cwd is None else cwd,
            check=False,
        )
        if check and p.returncode != 0:
            raise AssertionError(f"wattio {' '.join(map(str, args))} failed ({p.returncode}):\n{p.stderr}")
        return p

    return run
