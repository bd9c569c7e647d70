//! Per-class comparison of simulated vs measured response times for one drive (a
//! diagnostic for model development).
//! `cargo run --release -p wattio-devices --example disksim_debug DIR DRIVE`
use std::path::PathBuf;
use wattio_devices::disksim::{
    import_parv,
    validate::{parse_trace, replay},
};
use wattio_devices::mechanical::MechanicalDisk;

fn disk_def_clone(d: &MechanicalDisk) -> wattio_devices::mechanical::MechanicalDef {
    d.def().clone()
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let dir = PathBuf::from(a.get(1).cloned().unwrap_or_default());
    let d = a.get(2).cloned().unwrap_or_default();
    let imp = import_parv(&dir.join(format!("{d}.parv"))).unwrap();
    for u in &imp.unsupported {
        println!("unsupported: {u}");
    }
    let text = std::fs::read_to_string(dir.join(format!("{d}.trace"))).unwrap();
    let lines = parse_trace(&text, "t").unwrap();
    let mut disk = MechanicalDisk::new(imp.timing).unwrap();
    let map = MechanicalDisk::new(disk_def_clone(&disk)).unwrap();
    let sim = replay(&mut disk, &lines);
    for op in [wattio_core::io::Op::Read, wattio_core::io::Op::Write] {
        let mut s: Vec<f64> = vec![];
        let mut m: Vec<f64> = vec![];
        for (l, x) in lines.iter().zip(&sim) {
            if l.op == op {
                s.push(*x);
                m.push(l.service_us);
            }
        }
        s.sort_by(f64::total_cmp);
        m.sort_by(f64::total_cmp);
        let q = |v: &Vec<f64>, p: f64| v[((v.len() as f64 * p) as usize).min(v.len() - 1)] / 1000.0;
        println!("{op:?} n={} sim mean {:.4} q05 {:.3} q10 {:.3} q25 {:.3} q50 {:.3} q75 {:.3} q90 {:.3}", s.len(),
            s.iter().sum::<f64>()/s.len() as f64/1000.0, q(&s,0.05), q(&s,0.1), q(&s,0.25), q(&s,0.5), q(&s,0.75), q(&s,0.9));
        println!("{op:?} n={} mea mean {:.4} q05 {:.3} q10 {:.3} q25 {:.3} q50 {:.3} q75 {:.3} q90 {:.3}", m.len(),
            m.iter().sum::<f64>()/m.len() as f64/1000.0, q(&m,0.05), q(&m,0.1), q(&m,0.25), q(&m,0.5), q(&m,0.75), q(&m,0.9));
    }
    if std::env::var("DUMP").is_ok() {
        for (l, x) in
            lines
                .iter()
                .zip(&sim)
                .take(if std::env::var("DUMP").as_deref() == Ok("all") {
                    usize::MAX
                } else {
                    60
                })
        {
            let a = map.layout().ltop(l.blkno);
            let b = map.layout().ltop(l.blkno + l.bcount as u64 - 1);
            let bpt = a
                .map(|p| map.layout().blocks_per_track(p.cyl, p.head))
                .unwrap_or(0);
            println!(
                "{:?} {} {} sim {:.3} meas {:.3} delay {:.3} at {:?} to {:?} bpt {}",
                l.op,
                l.blkno,
                l.bcount,
                x / 1000.0,
                l.service_us / 1000.0,
                l.delay_us / 1000.0,
                a.map(|p| (p.cyl, p.head, p.sector)),
                b.map(|p| (p.cyl, p.head, p.sector)),
                bpt
            );
        }
    }
}
