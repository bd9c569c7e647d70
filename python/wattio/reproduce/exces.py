"""EXCES (Useche, Guerra, Bhadkamkar, Alarcon, Rangaswami, *EXCES: EXternal Caching in Energy
Saving Storage Systems*, HPCA 2008).

Experiments are named ``exces-…``. They need the EXCES function (registry kind ``exces``);
without it `wattio reproduce` reports them not-run rather than running the bare disk, which
is not the paper's setup (its timeout study ran with the flash cache in the path, and its
text restricts the trend to the EXCES configurations).

* ``exces-fig8-spin-down-timeouts`` — shorter timeouts save more with EXCES (Fig. 8). Fails
  today, for a known reason: the library's Office and PostMark stand-ins never idle longer
  than the disk's break-even time, so no timeout can save energy on them.
* ``exces-fig9-developer-savings``, ``exces-fig9-idle-and-usb`` — Fig. 9's orderings of
  Base, laptop mode, EXCES with CF and with USB (and the LRU flash cache beside them, which
  the paper did not run) on the idle system and the Developer, Office and PostMark stand-ins.
* ``exces-fig10-io-time`` — Fig. 10: the ECD raises the average I/O time on the BLTK-like
  workloads.
* ``exces-ecd-power-sensitivity`` — the saving against the ECD's idle power (and size).

Every rule and paper value below was written before the experiment first ran.
"""

from __future__ import annotations

import functools
import tomllib

from wattio.reproduce import library, spindown, workers
from wattio.reproduce.experiment import Experiment, NotRunnable, Outcome, System
from wattio.reproduce.rules import SameOrdering, SameTrend

PAPER = (
    "Useche, Guerra, Bhadkamkar, Alarcon, Rangaswami, 'EXCES: EXternal Caching in Energy "
    "Saving Storage Systems', HPCA 2008"
)

#: Machine 'shiriu' with configuration ECD 2 (Sec. 6.1: "We used the ECD 2 configuration from
#: Table 1"): the Toshiba laptop disk and a SanDisk Ultra CF card as the external cache, EXCES
#: above the disk's spin-down timeout (set in the disk's firmware in the paper).
#: How EXCES knows the disk sleeps, a choice the paper leaves open (docs/functions/exces.md):
#: from the start of its spin-down. ext3/ext4 commit their journal every 5 s, so with the
#: paper's 5 s timeout a commit often arrives during the spin-down; the disk then has to spin
#: up again for it unless the layer buffers it, as it would a moment later in STANDBY.
EXCES_KEYS = 'asleep_from = "spin-down"\n'

SHIRIU_ECD2 = spindown.Setup(
    devices=spindown.BARE_DISK.devices + '\n[[device]]\nname = "ecd"\nmodel = "sandisk-ultra-cf-2gb"\n',
    above='[[function]]\nkind = "exces"\ndisk = "disk"\nflash = "ecd"\n' + EXCES_KEYS,
)

#: Fig. 8's timeouts -> the spin-down policies that set them ("none": never spin down).
TIMEOUTS = {"5 s": "fixed 5 s", "10 s": "fixed 10 s", "15 s": "fixed 15 s", "30 s": "fixed 30 s",
            "none": "always-on"}

#: Fig. 8 as ranks (1 = least energy; equal ranks are not ordered by the text): "smaller timeout
#: values allowed for greater energy savings, except for the BLTK Office workload which reaches
#: its optimum at 10 seconds" — so for Office 10 s is best and 5 s is not ordered against 15 s.
RANKS = {
    "office": {"5 s": 2, "10 s": 1, "15 s": 2, "30 s": 3, "none": 4},
    "postmark": {"5 s": 1, "10 s": 2, "15 s": 3, "30 s": 4, "none": 5},
}


