"""Screenshots of the HTML outputs: runs the demo, then renders one run's report.html and the
demo's comparison.html with headless Chromium (Debian package `chromium`) to PNG.

    python scripts/screenshots.py OUTDIR [--run server-fixed-5s] [--width 1050]

Writes OUTDIR/demo/ (the demo's outputs), OUTDIR/report.png and OUTDIR/comparison.png,
cropped to the page's content and reduced to a 256-colour palette (Pillow) so they stay
small enough to commit. Not part of CI: docs/outputs.md describes what the pictures show.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from wattio.demo import run_demo


def shoot(page: Path, png: Path, width: int, height: int = 8000) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("needs headless Chromium: apt-get install chromium")
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--window-size={width},{height}", f"--screenshot={png}", page.resolve().as_uri()],
        check=True, capture_output=True, timeout=120,
    )
    try:
        from PIL import Image, ImageChops
    except ImportError:
        return
    img = Image.open(png).convert("RGB")
    # Crop the blank space below the page's content (the window is taller than any page).
    box = ImageChops.difference(img, Image.new("RGB", img.size, "white")).getbbox()
    if box:
        img = img.crop((0, 0, width, min(box[3] + 20, img.height)))
    img.quantize(colors=256).save(png, optimize=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--run", default="server-fixed-5s", help="which demo run's report to render")
    ap.add_argument("--width", type=int, default=1050)
    ap.add_argument("--skip-demo", action="store_true", help="reuse OUTDIR/demo from a previous call")
    args = ap.parse_args()
    demo = args.out / "demo"
    if not args.skip_demo:
        run_demo(demo)
    shoot(demo / args.run / "report.html", args.out / "report.png", args.width)
    shoot(demo / "comparison.html", args.out / "comparison.png", args.width)
    for p in ("report.png", "comparison.png"):
        print(f"{args.out / p}: {(args.out / p).stat().st_size / 1024:.0f} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
