//! Cell parameters, energy, lifetime and area. Each number names its source; derived numbers
//! say how they were derived.

use crate::line::LINE_BITS;
use crate::llc::{LlcConfig, Traffic};
use serde::{Deserialize, Serialize};

/// One memory technology's cell, as the cost model uses it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Energy to program one cell (J), the mean of its SET and RESET.
    pub write_j: f64,
    /// Energy to read one cell (J).
    pub read_j: f64,
    /// Latency of one line write (s): the longest programming pulse.
    pub write_s: f64,
    /// Writes a cell survives.
    pub endurance: f64,
    /// Cell area in F².
    pub area_f2: f64,
    /// Leakage power per cell (W).
    pub leak_w: f64,
}

/// Programming energy of a cell driven with current `i` for `t` seconds: the cell's Joule
/// heat at `r` ohms plus the access device's drop `v` (I²·R·t + I·V·t).
fn pulse_j(i: f64, r: f64, v: f64, t: f64) -> f64 {
    i * i * r * t + i * v * t
}

/// PRAM: NVSim `sample_PCRAM.cell` (SEAL-UCSB/NVSim; from Lee et al., ISCA 2009): 90 nm,
/// 9 F², R_on 1 kΩ, read energy 2 pJ, RESET 300 µA × 40 ns, SET 150 µA × 150 ns, 0.3 V
/// across the access device. Write energy: the mean of SET and RESET by `pulse_j` at R_on.
/// Endurance: NVMain `Config/PCM_ISSCC_2012_4GB.config` (SEAL-UCSB/NVmain),
/// `EnduranceDistMean 1000000`. Leakage: the same NVMain file's `Eleak 3120.202` mJ per
/// second for its 4 GiB device, spread over its 2^35 cells.
pub fn pram() -> Cell {
    let reset = pulse_j(300e-6, 1e3, 0.3, 40e-9);
    let set = pulse_j(150e-6, 1e3, 0.3, 150e-9);
    Cell {
        write_j: (reset + set) / 2.0,
        read_j: 2e-12,
        write_s: 150e-9,
        endurance: 1e6,
        area_f2: 9.0,
        leak_w: 3.120202 / (4.0 * 1024.0 * 1024.0 * 1024.0 * 8.0),
    }
}

/// STT-RAM: NVSim `sample_STTRAM.cell`: 57.5 F², SET = RESET energy 0.193895 pJ, 5 ns
/// pulses; read at 0.25 V on R_on 6 kΩ for one 5 ns pulse (V²/R·t, derived). Endurance 10^15
/// writes is an assumption (the cell file gives none; STT-RAM is usually quoted above 10^15),
/// so the PRAM array, not the buffer, sets the lifetime. Leakage: none counted (non-volatile
/// cells; peripheral leakage is outside this array-only model, as for PRAM's).
pub fn stt_ram() -> Cell {
    Cell {
        write_j: 0.193895e-12,
        read_j: 0.25 * 0.25 / 6e3 * 5e-9,
        write_s: 5e-9,
        endurance: 1e15,
        area_f2: 57.5,
        leak_w: 0.0,
    }
}

/// The feature size of NVSim's PCRAM sample cell (`-ProcessNode: 90`), used for both
/// arrays' areas.
pub const FEATURE_M: f64 = 90e-9;

/// How instructions become seconds: NVMain's PCM configuration runs its CPU at
/// `CPUFreq 2000` (MHz); one instruction per cycle is this model's assumption.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Clock {
    pub hz: f64,
    pub cpi: f64,
}

impl Default for Clock {
    fn default() -> Self {
        Clock { hz: 2e9, cpi: 1.0 }
    }
}

impl Clock {
    pub fn seconds(&self, instructions: u64) -> f64 {
        instructions as f64 * self.cpi / self.hz
    }
}

/// Energy by part (J), lifetime (s) and array area (mm²) of one run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Costs {
    pub pram_write_j: f64,
    pub pram_read_j: f64,
    pub stt_write_j: f64,
    pub stt_read_j: f64,
    pub leak_j: f64,
    pub total_j: f64,
    /// Time until the most-written cell reaches its endurance at the trace's rate.
    pub lifetime_s: f64,
    pub area_mm2: f64,
}

/// Seconds until a cell written `writes` times in `seconds` reaches `endurance`
/// (infinite if never written).
pub fn lifetime_s(endurance: f64, writes: u64, seconds: f64) -> f64 {
    if writes == 0 {
        f64::INFINITY
    } else {
        endurance * seconds / writes as f64
    }
}

/// Cell-array area (mm², no periphery) of an LLC: PRAM data and DI flag cells plus one
/// owner bit per block for the hybrid cache, and the STT-RAM buffers (one line per set).
pub fn area_mm2(cfg: &LlcConfig) -> f64 {
    let f2 = FEATURE_M * FEATURE_M * 1e6;
    let frames = (cfg.sets() * u64::from(cfg.ways)) as f64;
    let owner_bits = if cfg.hybrid.is_some() { 1.0 } else { 0.0 };
    let pram_cells = frames * (f64::from(LINE_BITS + cfg.encoding.flag_bits()) + owner_bits);
    let stt_cells = if cfg.hybrid.is_some() {
        cfg.sets() as f64 * f64::from(LINE_BITS)
    } else {
        0.0
    };
    (pram_cells * pram().area_f2 + stt_cells * stt_ram().area_f2) * f2
}

/// The costs of a run of `seconds` with `traffic`, whose most-written PRAM and STT-RAM
/// cells were written `max_pram` and `max_stt` times.
pub fn costs(cfg: &LlcConfig, t: &Traffic, seconds: f64, max_pram: u64, max_stt: u64) -> Costs {
    let (p, s) = (pram(), stt_ram());
    let bits = f64::from(LINE_BITS);
    let pram_write_j = t.pram_bits() as f64 * p.write_j;
    // Reads of PRAM lines: L1 misses that hit outside a write buffer, and RBW's read before
    // every PRAM write. Write-buffer reads: its owner's hits and each swap's read-out.
    let mut pram_reads = (t.read_hits - t.buffer_reads) as f64;
    if cfg.reads_before_write() {
        pram_reads += t.pram_writes as f64;
    }
    let pram_read_j = pram_reads * bits * p.read_j;
    let stt_write_j = t.n_wb as f64 * s.write_j;
    let stt_read_j = (t.buffer_reads + t.swaps) as f64 * bits * s.read_j;
    let flag = f64::from(cfg.encoding.flag_bits());
    let cells = (cfg.sets() * u64::from(cfg.ways)) as f64 * (bits + flag);
    let leak_j = cells * p.leak_w * seconds;
    let life =
        lifetime_s(p.endurance, max_pram, seconds).min(lifetime_s(s.endurance, max_stt, seconds));
    Costs {
        pram_write_j,
        pram_read_j,
        stt_write_j,
        stt_read_j,
        leak_j,
        total_j: pram_write_j + pram_read_j + stt_write_j + stt_read_j + leak_j,
        lifetime_s: life,
        area_mm2: area_mm2(cfg),
    }
}