def _fig8(quick: bool) -> Outcome:
    traces, notes = spindown.available()
    missing = [w for w in RANKS if w not in traces]
    if missing:
        raise NotRunnable("; ".join(notes))
    df = spindown.runs(tuple(RANKS), tuple(TIMEOUTS.values()), quick, SHIRIU_ECD2)
    values = {}
    for w in RANKS:
        r = df[df["workload"] == w].set_index("policy")
        values.update({f"{w}: {t}": float(r.loc[p, "energy_j"]) for t, p in TIMEOUTS.items()})

    def figure(ax):
        for w in RANKS:
            r = df[df["workload"] == w].set_index("policy")
            ax.plot(list(TIMEOUTS), [r.loc[p, "saving_vs_always_on_pct"] for p in TIMEOUTS.values()],
                    marker="o", label=w)
        ax.set_xlabel("spin-down timeout")
        ax.set_ylabel("energy saved vs no timeout (%)")
        ax.set_title("EXCES Fig. 8: spin-down timeout with EXCES (ECD 2)")
        ax.legend(fontsize=8)

    return Outcome(values=values, table=df, figure=figure, notes=[f"{w}: workloads/{w}/" for w in RANKS])


FIG8 = Experiment(
    name="exces-fig8-spin-down-timeouts",
    title="With EXCES, shorter spin-down timeouts save more (Office: best at 10 s)",
    paper=PAPER,
    reproduces="Sec. 6.1, Fig. 8 (timeouts 5, 10, 15, 30 s and none; BLTK Office and PostMark)",
    paper_values={f"{w}: {t}": r for w, ranks in RANKS.items() for t, r in ranks.items()},
    rule=SameOrdering(tolerance_percent=0.5, group_separator=": "),
    quantity="energy rank (paper) / energy J (wattio)",
    differs="EXCES measured whole-system power (ACPI battery readings every 10 s) on a live "
    "laptop; wattio models the disk and the flash card alone, replaying captured stand-ins for "
    "BLTK Office and PostMark. Fig. 8's values survive only as its caption, so the paper's "
    "side is the ordering its text states.",
    run=_fig8,
    functions=("exces", "spindown"),
    sources=(
        ("Sec. 6.1: 'smaller timeout values allowed for greater energy savings, except for "
         "the BLTK Office workload which reaches its optimum at 10 seconds'"),
    ),
)

# --- Fig. 9 and 10: EXCES, its baselines and Base on the library's laptop workloads ---------

#: The ECDs of Table 1 used in Sec. 6.2 (catalogue entries, sources in each file).
ECDS = {"CF": "sandisk-ultra-cf-2gb", "USB": "sandisk-cruzer-micro-2gb"}

#: The host's page cache as a device, for the laptop-mode baseline.
PAGE_CACHE = "host-dram-page-cache"

#: The CF card puts itself to sleep 5 ms after its last command (SanDisk CF OEM Product
#: Manual, Sec. 1.7.5): a fixed 5 ms timeout on the card models that firmware. The USB
#: stick is never suspended: the paper saw the idle USB subsystem draw more than the disk
#: (Sec. 3), and Linux 2.6.20 did not autosuspend mass-storage devices.
AUTO_SLEEP = {"CF": 0.005, "USB": None}

#: The spin-down timeout of every configuration (Sec. 6.1: "All subsequent experiments use a
#: 5 second disk spin-down timeout").
TIMEOUT_S = 5

#: The LRU baseline (flashcache/bcache-like write-back): recency ranking, a fill at every
#: miss, writes always buffered, half the cache dirty at most, cleaning after 2 s of disk
#: idleness (before the 5 s spin-down). Laptop mode as the paper's source sets it up (its
#: [25], Samwel 2004: the control script of the kernel's Documentation/laptop-mode.txt, whose
#: READAHEAD=4096 KB is the paper's "default 4MB"): dirty data held in the page cache and
#: written back whenever the disk spins up; background write-back once 40 % is dirty
#: (DIRTY_RATIO=40: in laptop mode 2.6.20 starts it only at the higher threshold); pages
#: dirty for MAX_AGE=600 s written back at checks every 600 s (the script sets both
#: dirty_expire_centisecs and dirty_writeback_centisecs to 100 x MAX_AGE); the page cache
#: is volatile, so no map is persisted and an fsync writes every dirty page back
#: (``persist_map = false``).
LRU_KEYS = (
    'ranking = "recency"\nmiss_threshold_per_min = 0\nmin_interval_s = 0\n'
    'absorb_writes = "always"\ndirty_threshold = 0.5\nclean_idle_s = 2\n'
)
LAPTOP_MODE_KEYS = (
    'ranking = "recency"\nmiss_threshold_per_min = 0\nmin_interval_s = 0\n'
    'absorb_writes = "always"\ndirty_threshold = 0.4\nclean_on_spin_up = true\n'
    "dirty_expire_s = 600\nwriteback_interval_s = 600\n"
    "readahead_pages = 1024\npersist_map = false\n"
)


