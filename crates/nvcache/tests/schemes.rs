//! Bit-change counts of each write scheme on hand-built lines, the hybrid cache's ownership
//! policy, wear levelling and lifetime arithmetic, worked by hand.

use wattio_nvcache::cost;
use wattio_nvcache::line::{self, Encoding, Line};
use wattio_nvcache::{Hybrid, Llc, LlcConfig, Memory, MissCount, WearLevelling};

fn one_word(w0: u64) -> Line {
    [w0, 0, 0, 0, 0, 0, 0, 0]
}

/// Writes `new` over a frame holding `old` (written first from an all-zero frame) and
/// returns the bits the second write programmed.
fn second_write(enc: Encoding, old: &Line, new: &Line) -> u32 {
    let (mut stored, mut flags) = ([0u64; 8], [0u64; 4]);
    line::write(enc, &mut stored, &mut flags, old);
    let p = line::write(enc, &mut stored, &mut flags, new);
    assert_eq!(
        line::decode(enc, &stored, &flags),
        *new,
        "{enc:?} must read back what it wrote"
    );
    p.bits
}

#[test]
fn differential_and_read_before_write_count_changed_bits_only() {
    // 0x00FF -> 0x0F0F: bits 4..8 cleared, bits 8..12 set: 8 changes; and byte 63 0x80 -> 0.
    let old = [0x00FF, 0, 0, 0, 0, 0, 0, 0x80 << 56];
    let new = one_word(0x0F0F);
    assert_eq!(second_write(Encoding::Dw, &old, &new), 9);
    assert_eq!(second_write(Encoding::Rbw, &old, &new), 9);
    assert_eq!(second_write(Encoding::Bl, &old, &new), 512);
    assert_eq!(
        second_write(Encoding::Dw, &new, &new),
        0,
        "a silent write programs nothing"
    );
}

#[test]
fn data_inverting_flips_a_unit_when_it_saves_cells_and_counts_the_flag() {
    let enc = Encoding::Di { unit: 4 };
    let (mut stored, mut flags) = ([0u64; 8], [0u64; 4]);
    // 0 -> 0xF in unit 0: as is 4 cells, inverted 0 cells + the flag = 1.
    let p = line::write(enc, &mut stored, &mut flags, &one_word(0xF));
    assert_eq!(p.bits, 1);
    assert_eq!((stored[0], flags[0]), (0, 1), "stored inverted, flag set");
    assert_eq!(line::decode(enc, &stored, &flags), one_word(0xF));
    // 0xF -> 0x0: stored 0 with flag 1; as is: 0 cells + the flag back to 0 = 1; inverted 4.
    let p = line::write(enc, &mut stored, &mut flags, &one_word(0));
    assert_eq!((p.bits, stored[0], flags[0]), (1, 0, 0));
    // 0 -> 0b0111: as is 3, inverted 1 + flag 1 = 2: inverted (stored 0b1000, flag 1).
    let p = line::write(enc, &mut stored, &mut flags, &one_word(0b0111));
    assert_eq!((p.bits, stored[0], flags[0]), (2, 0b1000, 1));
    // A tie (0 -> 0b0011 from a clear unit: 2 as is, 2 + 1 inverted) stays as is.
    assert_eq!(second_write(enc, &one_word(0), &one_word(0b0011)), 2);
    // DI(2): 0 -> 0b11 inverted for 1 cell; DI(8): 0 -> 0x07 as is, 3 cells.
    assert_eq!(
        second_write(Encoding::Di { unit: 2 }, &one_word(0), &one_word(0b11)),
        1
    );
    assert_eq!(
        second_write(Encoding::Di { unit: 8 }, &one_word(0), &one_word(0x07)),
        3
    );
    // DI(64) on an all-ones line: each of the 8 words inverted, 8 flag cells.
    assert_eq!(
        second_write(Encoding::Di { unit: 64 }, &[0; 8], &[u64::MAX; 8]),
        8
    );
    assert_eq!(Encoding::Di { unit: 4 }.flag_bits(), 128);
    assert!(Encoding::Di { unit: 3 }.check().is_err());
}

/// A one-set cache of four ways.
fn one_set(hybrid: Option<Hybrid>, wear_levelling: WearLevelling) -> Llc {
    Llc::new(LlcConfig {
        bytes: 256,
        ways: 4,
        encoding: Encoding::Dw,
        hybrid,
        wear_levelling,
        read_before_write: false,
    })
    .unwrap()
}

