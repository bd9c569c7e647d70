"""An Office-like session (BLTK's Office workload stands behind it): a user opens OpenDocument
files (zip archives with content.xml, styles.xml, a thumbnail), types with human pauses, and
the suite autosaves and saves the way office suites do (a new archive written beside the old,
fsync, rename), sometimes exports a copy. Seeded; the pauses are compressed (see README).
"""

from __future__ import annotations

import os
import random
import sys
import time
import zipfile
from pathlib import Path

SEED = 11
DOCS = 6
ACTIONS = 40
PAUSE_S = (0.5, 6.0)


def words(rng: random.Random, n: int) -> str:
    return " ".join(
        "".join(rng.choice("etaoinshrdlucmfwyp") for _ in range(rng.randint(2, 9)))
        for _ in range(n)
    )


def save(path: Path, content: str, thumb: bytes) -> None:
    tmp = path.with_name(f"{path.name}.saving")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        z.writestr("content.xml", f"<office:text>{content}</office:text>")
        z.writestr("styles.xml", "<office:styles/>" * 200)
        z.writestr("Thumbnails/thumbnail.png", thumb)
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def lock(doc: Path) -> Path:
    return doc.with_name(f".~lock.{doc.name}#")


def setup(root: Path) -> None:
    rng = random.Random(SEED)
    for d in range(DOCS):
        save(root / f"doc{d}.odt", words(rng, rng.randint(5_000, 60_000)), rng.randbytes(20_000))


def session(root: Path) -> None:
    rng = random.Random(SEED + 1)
    open_doc = None
    text = ""
    for _ in range(ACTIONS):
        what = rng.random()
        if open_doc is None or what < 0.15:
            if open_doc is not None:
                lock(open_doc).unlink()
            open_doc = root / f"doc{rng.randrange(DOCS)}.odt"
            lock(open_doc).write_text("user,host,2026-11-23T16:00\n")  # the suite's lock file
            with zipfile.ZipFile(open_doc) as z:
                text = z.read("content.xml").decode()
        elif what < 0.75:
            text += " " + words(rng, rng.randint(20, 200))  # typing
            if rng.random() < 0.3:
                save(open_doc, text, rng.randbytes(20_000))  # autosave / Ctrl-S
        elif what < 0.85:
            export = open_doc.with_suffix(".pdf")
            export.write_bytes(text.encode() * 2)  # export a copy
        else:
            save(open_doc, text, rng.randbytes(20_000))
        time.sleep(rng.uniform(*PAUSE_S))


if __name__ == "__main__":
    {"setup": setup, "session": session}[sys.argv[1]](Path(sys.argv[2]).resolve())
