"""`wattio example`: the example files shipped inside the package, so the tutorial runs
from an empty directory with nothing but wattio installed."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path


def examples() -> dict[str, str]:
    """Example file name -> its text."""
    root = resources.files("wattio") / "examples"
    return {p.name: p.read_text() for p in sorted(root.iterdir(), key=lambda p: p.name)
            if p.name.endswith((".toml", ".py"))}


def _about(text: str) -> str:
    """An example's first comment or docstring line."""
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip().strip('"').strip()
        if line:
            return line
    return ""


def add_commands(sub) -> None:
    p = sub.add_parser(
        "example",
        help="print or write the shipped example configs and functions",
        description="Without NAME: list the examples. With NAMEs: print them to stdout, or with "
        "--out DIR write them into DIR (existing files are not overwritten).",
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="example file name (see the list)")
    p.add_argument("--out", help="write the files into this directory instead of printing them")
    p.set_defaults(func=cmd_example)


def cmd_example(args) -> int:
    have = examples()
    if not args.names:
        for name, text in have.items():
            print(f"{name:<22} {_about(text)}")
        return 0
    unknown = [n for n in args.names if n not in have]
    if unknown:
        raise ValueError(f"no example {', '.join(map(repr, unknown))} (have: {', '.join(have)})")
    if args.out is None:
        for n in args.names:
            sys.stdout.write(have[n])
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for n in args.names:
        path = out / n
        if path.exists():
            raise ValueError(f"{path}: exists (not overwritten)")
        path.write_text(have[n])
        print(f"wrote {path}")
    return 0