#[test]
fn hybrid_cache_moves_ownership_after_n_th_successive_buffer_misses() {
    let mut c = one_set(Some(Hybrid::new(3)), WearLevelling::default());
    let mut mem = Memory::default();
    let (a, b) = (0u64, 1u64 << 20); // both map to the only set
    c.read(a, &mut mem);
    c.read(b, &mut mem);
    // A's first write takes the free buffer: 3 STT-RAM bits, no PRAM bits.
    c.write(a, &one_word(0b111), &mut mem);
    assert_eq!(c.buffer_owner(a), Some(a));
    assert_eq!((c.traffic.n_wb, c.traffic.n_upper), (3, 0));
    // B misses the buffer twice: written into PRAM (1 then 1 more bit), A keeps it.
    c.write(b, &one_word(1), &mut mem);
    c.write(b, &one_word(3), &mut mem);
    assert_eq!(c.buffer_owner(a), Some(a));
    assert_eq!(
        (c.traffic.buffer_misses, c.traffic.n_upper, c.traffic.swaps),
        (2, 2, 0)
    );
    // The third successive miss moves the buffer: A's line goes back into A's PRAM block
    // (0 -> 0b111, 3 bits of n_swap), B's line into the buffer (0b111 -> 0b1111: 1 bit).
    c.write(b, &one_word(0b1111), &mut mem);
    assert_eq!(c.buffer_owner(b), Some(b));
    assert_eq!(
        (c.traffic.swaps, c.traffic.n_swap, c.traffic.n_wb),
        (1, 3, 4)
    );
    assert_eq!(
        c.read(a, &mut mem),
        one_word(0b111),
        "A's data survived the swap"
    );
    assert_eq!(
        c.read(b, &mut mem),
        one_word(0b1111),
        "B's data is served from the buffer"
    );
    // A hit by the owner breaks A's run of misses: miss, owner write, miss = no transfer.
    c.write(a, &one_word(0), &mut mem);
    c.write(b, &one_word(0), &mut mem);
    c.write(a, &one_word(1), &mut mem);
    c.write(a, &one_word(0), &mut mem);
    assert_eq!(c.buffer_owner(b), Some(b));
    assert_eq!(c.traffic.swaps, 1);
}

/// Two blocks that are not the owner write in turn: per block (the default) neither ever
/// misses N_th times in a row, so the owner keeps the buffer; per set the run counts both,
/// and the block that missed last takes the buffer at the N_th-th miss.
#[test]
fn the_two_readings_of_the_miss_counter_differ_on_interleaved_writers() {
    for (miss_count, owner_after) in [(MissCount::Block, 0u64), (MissCount::Set, 2 << 20)] {
        let mut c = one_set(
            Some(Hybrid {
                n_th: 3,
                miss_count,
            }),
            WearLevelling::default(),
        );
        let mut mem = Memory::default();
        let (a, b, d) = (0u64, 1u64 << 20, 2u64 << 20);
        for k in [a, b, d] {
            c.read(k, &mut mem);
        }
        c.write(a, &one_word(1), &mut mem); // A takes the free buffer
                                            // B, D, D: three successive misses in the set; D's own run is two.
        c.write(b, &one_word(1), &mut mem);
        c.write(d, &one_word(1), &mut mem);
        assert_eq!(c.buffer_owner(a), Some(a), "{miss_count:?}: two misses");
        c.write(d, &one_word(3), &mut mem);
        assert_eq!(
            c.buffer_owner(owner_after),
            Some(owner_after),
            "{miss_count:?}: after B, D, D"
        );
        let swaps = if miss_count == MissCount::Set { 1 } else { 0 };
        assert_eq!((c.traffic.buffer_misses, c.traffic.swaps), (3, swaps));
        assert_eq!(c.read(d, &mut mem), one_word(3), "{miss_count:?}: D's data");
        assert_eq!(c.read(a, &mut mem), one_word(1), "{miss_count:?}: A's data");
    }
}

#[test]
fn hybrid_cache_with_n_th_one_swaps_on_every_buffer_miss() {
    let mut c = one_set(Some(Hybrid::new(1)), WearLevelling::default());
    let mut mem = Memory::default();
    let (a, b) = (0u64, 1u64 << 20);
    c.read(a, &mut mem);
    c.read(b, &mut mem);
    c.write(a, &one_word(1), &mut mem);
    c.write(b, &one_word(2), &mut mem);
    c.write(a, &one_word(4), &mut mem);
    assert_eq!((c.traffic.swaps, c.buffer_owner(a)), (2, Some(a)));
}

#[test]
fn evicting_the_owner_writes_the_buffer_line_to_memory() {
    let mut c = one_set(Some(Hybrid::new(2)), WearLevelling::default());
    let mut mem = Memory::default();
    c.read(0, &mut mem);
    c.write(0, &one_word(0xAB), &mut mem);
    for k in 1..=4u64 {
        c.read(k << 20, &mut mem); // four other lines push line 0 out (LRU)
    }
    assert_eq!(mem.get(0), one_word(0xAB));
    assert_eq!(c.buffer_owner(0), None);
}