def _device(name: str, model: str, idle_w: float | None = None) -> str:
    """A ``[[device]]`` table: a catalogue model, or (``idle_w``) the model inline with its
    idle and sleep states drawing ``idle_w`` (the sensitivity sweep)."""
    if idle_w is None:
        return f'[[device]]\nname = "{name}"\nmodel = "{model}"\n'
    spec = tomllib.loads((library.REPO_LIBRARY.parent / "catalogue" / f"{model}.toml").read_text())
    for s in spec["power"]["state"]:
        if s["name"] != spec["power"]["active"]:
            s["watts"] = idle_w
    inline = _toml_inline({k: spec[k] for k in ("kind", "timing", "power")})
    return f'[[device]]\nname = "{name}"\nspec = {inline}\n'


def _toml_inline(v) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_inline(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[" + ", ".join(_toml_inline(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(v)


def _spindown(dev: str, timeout_s: float) -> str:
    return (f'[[function]]\nkind = "spindown"\npolicy = "fixed"\ntimeout_s = {timeout_s}\n'
            f'devices = ["{dev}"]\n')


def stack(config: str, cache_pages: int | None = None, ecd_idle_w: float | None = None) -> str:
    """Devices and functions of one configuration: Base, laptop-mode, EXCES (CF|USB),
    LRU (CF|USB)."""
    disk = _device("disk", spindown.DISK)
    below = _spindown("disk", TIMEOUT_S)
    if config == "Base":
        return disk + below
    if config == "laptop-mode":
        return (disk + _device("ecd", PAGE_CACHE)
                + f'[[function]]\nkind = "exces"\ndisk = "disk"\nflash = "ecd"\n{LAPTOP_MODE_KEYS}'
                + below)
    what, ecd = config.replace(")", "").split(" (")
    keys = {"EXCES": EXCES_KEYS, "LRU": LRU_KEYS}[what]
    if cache_pages:
        keys += f"cache_pages = {cache_pages}\n"
    text = (disk + _device("ecd", ECDS[ecd], ecd_idle_w)
            + f'[[function]]\nkind = "exces"\ndisk = "disk"\nflash = "ecd"\n{keys}' + below)
    if AUTO_SLEEP[ecd] is not None and ecd_idle_w is None:
        text += _spindown("ecd", AUTO_SLEEP[ecd])
    return text


CONFIGS = ("Base", "laptop-mode", "EXCES (CF)", "EXCES (USB)", "LRU (CF)")

#: Fig. 9's idle system: ten minutes with no I/O (a generated workload of one request at
#: the start: the devices' idle and sleep states decide).
IDLE_S = 600
IDLE = "idle system (generated)"
IDLE_WORKLOAD = (
    '[workload]\narrivals = "poisson"\nduration_s = 1\nrate = 1\nread_fraction = 1.0\n'
    "size = { dist = \"fixed\", bytes = 4096 }\nfootprint_bytes = 1_000_000\n"
)

#: The library's stand-ins (their READMEs say how they differ from BLTK and PostMark).
BLTK = ("developer", "office")
LAPTOP_WORKLOADS = ("developer", "office", "postmark")


def _run_config(task) -> dict:
    from wattio.api import run

    workload, config, cache_pages, idle_w, trace = task
    if workload == IDLE:
        load, until = IDLE_WORKLOAD, f"until_s = {IDLE_S}\n"
    else:
        load, until = f'[trace]\npath = "{trace}"\nformat = "columnar"\n', ""
    text = (f'[run]\nname = "{config}"\nseed = 1\n{until}\n{stack(config, cache_pages, idle_w)}\n'
            f"{load}\n[output]\nrequests = false\ntimeline = false\nreport = false\n")
    s = run(text, progress=False, report=False).summary
    devs = s["devices"]
    counters = {k: v for f in s.get("functions", []) for k, v in f.get("counters", {}).items()}
    return {
        "workload": workload,
        "config": config,
        "cache_pages": cache_pages,
        "ecd_idle_w": idle_w,
        "requests": s["requests"],
        "duration_s": s["duration_s"],
        "energy_j": s["energy_j"],
        "disk_energy_j": devs["disk"]["energy_j"],
        "ecd_energy_j": devs["ecd"]["energy_j"] if "ecd" in devs else 0.0,
        "disk_spin_ups": devs["disk"]["spin_ups"],
        "mean_io_ms": s["mean_latency_ms"],
        "p99_io_ms": s["p99_latency_ms"],
        "ecd_hits": counters.get("read_hits", 0.0) + counters.get("write_hits", 0.0)
        + counters.get("absorbed_writes", 0.0),
        "ecd_misses": counters.get("ecd_misses"),
        "pages_written_back": counters.get("pages_written_back"),
        "reconfigurations": counters.get("reconfigurations"),
    }


@functools.cache
def _grid(tasks: tuple) -> object:
    """One run per (workload, config, cache_pages, ecd_idle_w), two at a time: a DataFrame
    with each run's saving against Base on its workload."""
    import pandas as pd

    traces = {}
    for w in {t[0] for t in tasks if t[0] != IDLE}:
        traces[w] = str(library.block_trace(w))
    rows = workers.map_runs(_run_config, [(*t, traces.get(t[0])) for t in tasks], max_workers=2)
    df = pd.DataFrame(rows)
    base = df[df["config"] == "Base"].set_index("workload")["energy_j"]
    df["saving_vs_base_pct"] = 100 * (1 - df["energy_j"] / df["workload"].map(base))
    return df


def fig9_grid():
    """Every configuration on every laptop workload and the idle system."""
    return _grid(tuple((w, c, None, None) for w in (*LAPTOP_WORKLOADS, IDLE) for c in CONFIGS))


def _energy_bars(df, column: str, ylabel: str, title: str):
    def figure(ax):
        ws = list(dict.fromkeys(df["workload"]))
        cs = list(dict.fromkeys(df["config"]))
        width = 0.8 / len(cs)
        for j, c in enumerate(cs):
            r = df[df["config"] == c].set_index("workload").loc[ws]
            ax.bar([i + j * width for i in range(len(ws))], r[column], width=width, label=c)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(ws))], ws, fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=7)

    return figure


