"""The web-server workload: a Zipf-popular file set served by apache2, driven by httperf.

`web.py fileset DIR` makes the file set (untraced setup); `web.py serve DIR` runs apache2 on
it and replays the request plan: GETs through httperf at a fixed rate, and concurrently the
plan's updates (a file rewritten in place, as a content upload would), spread evenly over
the same time. Everything is a pure function of SEED.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

SEED = 42
FILES = 10_000
UNIQUE_BYTES = 255 << 20  # PARAID's web trace: 255 MB of unique data
REQUESTS = 95_000
WRITE_FRACTION = 0.02  # and 98 % reads
ZIPF_ALPHA = 0.9
RATE = 1_000  # GETs per second
CALLS = 10  # GETs per (persistent) connection: 9,310 connections, not 93,100 in TIME_WAIT
PORT = 8088
#: The document root inside the file system: `www` (default), or `.` (WEB_DOCROOT=.): the
#: site's 100 directories then sit at the file system's top level, as on a content volume
#: mounted as the document root, and ext4's Orlov allocator spreads them over the volume.
DOCROOT = os.environ.get("WEB_DOCROOT", "www")
if DOCROOT not in ("www", "."):
    sys.exit(f"WEB_DOCROOT: expected 'www' or '.', got {DOCROOT!r}")

CONF = """ServerRoot /usr/lib/apache2
Listen 127.0.0.1:{port}
ServerName localhost
PidFile {run}/httpd.pid
LoadModule mpm_event_module modules/mod_mpm_event.so
LoadModule authz_core_module modules/mod_authz_core.so
User www-data
Group www-data
DocumentRoot {docroot}
<Directory {docroot}>
  Require all granted
</Directory>
ErrorLog {root}/logs/error.log
LogFormat "%h %l %u %t \\"%r\\" %>s %b" common
CustomLog {root}/logs/access.log common
"""


def sizes(rng: random.Random) -> list[int]:
    """Heavy-tailed (lognormal) file sizes, rescaled to sum to exactly UNIQUE_BYTES."""
    raw = [rng.lognormvariate(9.5, 1.5) for _ in range(FILES)]
    scale = UNIQUE_BYTES / sum(raw)
    s = [max(1, int(x * scale)) for x in raw]
    s[0] += UNIQUE_BYTES - sum(s)
    return s


def plan(rng: random.Random) -> list[tuple[str, int]]:
    """(op, file) for every request: each file read once (so the footprint is the whole
    set), the rest drawn from a Zipf popularity over a random ranking of the files."""
    ranking = list(range(FILES))
    rng.shuffle(ranking)
    weights = [1 / (r + 1) ** ZIPF_ALPHA for r in range(FILES)]
    writes = int(REQUESTS * WRITE_FRACTION)
    draws = rng.choices(ranking, weights=weights, k=REQUESTS - FILES)
    reqs = [("r", f) for f in range(FILES)] + [("r", f) for f in draws]
    rng.shuffle(reqs)
    for i in rng.sample(range(len(reqs)), writes):
        reqs[i] = ("w", reqs[i][1])
    return reqs


def uri_of(f: int) -> str:
    """File ``f``'s path under the document root (its URI without the leading slash)."""
    return f"d{f % 100:02d}/f{f:05d}.html"


def path_of(f: int) -> str:
    """File ``f``'s path under the file system's root."""
    return os.path.normpath(f"{DOCROOT}/{uri_of(f)}")


def fileset(root: Path) -> None:
    rng = random.Random(SEED)
    for f, n in enumerate(sizes(rng)):
        p = root / path_of(f)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(rng.randbytes(n))
    (root / "logs").mkdir(exist_ok=True)
    os.chmod(root / "logs", 0o777)


def serve(root: Path) -> None:
    rng = random.Random(SEED)
    sz = sizes(rng)
    reqs = plan(rng)
    gets = [f for op, f in reqs if op == "r"]
    puts = [f for op, f in reqs if op == "w"]
    run = Path("/tmp/wattio-web")
    run.mkdir(exist_ok=True)
    docroot = os.path.normpath(root / DOCROOT)
    (run / "httpd.conf").write_text(CONF.format(port=PORT, run=run, root=root, docroot=docroot))
    (run / "uris").write_bytes(b"".join(f"/{uri_of(f)}".encode() + b"\0" for f in gets))
    httpd = subprocess.Popen(["apache2", "-f", str(run / "httpd.conf"), "-DFOREGROUND"])
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{PORT}/{uri_of(0)}").read()
                break
            except OSError:
                time.sleep(0.1)
        span = len(gets) / RATE
        load = subprocess.Popen(
            ["httperf", "--hog", "--server", "127.0.0.1", "--port", str(PORT),
             f"--wlog=n,{run / 'uris'}", "--num-conns", str(len(gets) // CALLS), "--num-calls", str(CALLS),
             "--rate", str(RATE / CALLS), "--timeout", "10"],
            stdout=subprocess.PIPE, text=True,
        )

        def updates() -> None:
            t0 = time.monotonic()
            wrng = random.Random(SEED + 1)
            for i, f in enumerate(puts):
                time.sleep(max(0.0, t0 + (i + 0.5) * span / len(puts) - time.monotonic()))
                with open(root / path_of(f), "r+b") as fh:
                    fh.write(wrng.randbytes(sz[f]))

        w = threading.Thread(target=updates)
        w.start()
        out, _ = load.communicate()
        w.join()
        print(out, file=sys.stderr)
        if load.returncode != 0:
            sys.exit(f"httperf failed with status {load.returncode}")
    finally:
        httpd.terminate()
        httpd.wait()


if __name__ == "__main__":
    {"fileset": fileset, "serve": serve}[sys.argv[1]](Path(sys.argv[2]).resolve())