/// Random reads and write-backs on a tiny LLC under every scheme read back the last data
/// written (the schemes move bits, never lose them).
#[test]
fn every_scheme_returns_the_last_data_written() {
    let encs = [
        Encoding::Bl,
        Encoding::Dw,
        Encoding::Rbw,
        Encoding::Di { unit: 2 },
        Encoding::Di { unit: 16 },
    ];
    for enc in encs {
        for hybrid in [None, Some(Hybrid::new(2))] {
            let wear_levelling = WearLevelling {
                set_rotation: Some(7),
                line_rotation: Some(3),
            };
            let cfg = LlcConfig {
                bytes: 64 * 4 * 4,
                ways: 4,
                encoding: enc,
                hybrid,
                wear_levelling,
                read_before_write: false,
            };
            let mut c = Llc::new(cfg).unwrap();
            let mut mem = Memory::default();
            let mut truth = std::collections::HashMap::new();
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            for _ in 0..5000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key = x % 24;
                if x >> 60 < 6 {
                    let data = [x, x.rotate_left(7), 0, x >> 3, 1, 2, 3, x];
                    c.read(key, &mut mem);
                    c.write(key, &data, &mut mem);
                    truth.insert(key, data);
                } else {
                    let got = c.read(key, &mut mem);
                    assert_eq!(
                        got,
                        truth.get(&key).copied().unwrap_or([0; 8]),
                        "{enc:?} {hybrid:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn line_rotation_spreads_one_hot_line_over_the_ways() {
    let hot = |wl| {
        let mut c = one_set(None, wl);
        let mut mem = Memory::default();
        c.read(0, &mut mem);
        for i in 0..8u64 {
            c.write(0, &one_word(i & 1), &mut mem); // bit 0 toggles: 1 bit per write after the first
        }
        c
    };
    let still = hot(WearLevelling::default());
    // The fill programs nothing (zeros over zeros), then 8 writes toggle bit 0: 7 changes
    // (0 -> 0 first), all in frame 0.
    assert_eq!(still.heat_map(), &[7, 0, 0, 0]);
    assert_eq!(still.max_cell_writes(), 7);
    let moving = hot(WearLevelling {
        set_rotation: None,
        line_rotation: Some(2),
    });
    assert!(moving.traffic.wl_moves > 0);
    assert!(
        moving.max_cell_writes() < 7,
        "rotation spread bit 0's writes: {}",
        moving.max_cell_writes()
    );
    assert!(
        moving.heat_map().iter().filter(|&&b| b > 0).count() >= 3,
        "{:?}",
        moving.heat_map()
    );
}

#[test]
fn set_rotation_moves_every_set_and_counts_the_cells_it_rewrites() {
    // Two sets of one way, rotating after every PRAM write. Line 0 (set 0) is filled with
    // 0xFF: 8 cells of frame 0. The rotation then moves set 0 onto frame 1 (8 cells: 0xFF
    // over zeros) and set 1's empty slot onto frame 0 (8 cells: zeros over 0xFF): n_wl 16.
    let mut c = Llc::new(LlcConfig {
        bytes: 128,
        ways: 1,
        encoding: Encoding::Dw,
        hybrid: None,
        wear_levelling: WearLevelling {
            set_rotation: Some(1),
            line_rotation: None,
        },
        read_before_write: false,
    })
    .unwrap();
    let mut mem = Memory::default();
    mem.lines.insert(0, one_word(0xFF));
    assert_eq!(c.read(0, &mut mem), one_word(0xFF));
    assert_eq!(c.traffic.n_lower, 8);
    assert_eq!((c.traffic.n_wl, c.traffic.wl_moves), (16, 2));
    assert_eq!(c.heat_map(), &[16, 8]);
    assert_eq!(
        c.max_cell_writes(),
        2,
        "frame 0's low 8 cells: the fill and the move"
    );
    // The line is still there, read from its new frame without a fill.
    assert_eq!(c.read(0, &mut mem), one_word(0xFF));
    assert_eq!((c.traffic.read_hits, c.traffic.n_lower), (1, 8));
}

#[test]
fn lifetime_is_endurance_times_span_over_the_hottest_cells_writes() {
    // A cell written 1,000 times in 2 s reaches 10^6 writes after 2,000 s.
    assert_eq!(cost::lifetime_s(1e6, 1000, 2.0), 2000.0);
    assert_eq!(cost::lifetime_s(1e6, 0, 2.0), f64::INFINITY);
    // Through the cache: bit 0 toggled 7 times (above) in 2·10^9 instructions at 2 GHz,
    // CPI 1 = 1 s: the PRAM cell (10^6 writes, NVMain's mean) lasts 10^6 / 7 s.
    let mut c = one_set(None, WearLevelling::default());
    let mut mem = Memory::default();
    c.read(0, &mut mem);
    for i in 0..8u64 {
        c.write(0, &one_word(i & 1), &mut mem);
    }
    let secs = cost::Clock::default().seconds(2_000_000_000);
    assert_eq!(secs, 1.0);
    let k = cost::costs(
        c.config(),
        &c.traffic,
        secs,
        c.max_cell_writes(),
        c.max_buffer_cell_writes(),
    );
    assert!((k.lifetime_s - 1e6 / 7.0).abs() < 1e-6, "{}", k.lifetime_s);
}

#[test]
fn a_read_before_each_write_is_charged_with_any_encoding_when_asked() {
    // One fill and eight write-hits of one line: nine PRAM line writes. With
    // `read_before_write` each is priced with a 512-cell read first (2 pJ a cell): 9 × 512 ×
    // 2 pJ = 9.216 nJ more than without, whatever the encoding; bits programmed unchanged.
    let run = |encoding: Encoding, read_before_write: bool| {
        let mut c = Llc::new(LlcConfig {
            bytes: 256,
            ways: 4,
            encoding,
            hybrid: None,
            wear_levelling: WearLevelling::default(),
            read_before_write,
        })
        .unwrap();
        let mut mem = Memory::default();
        c.read(0, &mut mem);
        for i in 0..8u64 {
            c.write(0, &one_word(i * 3), &mut mem);
        }
        assert_eq!((c.traffic.pram_writes, c.traffic.read_hits), (9, 0));
        let k = cost::costs(c.config(), &c.traffic, 1.0, 1, 0);
        (k.pram_read_j, c.traffic.pram_bits())
    };
    let extra = 9.0 * 512.0 * cost::pram().read_j;
    assert!((extra - 9.216e-9).abs() < 1e-18);
    for enc in [Encoding::Dw, Encoding::Di { unit: 8 }] {
        let (plain, bits) = run(enc, false);
        let (rbw, bits_rbw) = run(enc, true);
        assert_eq!(plain, 0.0, "{enc:?}");
        assert!((rbw - extra).abs() < 1e-18, "{enc:?}: {rbw}");
        assert_eq!(bits, bits_rbw);
    }
    // The RBW encoding is DW with the reads: the same price with or without the flag.
    assert!((run(Encoding::Rbw, false).0 - extra).abs() < 1e-18);
    assert_eq!(run(Encoding::Rbw, true), run(Encoding::Rbw, false));
}

#[test]
fn cell_energies_and_areas_follow_the_cited_cells() {
    // PRAM RESET: (300 µA)²·1 kΩ·40 ns + 300 µA·0.3 V·40 ns = 3.6 + 3.6 pJ; SET: (150 µA)²·
    // 1 kΩ·150 ns + 150 µA·0.3 V·150 ns = 3.375 + 6.75 pJ; mean 8.6625 pJ.
    assert!((cost::pram().write_j - 8.6625e-12).abs() < 1e-18);
    // 4 MiB of DW lines at 9 F², F = 90 nm: 2^25 cells · 9 · 8100 nm² = 2.4461 mm².
    let dw = LlcConfig {
        bytes: 4 << 20,
        ways: 16,
        encoding: Encoding::Dw,
        hybrid: None,
        wear_levelling: WearLevelling::default(),
        read_before_write: false,
    };
    assert!(
        (cost::area_mm2(&dw) - 2.446_118_092_8).abs() < 1e-6,
        "{}",
        cost::area_mm2(&dw)
    );
    // HC adds 4096 STT-RAM lines at 57.5 F² and an owner bit per block.
    let hc = LlcConfig {
        hybrid: Some(Hybrid::new(4)),
        ..dw
    };
    let extra = (4096.0 * 512.0 * 57.5 + 65536.0 * 9.0) * 8100e-18 * 1e6;
    assert!((cost::area_mm2(&hc) - cost::area_mm2(&dw) - extra).abs() < 1e-9);
}

#[test]
fn stores_merge_their_bytes_into_the_line() {
    let mut l = [u64::MAX; 8];
    line::put_bytes(&mut l, 8, &[1, 2, 3, 4, 5, 6, 7, 8]); // one aligned word
    assert_eq!(l[1], 0x0807_0605_0403_0201);
    line::put_bytes(&mut l, 1, &[0]); // one byte inside a word
    assert_eq!(l[0], 0xFFFF_FFFF_FFFF_00FF);
    line::put_bytes(&mut l, 14, &[0xAA, 0xBB, 0xCC, 0xDD]); // across two words
    assert_eq!((l[1], l[2]), (0xBBAA_0605_0403_0201, 0xFFFF_FFFF_FFFF_DDCC));
    line::put_bytes(&mut l, 56, &[0; 8]); // the last word
    assert_eq!(l[7], 0);
}
