//! `examples/laptop-exces.toml` runs: EXCES in front of the paper's disk and CF card, the
//! paper's 5 s spin-down below it, an hour of the example's diurnal workload.

use std::sync::Arc;
use wattio_core::TraceSource;
use wattio_devices::Catalogue;
use wattio_engine::{assemble, NullSink, Opener, Registry, RunConfig, Simulator};
use wattio_workload::Generator;

#[test]
fn the_exces_example_buffers_writes_while_the_disk_sleeps() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/laptop-exces.toml"
    );
    let text = std::fs::read_to_string(path)
        .expect("the example")
        .replace("duration_s = 86400", "duration_s = 3600");
    let cfg = RunConfig::from_toml("laptop-exces.toml", &text).expect("a valid config");
    let cat = Catalogue::embedded().expect("catalogue");
    let w = cfg.workload.clone().expect("a workload");
    let seed = cfg.run.seed;
    let opener: Opener =
        Arc::new(move || Ok(Box::new(Generator::new(&w, seed)?) as Box<dyn TraceSource>));
    let asm = assemble(&cfg, &cat, Some(&opener), &mut Registry::new(), 0).expect("assemble");
    let mut src = opener().expect("source");
    let out = Simulator::new(asm.stack, asm.devices)
        .run(src.as_mut(), None, 0, &mut NullSink)
        .expect("run");
    assert!(out.requests > 0);
    let exces = &out.stack.layers()[0];
    let counter = |name: &str| {
        exces
            .counters()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .expect("an EXCES counter")
    };
    // Light I/O: the disk sleeps between bursts, so writes of pages not in the ECD are
    // buffered there (Algorithm 1) and stay, dirty: at this rate the miss rate never nears
    // 1000/min, so nothing reconfigures and nothing is evicted.
    let absorbed = counter("absorbed_writes");
    assert!(absorbed > 0.0);
    assert_eq!(counter("reconfigurations"), 0.0);
    assert_eq!(counter("mapped_pages"), absorbed);
    assert_eq!(counter("dirty_pages"), absorbed);
    assert_eq!(counter("requests"), out.requests as f64);
}