def _notes() -> list[str]:
    return [
        ("devices: disk toshiba-mk1234gsx (5 s fixed spin-down in every configuration); ECDs "
        "sandisk-ultra-cf-2gb (5 ms firmware auto-sleep) and sandisk-cruzer-micro-2gb (never "
        "suspended); laptop mode's page cache host-dram-page-cache (0 W marginal)"),
        "energy = disk + ECD device energy (the paper measured whole-system power)",
        ("EXCES and LRU make a FLUSH durable by logging their map on the flash card (dirty "
        "pages stay there, docs/functions/exces.md); laptop mode's volatile page cache writes "
        "every dirty page back at each fsync"),
        *[f"{w}: workloads/{w}/" for w in LAPTOP_WORKLOADS],
        f"{IDLE}: {IDLE_S} s with one 4 KiB read at the start",
    ]


# exces-fig9-developer-savings: ranks of savings (1 = smallest saving).
SAVING_RANKS = {
    "developer: EXCES (USB)": 1,
    "office: EXCES (CF)": 1,
    "developer: EXCES (CF)": 2,
}


def _grid_outcome(column: str, keys, ylabel: str, title: str) -> Outcome:
    """The Fig. 9 grid's ``column`` at each ``workload: config`` key, with its bar chart."""
    df = fig9_grid()
    s = df.set_index(["workload", "config"])[column]
    values = {k: float(s[tuple(k.split(": "))]) for k in keys}
    return Outcome(values=values, table=df, figure=_energy_bars(df, column, ylabel, title),
                   notes=_notes())


