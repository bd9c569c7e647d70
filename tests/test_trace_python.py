"""wattio.trace and `wattio trace …` on hand-written traces: values, not just shapes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from wattio import trace
from wattio.cli import main

MSR = (
    "128166372003061629,hm,1,Read,3154227200,4096,40160\n"
    "128166372003061629,hm,1,Write,4096,512,1000\n"
    "128166372016382155,src2,0,Write,0,65536,20\n"
)


@pytest.fixture
def msr(tmp_path: Path) -> Path:
    p = tmp_path / "hm_1.csv"
    p.write_text(MSR)
    return p


def test_read_msr_into_dataframe_with_ns_and_bytes(msr: Path) -> None:
    df = trace.read(msr)
    assert list(df.columns) == trace.COLUMNS
    assert df["arrival_ns"].tolist() == [0, 0, 1_332_052_600]
    assert df["op"].tolist() == ["read", "write", "write"]
    assert list(df["op"].cat.categories) == trace.OPS
    assert df["arrival_ns"].dtype == "int64"
    assert df["offset"].tolist() == [3_154_227_200, 4096, 0]
    assert df["len"].tolist() == [4096, 512, 65536]
    assert df["dev"].tolist() == [0, 0, 1]
    assert df["measured_ns"].tolist() == [4_016_000, 100_000, 2_000]
    assert df["file"].isna().all()
    assert any("detected format msr" in a for a in df.attrs["assumptions"])


def test_read_selects_one_volume(msr: Path) -> None:
    df = trace.read(msr, "msr", device="src2_0")
    assert df["arrival_ns"].tolist() == [0]
    assert df["dev"].tolist() == [0]


def test_stats_dict(msr: Path) -> None:
    s = trace.stats(msr)
    assert s["requests"] == 3
    assert s["read_fraction"] == pytest.approx(1 / 3)
    assert s["bytes_written"] == 512 + 65536
    assert s["footprint_exact"] is True
    # hm_1: pages 770075 and 1; src2_0: 16 pages from 0.
    assert s["footprint_pages"] == 18
    assert [d["requests"] for d in s["devices"]] == [2, 1]


def test_cli_stats_json_and_text(msr: Path, capsys) -> None:
    assert main(["trace", "stats", str(msr), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["requests"] == 3
    assert out["read_fraction"] == pytest.approx(1 / 3)
    assert main(["trace", "stats", str(msr)]) == 0
    text = capsys.readouterr().out
    assert "requests            3" in text
    assert "idle time in gaps longer than t" in text


def test_cli_convert_to_disksim_and_fio_round_trip(msr: Path, tmp_path: Path, capsys) -> None:
    ds = tmp_path / "t.disksim"
    assert main(["trace", "convert", str(msr), str(ds)]) == 0
    assert ds.read_text().splitlines() == [
        "0.000000 0 6160600 8 1",
        "0.000000 0 8 1 0",
        "1332.052600 1 0 128 0",
    ]
    back = trace.read(ds, "disksim")
    assert back["offset"].tolist() == [3_154_227_200, 4096, 0]
    assert back["arrival_ns"].tolist() == [0, 0, 1_332_052_600]
    io = tmp_path / "t.iolog"
    assert main(["trace", "convert", str(msr), str(io), "--to", "fio"]) == 0
    lines = io.read_text().splitlines()
    assert lines[0] == "fio version 3 iolog"
    assert "1332052 /dev/wattio1 write 0 65536" in lines


def test_cli_slice_window_and_speedup(msr: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.parquet"
    assert main(["trace", "slice", str(msr), str(out), "--start", "0", "--end", "2",
                 "--speedup", "4"]) == 0
    df = trace.read(out)
    assert df["arrival_ns"].tolist() == [0, 0, 333_013_150]


def test_cli_slice_that_keeps_nothing_fails_and_leaves_no_file(msr: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "none.parquet"
    assert main(["trace", "slice", str(msr), str(out), "--dev", "9"]) == 2
    err = capsys.readouterr().err
    assert "slice kept no requests: device 9 is not in the trace (its devices: 0, 1)" in err, err
    assert not out.exists()
    assert main(["trace", "slice", str(msr), str(out), "--start", "3600"]) == 2
    assert "none arrives in the window [3600, end) s (3 read outside it)" in capsys.readouterr().err
    assert not out.exists()


def test_cli_reports_file_line_column_and_lenient(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(MSR + "128166372016382155,src2,0,Wrote,0,65536,20\n")
    assert main(["trace", "stats", str(bad), "--format", "msr"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:4:27: bad field `Wrote` (expected Read or Write)" in err
    assert main(["trace", "stats", str(bad), "--format", "msr", "--lenient", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["requests"] == 3
    assert "lenient: skipped 1 bad lines" in s["assumptions"]


def _shared() -> Path:
    env = os.environ.get("WATTIO_SHARED")
    root = Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared"
    return root / "disksim-valid"


def test_disksim_validation_trace_stats() -> None:
    p = _shared() / "atlas10k.trace"
    if not p.exists():
        pytest.skip(f"DiskSim validation data not found at {p}")
    s = trace.stats(p)
    assert s["requests"] == 10_000
    assert s["measured"]["count"] == 10_000
    assert any("disksim-validate" in a for a in s["assumptions"])
    # Recorded closed-loop, one request at a time: each arrives after the previous completes.
    assert s["outstanding"]["max"] == 1 and s["outstanding"]["mean"] == 1.0
    assert s["devices"][0]["max_outstanding"] == 1


def _blk_io_trace(t: int, sector: int, nbytes: int, action: int, pid: int, dev: int, cpu: int) -> bytes:
    """One little-endian `struct blk_io_trace` (48 bytes, no payload)."""
    import struct

    return struct.pack("<IIQQIIIIIHH", 0x65617407, 1, t, sector, nbytes, action, pid, dev, cpu, 0, 0)


def test_blktrace_per_cpu_files_read_merged_from_python_and_the_cli(tmp_path: Path, capsys) -> None:
    # Two CPUs' files of `blktrace -d /dev/sdb` (8,16): a write queued and issued on CPU 0, a
    # read on CPU 1 issued between them; D (issued, 7 | BLK_TC_ISSUE) is what is kept.
    dev = 8 << 20 | 16
    write_q, write_d = 1 | (2 | 16) << 16, 7 | (2 | 64) << 16
    read_d = 7 | (1 | 64) << 16
    (tmp_path / "sdb.blktrace.0").write_bytes(
        _blk_io_trace(5_000, 2048, 4096, write_q, 77, dev, 0) + _blk_io_trace(9_000, 2048, 4096, write_d, 77, dev, 0)
    )
    (tmp_path / "sdb.blktrace.1").write_bytes(_blk_io_trace(7_500, 100, 8192, read_d, 78, dev, 1))
    df = trace.read(tmp_path / "sdb.blktrace.0")
    # Times from the first record (the queued write at 5,000 ns), in time order across CPUs.
    assert df["arrival_ns"].tolist() == [2_500, 4_000]
    assert df["op"].tolist() == ["read", "write"]
    assert df["offset"].tolist() == [100 * 512, 2048 * 512]
    assert df["len"].tolist() == [8192, 4096]
    notes = "\n".join(df.attrs["assumptions"])
    assert "detected blktrace binary" in notes
    assert "merged 2 per-CPU files by time: sdb.blktrace.0, sdb.blktrace.1" in notes
    assert main(["trace", "stats", str(tmp_path / "sdb.blktrace.1"), "--action", "Q", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["requests"] == 1 and stats["writes"] == 1


def test_a_gzip_trace_reads_as_published(tmp_path: Path) -> None:
    # SNIA ships the MSR Cambridge volumes as hm_1.csv.gz: read as they are downloaded.
    import gzip

    p = tmp_path / "hm_1.csv.gz"
    p.write_bytes(gzip.compress(MSR.encode()))
    df = trace.read(p)
    assert df["arrival_ns"].tolist() == [0, 0, 1_332_052_600]
    assert df["len"].tolist() == [4096, 512, 65536]
    assert "decompressed: gzip stream" in df.attrs["assumptions"]


def test_a_misspelt_reading_keyword_is_named(msr: Path) -> None:
    from wattio import _core

    with pytest.raises(TypeError, match="unexpected keyword argument 'lenent'"):
        _core.trace_stats(str(msr), lenent=True)
    # The known ones, by keyword, as every binding that reads a trace takes them.
    s = json.loads(_core.trace_stats(str(msr), "msr", lenient=True, device="hm,1"))
    assert s["requests"] > 0 and any("lenient" in a for a in s["assumptions"])


def test_sort_reads_a_trace_out_of_time_order(tmp_path: Path, capsys) -> None:
    """The MSR rows with the last first: refused, naming --sort; with it, the same requests
    as the sorted file's (devices numbered as read)."""
    lines = MSR.splitlines()
    p = tmp_path / "merged.csv"
    p.write_text("\n".join([lines[2], lines[0], lines[1]]) + "\n")
    assert main(["trace", "stats", str(p)]) == 2
    assert "arrival goes backwards" in capsys.readouterr().err
    df = trace.read(p, sort=True)
    assert df["arrival_ns"].tolist() == [0, 0, 1_332_052_600]
    assert df["op"].tolist() == ["read", "write", "write"]
    assert df["dev"].tolist() == [1, 1, 0]
    assert main(["trace", "stats", str(p), "--sort", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["requests"] == 3
    assert any("records sorted by arrival (--sort" in a for a in s["assumptions"])


def test_a_systor_17_hour_reads_as_downloaded(tmp_path: Path, capsys) -> None:
    """A SYSTOR '17 VDI file as SNIA ships it (`<hour>_LUN<n>.csv.gz`, header first): detected,
    µs timestamps rebased, the response time measured, a blank IOType counted, the LUN
    selected as the file name spells it."""
    import gzip

    text = (
        "Timestamp,Response,IOType,LUN,Offset,Size\n"
        "1456135200.013118000,0.000806000,R,4,899056122368,131072\n"
        "1456135200.013500000,0.001,W,4,4096,8192\n"
        "1456135201.500000000,0.000300,,4,4096,4096\n"
    )
    p = tmp_path / "2016022219_LUN4.csv.gz"
    p.write_bytes(gzip.compress(text.encode()))
    df = trace.read(p, device="LUN4")
    assert df["arrival_ns"].tolist() == [0, 382_000]
    assert df["op"].tolist() == ["read", "write"]
    assert df["offset"].tolist() == [899_056_122_368, 4096]
    assert df["len"].tolist() == [131_072, 8192]
    assert df["measured_ns"].tolist() == [806_000, 1_000_000]
    notes = df.attrs["assumptions"]
    assert "detected format systor from the first line" in notes
    assert any(n.startswith("skipped 1 records: I/Os with a blank IOType") for n in notes)
    assert main(["trace", "stats", str(p), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == 2


@pytest.mark.parametrize(
    "options",
    [
        {},  # pyarrow's defaults: Snappy, dictionaries, v1 data pages
        {"data_page_version": "2.0", "compression": "zstd"},
        {"compression": "gzip", "use_dictionary": False},
        {"compression": "lz4"},
        {"compression": "none", "data_page_size": 64},  # many small pages
    ],
    ids=["default", "v2-zstd", "gzip-plain", "lz4", "small-pages"],
)
def test_a_columnar_trace_pyarrow_rewrote_reads_in_the_rust_reader(tmp_path: Path, options) -> None:
    # Users rewrite columnar traces with their own tools; wattio's reader (not pyarrow) must
    # take any codec and page layout pyarrow writes, through its page-header checks.
    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq

    n = 30_000
    df = pd.DataFrame({
        "arrival_ns": np.arange(n, dtype="uint64") * 1000,
        "op": (np.arange(n) % 3 == 0).astype("uint8"),
        "offset": np.arange(n, dtype="uint64") * 4096,
        "len": np.full(n, 4096, dtype="uint32"),
    })
    trace.write_frame(df, tmp_path / "a.parquet")
    pq.write_table(pq.read_table(tmp_path / "a.parquet"), tmp_path / "b.parquet", **options)
    s = trace.stats(tmp_path / "b.parquet")
    assert (s["requests"], s["writes"], s["reads"]) == (n, 10_000, 20_000)
    assert (s["bytes_read"], s["bytes_written"]) == (20_000 * 4096, 10_000 * 4096)
    assert s["duration_ns"] == (n - 1) * 1000


def test_a_sort_window_reorders_a_long_trace_in_bounded_memory(tmp_path: Path, capsys) -> None:
    """SYSTOR hours whose records step back by a few: `--sort-window` / `sort_window=` /
    `[trace] sort_window` reorder them within the window; one further back is refused by line."""
    rows = ["Timestamp,Response,IOType,LUN,Offset,Size"]
    for i in range(1000):
        # Every 10th record arrives two places late.
        t = i - 2.5 if i % 10 == 9 else i
        rows.append(f"{1456135200 + t / 1000:.6f},0.001,R,4,{i * 4096},4096")
    p = tmp_path / "hour.csv"
    p.write_text("\n".join(rows) + "\n")
    assert main(["trace", "stats", str(p)]) == 2
    assert "arrival goes backwards" in capsys.readouterr().err
    df = trace.read(p, sort_window=2)
    assert len(df) == 1000 and df["arrival_ns"].is_monotonic_increasing
    assert df["arrival_ns"].iloc[0] == 0 and df["arrival_ns"].iloc[-1] == 998_000_000  # 999 came at 996.5
    assert main(["trace", "stats", str(p), "--sort-window", "1"]) == 2
    err = capsys.readouterr().err
    assert "hour.csv:11:1: arrival" in err and "out of the 1-record sort window" in err, err
    assert main(["trace", "stats", str(p), "--sort-window", "2", "--sort"]) == 2
    assert "--sort and --sort-window: choose one" in capsys.readouterr().err
    import wattio

    cfg = (f"[trace]\npath = {str(p)!r}\nsort_window = 2\n\n[[device]]\nname = 'disk'\nmodel = 'wd800-fs2'\n"
           "[run]\ntolerate_out_of_range = true\n")
    r = wattio.run(cfg, progress=False, report=False)
    assert r.summary["requests"] == 1000
    assert any("within a window of 2" in a for a in r.summary["trace"])


def _srt_record(*fields: int) -> bytes:
    import struct

    return struct.pack(">I", 4 * len(fields) + 4) + struct.pack(f">{len(fields)}I", *fields)


def test_an_hp_srt_trace_reads_in_its_disks_sectors_from_python_and_the_cli(tmp_path: Path, capsys) -> None:
    # An HP Labs SRT trace (hplajw's layout): a header giving disk 0 256-byte sectors, then
    # two big-endian I/O records, version 4 (with the queue length), type 1.
    header = (
        b"$$TR_IOREC-1.3 (IOAdaptor Upgrade Version)\n"
        b'tracedate    = "Sat May 30 00:03:06 1992";\n'
        b"disks        = {\n  0 -> {\n    sectorsize  = 256,\n  }\n};\n"
    ) + b"\x0c"
    read = _srt_record(0x0004_0001, 0, 0, 174, 19_687, 4096, 1056, 0x0800_0008, 4, 1, 0x1B, 0, 1)
    write = _srt_record(0x0004_0001, 1, 250_000, 10, 3_000, 8192, 2000, 0x0800_0008, 4, 1, 0x100, 0, 1)
    p = tmp_path / "ajw.srt"
    p.write_bytes(header + read + write)
    df = trace.read(p)
    assert df["arrival_ns"].tolist() == [0, 1_250_000_000]
    assert df["op"].tolist() == ["read", "write"]
    assert df["offset"].tolist() == [1056 * 256, 2000 * 256]
    assert df["len"].tolist() == [4096, 8192]
    assert df["measured_ns"].tolist() == [19_687_000, 3_000_000]
    assert any("detected format srt" in a for a in df.attrs["assumptions"])
    assert main(["trace", "stats", str(p), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["requests"] == 2 and stats["writes"] == 1
    # A record cut short is refused at its byte offset.
    p.write_bytes(header + read + write[:20])
    assert main(["trace", "stats", str(p)]) != 0
    err = capsys.readouterr().err
    assert f"@byte {len(header) + len(read)}: a record cut short: 20 of its 56 bytes" in err, err
