"""`wattio capture memory`: real programs under the wattio-mem Valgrind tool, records checked
exactly (addresses, sizes, old and new bytes, process and mapping events), and the cache
model against hand-computed hit/miss/write-back counts."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess

import pyarrow.parquet as pq
import pytest
from wattio import cli
from wattio.cli_capture_memory import capture, tool_source

pytestmark = pytest.mark.skipif(
    shutil.which("valgrind") is None or shutil.which("gcc") is None,
    reason="needs valgrind and gcc (scripts/apt-packages.txt)",
)

FILL, WRITEBACK, LOAD, STORE, START, EXIT, MAP, UNMAP, MARK = range(9)
MAP_R, MAP_W, MAP_BRK = 1, 2, 32

# Stores known values at known places (a line-aligned zeroed array), overwrites one, then
# maps and unmaps a large block through malloc/free. Each mark carries an address or a
# phase number; the tool empties the caches at each mark.
PROBE = r"""
#include <stdint.h>
#include <stdlib.h>
#include "wattio_mem.h"

static uint8_t buf[256] __attribute__((aligned(64)));

int main(void) {
    WATTIO_MEM_MARK((uintptr_t)buf);
    *(volatile uint64_t *)(buf + 0) = 0x1122334455667788ull;
    *(volatile uint32_t *)(buf + 8) = 0xdeadbeefu;
    *(volatile uint8_t *)(buf + 12) = 0xa5;
    *(volatile uint16_t *)(buf + 64) = 0xbeef;
    *(volatile uint64_t *)(buf + 0) = 0x0102030405060708ull;
    WATTIO_MEM_MARK(2);
    char *volatile small = malloc(100);
    char *volatile big = malloc(1 << 20);
    big[0] = 1;
    WATTIO_MEM_MARK((uintptr_t)big);
    free(big);
    free(small);
    WATTIO_MEM_MARK(3);
    return 3;
}
"""

# Three access patterns over a page-aligned array, for a 1 KiB 2-way L1 and a 4 KiB 4-way
# L2 of 64 B lines (8 and 16 sets):
#  A  one byte written per line over 16 KiB (256 lines)
#  B  2 KiB read twice at a 64 B stride (32 lines: fit the L2, not the L1)
#  C  5 lines 1 KiB apart (all in L2 set 0, 4 ways) read twice
STRIDE = r"""
#include <stdint.h>
#include "wattio_mem.h"

static uint8_t arr[16384] __attribute__((aligned(4096)));