def _savings_run(quick: bool) -> Outcome:
    return _grid_outcome("saving_vs_base_pct", SAVING_RANKS, "device energy saved vs Base (%)",
                         "EXCES Fig. 9: energy saved against Base")


SAVINGS = Experiment(
    name="exces-fig9-developer-savings",
    title="On the Developer workload EXCES with CF saves more than with USB, and more than on Office",
    paper=PAPER,
    reproduces="Sec. 6.2, Fig. 9 (BLTK Developer: ~14 % with CF, ~8 % with USB; Office: no "
    "substantial savings)",
    paper_values=SAVING_RANKS,
    rule=SameOrdering(tolerance_percent=0.5),
    quantity="saving rank (paper) / saving vs Base % (wattio)",
    differs="The paper's savings are whole-system power from ACPI battery readings; wattio's "
    "are the disk's and the ECD's energy only, on captured stand-ins of BLTK Developer and "
    "Office (time-compressed, workloads/*/README.md), so only the orderings are compared.",
    run=_savings_run,
    functions=("exces", "spindown"),
    sources=(("Sec. 6.2: 'The configuration with EXCES alone provides the most power savings "
             "(~14% with CF and ~8% with USB)'; 'the BLTK Office benchmark ... no substantial "
             "savings'"),),
)


# exces-fig9-idle-and-usb: energy ranks within each workload (1 = least energy).
ENERGY_RANKS = {
    f"{IDLE}: Base": 1,
    f"{IDLE}: laptop-mode": 2,
    f"{IDLE}: EXCES (CF)": 2,
    f"{IDLE}: EXCES (USB)": 2,
    "office: Base": 1,
    "office: EXCES (USB)": 2,
    "postmark: Base": 1,
    "postmark: EXCES (USB)": 2,
}


def _energy_run(quick: bool) -> Outcome:
    return _grid_outcome("energy_j", ENERGY_RANKS, "device energy (J)",
                         "EXCES Fig. 9: energy per configuration")


ENERGY = Experiment(
    name="exces-fig9-idle-and-usb",
    title="Idle, every power-saving configuration uses more than Base; on Office and PostMark "
    "the USB ECD increases energy",
    paper=PAPER,
    reproduces="Sec. 6.2, Fig. 9 (idle system; BLTK Office; PostMark)",
    paper_values=ENERGY_RANKS,
    rule=SameOrdering(tolerance_percent=0.5, group_separator=": "),
    quantity="energy rank (paper) / device energy J (wattio)",
    differs="Whole-system power in the paper, disk + ECD device energy in wattio (laptop "
    "mode's page cache costs no device power here, so on the idle system it can only tie "
    "with Base). The idle system is generated (no I/O); Office and PostMark are captured "
    "stand-ins.",
    run=_energy_run,
    functions=("exces", "spindown"),
    sources=(("Sec. 6.2: 'on an idle system, all energy saving systems consume more power than "
             "the Base configuration'; Office: 'USB as ECD increases the power consumption'; "
             "'Postmark ... follows the same trend as BLTK Office'"),),
)


# exces-fig10-io-time: mean I/O time ranks within each BLTK workload (1 = fastest).
IO_RANKS = {f"{w}: {c}": (1 if c == "Base" else 2) for w in BLTK
            for c in ("Base", "EXCES (CF)", "EXCES (USB)")}


def _io_run(quick: bool) -> Outcome:
    return _grid_outcome("mean_io_ms", IO_RANKS, "mean I/O time (ms)",
                         "EXCES Fig. 10: average I/O time")


