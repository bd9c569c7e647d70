//! Energy conservation: for random stacks and random traces, every device's residency over
//! all its states and transitions sums exactly (in ns) to the run's duration, and every host
//! request completes.

use crate::common;

use common::*;
use proptest::prelude::*;
use wattio_core::io::{Op, Request};
use wattio_core::trace::VecSource;
use wattio_devices::Catalogue;
use wattio_engine::{assemble, NullSink, Registry, Simulator};

fn policy(i: u8, timeout: f64) -> String {
    match i % 6 {
        0 => String::new(),
        1 => format!("[[function]]\nkind = \"spindown\"\npolicy = \"fixed\"\ntimeout_s = {timeout}\n"),
        2 => format!("[[function]]\nkind = \"spindown\"\npolicy = \"adaptive\"\ntimeout_s = {timeout}\n"),
        3 => "[[function]]\nkind = \"spindown\"\npolicy = \"share\"\n".into(),
        4 => "[[function]]\nkind = \"spindown\"\npolicy = \"oracle\"\n".into(),
        // Two layers: a never-sleeping layer above a fixed timeout.
        _ => format!("[[function]]\nkind = \"spindown\"\npolicy = \"never\"\n[[function]]\nkind = \"spindown\"\npolicy = \"fixed\"\ntimeout_s = {timeout}\n"),
    }
}

fn trace() -> impl Strategy<Value = Vec<Request>> {
    prop::collection::vec(
        (
            0u64..20_000_000_000,
            0u64..999_000_000,
            1u32..65_536,
            any::<bool>(),
            0u16..3,
        ),
        0..120,
    )
    .prop_map(|v| {
        let mut t = 0;
        v.into_iter()
            .map(|(gap, off, len, w, dev)| {
                // Heavy tail of gaps: most short, some long enough to sleep through.
                t += if gap % 4 == 0 { gap } else { gap / 1000 };
                let mut r = Request::new(t, if w { Op::Write } else { Op::Read }, off, len);
                r.dev = dev;
                r
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn residency_sums_to_duration(reqs in trace(), p in 0u8..6, timeout in 0.0f64..15.0, until in prop::option::of(1.0f64..400.0)) {
        let mut text = disk().replace("name = \"disk\"", "name = \"disk\"\ncount = 3");
        if let Some(u) = until {
            text.push_str(&format!("\n[run]\nuntil_s = {u}\n"));
        }
        text.push_str(&policy(p, timeout));
        let cfg = wattio_engine::RunConfig::from_toml("prop.toml", &text).unwrap();
        let n = reqs.len() as u64;
        let op = opener(reqs.clone());
        let asm = assemble(&cfg, &Catalogue::default(), Some(&op), &mut Registry::new(), 0).unwrap();
        let mut src = VecSource::new(reqs);
        let out = Simulator::new(asm.stack, asm.devices)
            .run(&mut src, until.map(|u| (u * 1e9) as u64), 0, &mut NullSink)
            .unwrap();
        for d in &out.devices {
            let rows = d.ledger_rows(out.end);
            let total: u64 = rows.iter().map(|r| r.residency_ns).sum();
            prop_assert_eq!(total, out.end, "device {}", d.info.name);
            let e: f64 = rows.iter().map(|r| r.energy_j).sum();
            prop_assert!((e - d.energy_j(out.end)).abs() < 1e-9);
            // Nothing draws less than standby nor more than seek power on average.
            let secs = out.end as f64 / 1e9;
            if secs > 0.0 {
                prop_assert!(e >= 0.2 * secs - 1e-9);
            }
        }
        if until.is_none() {
            prop_assert_eq!(out.requests, n);
        }
    }
}