int main(void) {
    volatile uint8_t *a = arr;
    unsigned sum = 0;
    WATTIO_MEM_MARK((uintptr_t)arr);
    for (int i = 0; i < 16384; i += 64) a[i] = 1;
    WATTIO_MEM_MARK(2);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 2048; i += 64) sum += a[i];
    WATTIO_MEM_MARK(3);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 5; i++) sum += a[i * 1024];
    WATTIO_MEM_MARK(4);
    return sum == 64 + 10 ? 0 : 1;
}
"""


def _compile(tmp_path, name, source):
    c = tmp_path / f"{name}.c"
    c.write_text(source)
    exe = tmp_path / name
    subprocess.run(
        ["gcc", "-O2", "-I", str(tool_source()), str(c), "-o", str(exe)], check=True
    )
    return exe


def _rows(path):
    return pq.read_table(path).to_pylist()


def _between(rows, first_mark_value, last_mark_value):
    """Rows strictly between the mark carrying `first_mark_value` and the next mark carrying
    `last_mark_value`."""
    marks = [i for i, r in enumerate(rows) if r["kind"] == MARK]
    lo = next(i for i in marks if rows[i]["addr"] == first_mark_value)
    hi = next(i for i in marks if i > lo and rows[i]["addr"] == last_mark_value)
    return rows[lo + 1 : hi]


def _in(rows, base, length, kinds):
    return [r for r in rows if r["kind"] in kinds and base <= r["addr"] < base + length]


def _mark_values(rows):
    return [r["addr"] for r in rows if r["kind"] == MARK]


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("probe")
    return _compile(tmp, "probe", PROBE)


def test_uncached_stores_carry_exact_old_and_new_bytes(probe, tmp_path):
    out = tmp_path / "raw.parquet"
    status, _ = capture([str(probe)], out, cache=False)
    assert status == 3
    rows = _rows(out)
    buf = _mark_values(rows)[0]
    assert buf % 64 == 0
    stores = _in(_between(rows, buf, 2), buf, 256, {STORE})
    got = [(r["addr"] - buf, r["size"], r["old"], r["new"]) for r in stores]
    assert got == [
        (0, 8, bytes(8), bytes.fromhex("8877665544332211")),
        (8, 4, bytes(4), bytes.fromhex("efbeadde")),
        (12, 1, b"\0", b"\xa5"),
        (64, 2, bytes(2), b"\xef\xbe"),
        (0, 8, bytes.fromhex("8877665544332211"), bytes.fromhex("0807060504030201")),
    ]
    assert not _in(_between(rows, buf, 2), buf, 256, {LOAD})


def test_cached_capture_records_fills_and_writebacks_of_the_lines(probe, tmp_path):
    out = tmp_path / "mem.parquet"
    status, rep = capture([str(probe)], out)
    assert status == 3
    rows = _rows(out)
    buf = _mark_values(rows)[0]
    phase = _between(rows, buf, 2)
    fills = _in(phase, buf, 256, {FILL})
    assert [(r["addr"] - buf, r["size"], r["flags"]) for r in fills] == [(0, 64, 1), (64, 64, 1)]
    wbs = sorted(_in(phase, buf, 256, {WRITEBACK}), key=lambda r: r["addr"])
    line0 = bytes.fromhex("0807060504030201" "efbeadde" "a5") + bytes(51)
    line1 = b"\xef\xbe" + bytes(62)
    assert [(r["addr"] - buf, r["size"], r["old"], r["new"]) for r in wbs] == [
        (0, 64, bytes(64), line0),
        (64, 64, bytes(64), line1),
    ]
    # nothing else reached memory in the array
    assert len(_in(phase, buf, 256, {FILL, WRITEBACK})) == 4

    # process events: start first, exit last with the code, the big block mapped before
    # its mark and unmapped after it, heap growth through brk
    assert rows[0]["kind"] == START and rows[-1]["kind"] == EXIT
    assert rows[-1]["flags"] == 3
    assert all(r["pid"] == rows[0]["pid"] for r in rows)
    big = _mark_values(rows)[2]
    big_mark = next(i for i, r in enumerate(rows) if r["kind"] == MARK and r["addr"] == big)
    maps = [
        (i, r) for i, r in enumerate(rows)
        if r["kind"] == MAP and r["addr"] <= big < r["addr"] + r["size"]
    ]
    assert maps and maps[-1][0] < big_mark
    mapped = maps[-1][1]
    assert mapped["size"] >= 1 << 20 and mapped["flags"] & (MAP_R | MAP_W) == MAP_R | MAP_W
    unmaps = [
        r for r in rows[big_mark:]
        if r["kind"] == UNMAP and (r["addr"], r["size"]) == (mapped["addr"], mapped["size"])
    ]
    assert len(unmaps) == 1
    assert any(r["kind"] == MAP and r["flags"] & MAP_BRK for r in rows)
    (p,) = rep["processes"]
    assert p["exit_code"] == 3 and p["command"].startswith(str(probe))
    assert p["pid"] == rows[0]["pid"] and p["cut_at"] is None


def test_cache_model_matches_hand_computed_stride_counts(tmp_path):
    exe = _compile(tmp_path, "stride", STRIDE)
    out = tmp_path / "stride.parquet"
    status, _ = capture(
        [str(exe)], out, l1_size=1024, l1_ways=2, l2_size=4096, l2_ways=4, line=64
    )
    assert status == 0, "the program's own check of what it read"
    rows = _rows(out)
    arr = _mark_values(rows)[0]

    def counts(a, b):
        phase = _between(rows, a, b)
        fills = _in(phase, arr, 16384, {FILL})
        wbs = _in(phase, arr, 16384, {WRITEBACK})
        return fills, wbs

    # A: every line a write miss; the 4 KiB L2 holds 64 of the 256 dirty lines, so 192 are
    # written back during the loop and 64 at the mark; each carries one changed bit.
    fills, wbs = counts(arr, 2)
    assert len(fills) == 256 and all(r["flags"] == 1 for r in fills)
    assert sorted(r["addr"] - arr for r in fills) == list(range(0, 16384, 64))
    assert len(wbs) == 256
    assert sorted(r["addr"] - arr for r in wbs) == list(range(0, 16384, 64))
    assert all(r["old"] == bytes(64) and r["new"] == b"\x01" + bytes(63) for r in wbs)
    # B: 32 load misses on the first pass, none on the second (2 lines per L2 set); clean.
    fills, wbs = counts(2, 3)
    assert len(fills) == 32 and all(r["flags"] == 0 for r in fills) and wbs == []
    # C: 5 lines cycling through a 4-way LRU set miss every time.
    fills, wbs = counts(3, 4)
    assert [r["addr"] - arr for r in fills] == [0, 1024, 2048, 3072, 4096] * 2
    assert wbs == []


def test_a_window_later_in_the_run_keeps_its_traffic_and_its_own_clock(tmp_path):
    exe = _compile(tmp_path, "stride", STRIDE)
    geometry = {"l1_size": 1024, "l1_ways": 2, "l2_size": 4096, "l2_ways": 4, "line": 64}
    full_out, win_out = tmp_path / "full.parquet", tmp_path / "window.parquet"
    assert capture([str(exe)], full_out, **geometry)[0] == 0
    skip, keep = 100, 50
    status, rep = capture(
        [str(exe)], win_out, skip_records=skip, max_records=keep, window_clock=True, **geometry
    )
    assert status == 0
    traffic = {FILL, WRITEBACK}
    full = [r for r in _rows(full_out) if r["kind"] in traffic]
    window = [r for r in _rows(win_out) if r["kind"] in traffic]
    # The same records, the 101st to the 150th of the run.
    strip = ("kind", "addr", "size", "flags", "old", "new")
    assert [{k: r[k] for k in strip} for r in window] == [
        {k: r[k] for k in strip} for r in full[skip : skip + keep]
    ]
    # Their own gaps, but the time of the 100 records before them left out.
    gaps = lambda rows: [b["icount"] - a["icount"] for a, b in itertools.pairwise(rows)]
    assert gaps(window) == gaps(full[skip : skip + keep])
    assert window[0]["icount"] < full[skip]["icount"] - (full[skip - 1]["icount"] - full[0]["icount"])
    (p,) = rep["processes"]
    assert p["records_dropped"] == len(full) - keep
    # The process ends with its window: after it, only the instructions since the last
    # record left out (the marks' and the exit's) count.
    full_tail = _rows(full_out)[-1]["icount"] - full[skip + keep - 1]["icount"]
    window_tail = _rows(win_out)[-1]["icount"] - window[-1]["icount"]
    assert window_tail * 100 < full_tail, (window_tail, full_tail)
    # Without the window clock the left-out records keep their time: the same instants.
    plain = tmp_path / "plain.parquet"
    capture([str(exe)], plain, skip_records=skip, max_records=keep, **geometry)
    kept = [r for r in _rows(plain) if r["kind"] in traffic]
    assert [r["icount"] for r in kept] == [r["icount"] for r in full[skip : skip + keep]]


def test_cli_capture_and_trace_stats(probe, tmp_path, capsys):
    out = tmp_path / "cli.parquet"
    assert cli.main(["capture", "memory", "--out", str(out), "--", str(probe)]) == 3
    capsys.readouterr()
    assert cli.main(["trace", "stats", str(out), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    rows = _rows(out)
    assert st["rows"] == len(rows)
    assert st["total"]["fills"] == sum(r["kind"] == FILL for r in rows)
    assert st["total"]["writebacks"] == sum(r["kind"] == WRITEBACK for r in rows)
    assert st["processes"][0]["exit_code"] == 3
    assert st["geometry"] == {
        "line": 64, "l1_bytes": 32768, "l1_ways": 8,
        "l2_bytes": 1048576, "l2_ways": 16, "cache": True,
    }
    # the probe's two lines contribute 8+4+1 and 2 changed bytes' bits at least
    assert st["total"]["bit_changes"] >= 20


def test_child_processes_each_get_their_rows(tmp_path):
    out = tmp_path / "sh.parquet"
    status, rep = capture(["/bin/sh", "-c", "/bin/true; /bin/echo hi >/dev/null"], out)
    assert status == 0
    cmds = [p["command"] for p in rep["processes"]]
    assert any(c.startswith("/bin/true") for c in cmds)
    assert any(c.startswith("/bin/echo hi") for c in cmds)
    rows = _rows(out)
    starts = [r["pid"] for r in rows if r["kind"] == START]
    assert sorted(starts) == sorted(p["pid"] for p in rep["processes"])


def test_file_mappings_name_their_files_and_children_share_libc(probe, tmp_path):
    import os

    out = tmp_path / "sh.parquet"
    status, _ = capture(["/bin/sh", "-c", f"{probe}; {probe}"], out)
    assert status == 3
    f = pq.ParquetFile(out)
    meta = f.metadata.metadata
    assert meta[b"wattio.memtrace.version"] == b"2"
    files = json.loads(meta[b"wattio.memtrace.files"])
    # The probe's own executable, by device and inode as the kernel has them.
    st = os.stat(probe)
    (me,) = [i for i, x in enumerate(files) if (x["dev"], x["ino"]) == (st.st_dev, st.st_ino)]
    libc = [i for i, x in enumerate(files) if "libc.so" in x["path"]]
    assert len(libc) == 1, files
    rows = _rows(out)
    maps = [r for r in rows if r["kind"] == MAP]
    named = [r for r in maps if r["flags"] & 128]
    assert named and all(r["file"] is not None and r["offset"] is not None for r in named)
    assert all(r["file"] is None for r in maps if not r["flags"] & 128)
    # Both runs of the probe (each its own image) map the probe and libc: one file number each.
    images = [i for i, r in enumerate(rows) if r["kind"] == START]
    by_image = [
        {r["file"] for r in rows[a:b] if r["kind"] == MAP and r["flags"] & 128}
        for a, b in zip(images, [*images[1:], len(rows)])
    ]
    runs = [s for s in by_image if me in s]
    assert len(runs) == 2 and all(libc[0] in s for s in runs)
    # The executable's first segment maps the file from its start.
    assert min(r["offset"] for r in named if r["file"] == me) == 0


# A parent and a forked child (no exec) each write 64 lines of their own array.
FORK = r"""
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