IO_TIME = Experiment(
    name="exces-fig10-io-time",
    title="The average I/O time rises with an ECD on the BLTK-like workloads",
    paper=PAPER,
    reproduces="Sec. 6.3, Fig. 10 (average I/O time, BLTK Developer and Office)",
    paper_values=IO_RANKS,
    rule=SameOrdering(tolerance_percent=0.5, group_separator=": "),
    quantity="I/O time rank (paper) / mean I/O time ms (wattio)",
    differs="wattio's I/O time includes spin-up waits, as the paper's measured I/O time does. "
    "The CF card's scattered small writes pay its log-block FTL's merges (block copies and "
    "erases, with an assumed count of 4 log blocks: see the catalogue entry); the USB "
    "stick's small writes a per-write cost fitted to a review's measurement.",
    run=_io_run,
    functions=("exces", "spindown"),
    sources=(("Sec. 6.3: 'In both the BLTK benchmarks, the average I/O time increases "
             "substantially for the ECD based solutions'"),),
)


# exces-ecd-power-sensitivity: saving as the ECD's idle power grows (and as its size does).
SWEEP_W = (0.0, 0.1485, 0.5, 1.0)
#: None: the whole 2 GB card less the region of its map's log (the paper's cache).
SWEEP_PAGES = (16_384, 65_536, None)


def _sweep_key(w: float) -> str:
    return f"developer: ECD idle {w:g} W"


def _sweep_run(quick: bool) -> Outcome:
    tasks = [("developer", "Base", None, None)]
    tasks += [("developer", "EXCES (CF)", None, w) for w in SWEEP_W]
    tasks += [("developer", "EXCES (CF)", n, None) for n in SWEEP_PAGES]
    df = _grid(tuple(tasks))
    by_w = df[df["ecd_idle_w"].notna()].set_index("ecd_idle_w")["saving_vs_base_pct"]
    values = {_sweep_key(w): float(by_w[w]) for w in SWEEP_W}

    def figure(ax):
        ax.plot(list(SWEEP_W), [values[_sweep_key(w)] for w in SWEEP_W], marker="o")
        ax.set_xlabel("ECD idle power (W)")
        ax.set_ylabel("device energy saved vs Base (%)")
        ax.set_title("EXCES on developer: saving against the ECD's idle power")

    return Outcome(values=values, table=df, figure=figure,
                   notes=[*_notes(), ("the table also holds cache sizes of 64 MB, 256 MB and "
                          "the whole 2 GB card less its map's log (the paper's) at the CF card's own power")])


SENSITIVITY = Experiment(
    name="exces-ecd-power-sensitivity",
    title="The saving falls as the ECD's idle power grows (the paper's 2-14 % vs earlier "
    "studies' 20-46 %)",
    paper=PAPER,
    reproduces="Sec. 3 and 7: earlier simulation studies treated the ECD's power as negligible "
    "and predicted 20-46 %; measured with the ECD's power, 2-14 %",
    paper_values={_sweep_key(w): float(len(SWEEP_W) - i) for i, w in enumerate(SWEEP_W)},
    rule=SameTrend(tolerance_percent=1.0),
    quantity="trend (paper: down) / saving vs Base % (wattio)",
    differs="The paper states the dependence, not a curve: the paper's side is a falling "
    "series. wattio sweeps the CF card's idle and sleep power (the card kept awake, no "
    "auto-sleep) on the developer stand-in.",
    run=_sweep_run,
    functions=("exces", "spindown"),
    sources=(("Sec. 3: 'when the system is idle, the ECD subsystems consumes as much power as "
             "the disk drive'; Sec. 1: earlier studies 'do not evaluate the power consumption of "
             "the system as a whole'"),),
)

EXPERIMENTS = (FIG8, SAVINGS, ENERGY, IO_TIME, SENSITIVITY)


def headline() -> str:
    from wattio.reproduce import run_one

    r = run_one(FIG8, quick=True)
    if r.outcome is None:
        return f"EXCES Fig. 8 (spin-down timeouts with the flash cache): {r.verdict} ({r.reason})"
    return f"EXCES Fig. 8: the paper's ordering of spin-down timeouts {r.verdict} (quick run)"


SYSTEM = System(prefix="exces", title="EXCES, external caching in energy saving storage",
                experiments=EXPERIMENTS, headline=headline)
