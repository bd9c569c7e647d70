"""Output directories that never mix runs.

A run (and a sweep, the demo, a live session) writes into a fresh temporary sibling of its
output directory and, once done, renames it into place, so ``OUT`` never holds one run's
``summary.json`` beside another run's tables or report. A directory is only ever replaced if
wattio wrote it (it holds the marker file, or a ``summary.json``) or it is empty: anything
else is refused rather than deleted. The marker holds a random id of the run that wrote the
directory; the Python API reads tables only while the id is still its run's.

The replacement is two renames (old out of the way, new into place): between them ``OUT``
is briefly absent, never mixed.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path

MARKER = ".wattio-output"


def run_id(out: str | Path) -> str | None:
    """The id of the run whose outputs ``out`` holds (None if wattio did not write it)."""
    try:
        return json.loads((Path(out) / MARKER).read_text())["run"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_replaceable(out: str | Path) -> bool:
    """True if ``out`` holds outputs that a new run would replace, False if it does not exist
    or is empty; raises ValueError if it holds anything wattio did not write."""
    out = Path(out)
    if not out.exists():
        return False
    if not out.is_dir():
        raise ValueError(f"{out}: exists and is not a directory; choose another output directory")
    entries = sorted(p.name for p in out.iterdir())
    if not entries:
        return False
    if MARKER in entries or "summary.json" in entries:
        return True
    shown = ", ".join(entries[:5]) + (f", … ({len(entries)} in all)" if len(entries) > 5 else "")
    raise ValueError(
        f"{out}: not a wattio output directory (it holds {shown}); refusing to replace it: "
        "choose another output directory"
    )


@contextmanager
def fresh_output(out: str | Path):
    """Yields a fresh temporary directory next to ``out`` to write a run's outputs into. When
    the block ends normally, or with an error after a ``summary.json`` was written (a failed
    run's outputs are kept for inspection), the directory replaces ``out``; otherwise it is
    removed and ``out`` is left as it was."""
    out = Path(out)
    check_replaceable(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    (tmp / MARKER).write_text(json.dumps({"run": uuid.uuid4().hex}) + "\n")
    try:
        yield tmp
    except BaseException:
        if (tmp / "summary.json").exists():
            _replace(tmp, out)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    _replace(tmp, out)


def _replace(new: Path, out: Path) -> None:
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
        os.rmdir(old)
        os.rename(out, old)
    os.rename(new, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