static uint8_t arr[4096] __attribute__((aligned(4096)));

int main(void) {
    volatile uint8_t *a = arr;
    pid_t child = fork();
    for (int i = 0; i < 4096; i += 64) a[i] = child == 0 ? 2 : 1;
    if (child == 0) return 0;
    int st;
    waitpid(child, &st, 0);
    return WEXITSTATUS(st);
}
"""


def test_a_forked_child_has_its_own_counters_and_record_limit(tmp_path):
    exe = _compile(tmp_path, "fork", FORK)
    out = tmp_path / "fork.parquet"
    status, rep = capture([str(exe)], out, max_records=2000)
    assert status == 0
    parent, child = sorted(rep["processes"], key=lambda p: p["start_us"])
    assert child["ppid"] == parent["pid"]
    rows = _rows(out)
    kept = {p["pid"]: sum(1 for r in rows if r["pid"] == p["pid"] and r["kind"] in {FILL, WRITEBACK})
            for p in (parent, child)}
    # Each has its own limit: the child's budget is not what the parent left of it.
    assert kept[child["pid"]] == min(2000, child["fills"] + child["writebacks"]) > 0
    # The child's counters are its own: fewer accesses than the parent's start-up and its own.
    assert 0 < child["accesses"] < parent["accesses"]


def test_a_command_that_cannot_run_is_named_before_valgrind(tmp_path, capsys):
    out = tmp_path / "none.parquet"
    data = tmp_path / "data"
    data.write_text("")
    for prog, said in [(str(tmp_path / "nope"), "no such file"), (str(data), "not an executable file"),
                       ("wattio-no-such-command", "command not found on PATH")]:
        assert cli.main(["capture", "memory", "--out", str(out), "--", prog]) == 2
        assert f"cannot run `{prog}`: {said}" in capsys.readouterr().err
        assert not out.exists()
