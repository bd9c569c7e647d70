"""A BLTK-Developer-like session on DiskSim 4.0's C sources (already built once by the
setup): cycles of reading a few source files as an editor opens them, typing with human
idle gaps, saving the way vim does (write a new file, fsync, rename over the old one, the
swap file beside it), and an incremental `make`. Seeded, so every run does the same edits
in the same order with the same pauses.

Time compression: BLTK's developer types at human speed for hours and compiles a kernel;
here a cycle's think/typing pauses are drawn from 2-12 s (a tenth of BLTK's minutes of
editing between builds) and there are CYCLES cycles, so the capture takes minutes.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

SEED = 7
CYCLES = 8
PAUSE_S = (2.0, 12.0)


def save_like_vim(path: Path, text: str) -> None:
    swap = path.with_name(f".{path.name}.swp")
    swap.write_bytes(os.urandom(4096))  # vim's swap file appears on the first change
    tmp = path.with_name(f"{path.name}~")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    swap.unlink()


def main(src: Path) -> None:
    rng = random.Random(SEED)
    sources = sorted((src / "src").glob("*.c"))
    headers = sorted((src / "src").glob("*.h"))
    for cycle in range(CYCLES):
        target = rng.choice(sources)
        for f in [target, *rng.sample(headers, 3), *rng.sample(sources, 2)]:
            f.read_bytes()  # the editor opens the file and a few it looks things up in
        time.sleep(rng.uniform(*PAUSE_S))  # reading, thinking, typing
        text = target.read_text(errors="replace")
        save_like_vim(target, text + f"\n/* edit {cycle}: {rng.getrandbits(64):016x} */\n")
        time.sleep(rng.uniform(*PAUSE_S) / 2)
        r = subprocess.run(["make", "-j1"], cwd=src / "src", capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"make failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        time.sleep(rng.uniform(*PAUSE_S))  # looking at the build's output


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
