use super::*;

fn cfg(extra: &str) -> WorkloadConfig {
    toml::from_str(&format!("duration_s = 10000\n{extra}")).unwrap()
}

fn collect(c: &WorkloadConfig, seed: u64) -> Vec<Request> {
    let mut g = Generator::new(c, seed).unwrap();
    let mut v = Vec::new();
    while let Some(r) = g.next_request().unwrap() {
        v.push(r);
    }
    v
}

#[test]
fn poisson_rate_and_mix() {
    let c = cfg("arrivals = \"poisson\"\nrate = 5\nread_fraction = 0.25\nsize = { dist = \"choice\", values = [4096, 65536], weights = [3, 1] }");
    let v = collect(&c, 1);
    // 50,000 expected; Poisson σ ≈ 224: 5 σ.
    assert!((v.len() as f64 - 50_000.0).abs() < 1_120.0, "{}", v.len());
    let reads = v.iter().filter(|r| r.op == Op::Read).count() as f64 / v.len() as f64;
    assert!((reads - 0.25).abs() < 0.01, "{reads}");
    let small = v.iter().filter(|r| r.len == 4096).count() as f64 / v.len() as f64;
    assert!((small - 0.75).abs() < 0.01, "{small}");
    assert!(v.windows(2).all(|w| w[0].arrival <= w[1].arrival));
    assert!(v
        .iter()
        .all(|r| r.offset % 4096 == 0 && r.offset + r.len as u64 <= 1 << 30));
}

#[test]
fn same_seed_same_trace_other_seed_other_trace() {
    let c = cfg("arrivals = \"poisson\"\nrate = 2\npopularity = { dist = \"zipf\", s = 1.0 }");
    assert_eq!(collect(&c, 9), collect(&c, 9));
    assert_ne!(collect(&c, 9), collect(&c, 10));
}

#[test]
fn fill_gives_the_same_trace_as_next_request() {
    let c = cfg("arrivals = \"poisson\"\nrate = 3\npopularity = { dist = \"zipf\", s = 0.9 }\nsequential_fraction = 0.3");
    let want = collect(&c, 4);
    let mut g = Generator::new(&c, 4).unwrap();
    let mut got = Vec::new();
    loop {
        let n = g.fill(&mut got, 1000).unwrap();
        if n < 1000 {
            break;
        }
    }
    assert!(want.len() > 20_000, "{}", want.len());
    assert_eq!(got, want);
    assert_eq!(g.fill(&mut got, 10).unwrap(), 0, "stays at the end");
}

#[test]
fn diurnal_peaks_at_peak_hour() {
    let c: WorkloadConfig = toml::from_str(
        "arrivals = \"diurnal\"\nduration_s = 86400\nrate = 2\namplitude = 0.9\npeak_hour = 14",
    )
    .unwrap();
    let v = collect(&c, 4);
    let hour = |h: u64| {
        v.iter()
            .filter(|r| r.arrival / 3_600_000_000_000 == h)
            .count() as f64
    };
    // Expected per hour: 7200·(1 + 0.9·cos(2π(h + ½ − 14)/24)); at 14 h ≈ 13,634, at 2 h ≈ 766.
    let exp =
        |h: f64| 7200.0 * (1.0 + 0.9 * (std::f64::consts::TAU * (h + 0.5 - 14.0) / 24.0).cos());
    for h in [2u64, 8, 14, 20] {
        let e = exp(h as f64);
        assert!(
            (hour(h) - e).abs() < 5.0 * e.sqrt() + 0.01 * e,
            "hour {h}: {} vs {e}",
            hour(h)
        );
    }
}

#[test]
fn onoff_is_silent_when_off() {
    let c = cfg("arrivals = \"onoff\"\nrate = 50\non_mean_s = 10\noff_mean_s = 100");
    let v = collect(&c, 2);
    // Long-run fraction of time ON is 10/110: expected count 50·10000·10/110 ≈ 45,455.
    let n = v.len() as f64;
    assert!((n - 45_455.0).abs() < 0.25 * 45_455.0, "{n}");
    let long_gaps = v
        .windows(2)
        .filter(|w| w[1].arrival - w[0].arrival > 20_000_000_000)
        .count();
    assert!(long_gaps > 30, "{long_gaps}");
}

#[test]
fn bursts_and_sequential_streams() {
    let c = cfg("arrivals = \"poisson\"\nrate = 1\nburst_mean = 4\nburst_gap_ms = 2\nsequential_fraction = 1.0\ndevices = 3");
    let v = collect(&c, 5);
    let mean_burst = {
        let gaps2ms = v
            .windows(2)
            .filter(|w| w[1].arrival - w[0].arrival == 2_000_000)
            .count();
        v.len() as f64 / (v.len() - gaps2ms) as f64
    };
    assert!((mean_burst - 4.0).abs() < 0.2, "{mean_burst}");
    // One stream, always sequential after the first: each request starts where the last ended
    // (unless clipped at the end of the footprint).
    let seq = v
        .windows(2)
        .filter(|w| w[1].offset == w[0].offset + w[0].len as u64)
        .count();
    assert!(seq as f64 / v.len() as f64 > 0.99);
    for d in 0..3 {
        let share = v.iter().filter(|r| r.dev == d).count() as f64 / v.len() as f64;
        assert!((share - 1.0 / 3.0).abs() < 0.03, "{share}");
    }
}

#[test]
fn errors_name_the_key() {
    let c = cfg("arrivals = \"poisson\"\nread_fraction = 1.5");
    assert!(c
        .validate()
        .unwrap_err()
        .starts_with("workload.read_fraction"));
    let c = cfg("arrivals = \"onoff\"");
    assert!(c.validate().unwrap_err().starts_with("workload.on_mean_s"));
    let e = toml::from_str::<WorkloadConfig>("arrivals = \"weekly\"\nduration_s = 1").unwrap_err();
    assert!(e.to_string().contains("weekly"), "{e}");
}

#[test]
fn a_size_is_a_number_of_bytes_or_a_table() {
    let p = "arrivals = \"poisson\"\n";
    assert_eq!(
        cfg(&format!("{p}size = 8192")).size,
        SizeDist::Fixed { bytes: 8192 }
    );
    assert_eq!(
        cfg(&format!("{p}size = {{ dist = \"fixed\", bytes = 8192 }}")).size,
        SizeDist::Fixed { bytes: 8192 }
    );
    assert_eq!(
        cfg(&format!(
            "{p}size = {{ dist = \"choice\", values = [512, 4096], weights = [1, 3] }}"
        ))
        .size,
        SizeDist::Choice {
            values: vec![512, 4096],
            weights: vec![1.0, 3.0]
        }
    );
    let err = |v: &str| {
        toml::from_str::<WorkloadConfig>(&format!("duration_s = 1\n{p}size = {v}"))
            .unwrap_err()
            .to_string()
    };
    let e = err("\"4k\"");
    assert!(
        e.contains("a number of bytes (4096), or a table with dist = \"fixed\", \"choice\" or \"lognormal\""),
        "{e}"
    );
    assert!(err("5000000000").contains("a number of bytes below 4 GiB"));
    assert!(err("-1").contains("integer `-1`"), "{}", err("-1"));
    let e = err("{ dist = \"fixed\", byte = 1 }");
    assert!(e.contains("unknown field `byte`"), "{e}");
    let e = err("{ dist = \"gamma\" }");
    assert!(e.contains("unknown variant `gamma`"), "{e}");
}

#[test]
fn a_popularity_is_uniform_or_a_table() {
    let p = "arrivals = \"poisson\"\n";
    assert_eq!(
        cfg(&format!("{p}popularity = \"uniform\"")).popularity,
        Popularity::Uniform
    );
    assert_eq!(
        cfg(&format!("{p}popularity = {{ dist = \"uniform\" }}")).popularity,
        Popularity::Uniform
    );
    assert_eq!(
        cfg(&format!("{p}popularity = {{ dist = \"zipf\", s = 0.9 }}")).popularity,
        Popularity::Zipf { s: 0.9 }
    );
    let err = |v: &str| {
        toml::from_str::<WorkloadConfig>(&format!("duration_s = 1\n{p}popularity = {v}"))
            .unwrap_err()
            .to_string()
    };
    let e = err("\"zipf\"");
    assert!(
        e.contains("zipf needs its exponent: write { dist = \"zipf\", s = 0.9 }"),
        "{e}"
    );
    let e = err("\"pareto\"");
    assert!(
        e.contains("unknown variant `pareto`, expected `uniform` or `zipf`"),
        "{e}"
    );
    let e = err("1");
    assert!(
        e.contains("expected \"uniform\", or a table with dist"),
        "{e}"
    );
    let e = err("{ dist = \"zipf\" }");
    assert!(e.contains("missing field `s`"), "{e}");
}

#[test]
fn absurd_durations_and_rates_are_refused_with_their_key() {
    let e = toml::from_str::<WorkloadConfig>("arrivals = \"poisson\"\nrate = 1\nduration_s = 1e30")
        .unwrap()
        .validate();
    assert_eq!(
        e.unwrap_err(),
        "workload.duration_s: expected at most 1000000000 s, got 1000000000000000000000000000000"
    );
    let e = cfg("arrivals = \"poisson\"\nrate = 1e30").validate();
    assert_eq!(
        e.unwrap_err(),
        "workload.rate: expected at most 10000000 bursts per second, got 1000000000000000000000000000000"
    );
    // 10^7 bursts/s for 10^4 s of 1 request: 10^11 requests.
    let e = cfg("arrivals = \"poisson\"\nrate = 1e7\nburst_mean = 1")
        .validate()
        .unwrap_err();
    assert!(
        e.starts_with("workload.duration_s: 10000 s at 10000000 bursts/s"),
        "{e}"
    );
    assert!(e.ends_with("shorten the run or set max_requests"), "{e}");
    cfg("arrivals = \"poisson\"\nrate = 1e7\nburst_mean = 1\nmax_requests = 1000")
        .validate()
        .unwrap();
}

#[test]
fn a_rate_the_bursts_cannot_keep_is_reported_not_silently_capped() {
    // 100 bursts/s of 11 requests 1 ms apart: each burst is busy 10 ms, so bursts start at
    // 1 / (0.01 + 0.01) = 50 /s, half the configured rate.
    let c = cfg("arrivals = \"poisson\"\nrate = 100\nburst_mean = 11\nburst_gap_ms = 1");
    let a = Generator::new(&c, 1).unwrap().assumptions();
    assert_eq!(a.len(), 2, "{a:?}");
    assert_eq!(
        a[1],
        "bursts do not overlap: the realised burst rate is about 50.0000 /s, 50.0 % below the configured 100 /s (each burst lasts about 0.01 s)"
    );
    // A burst-free rate is honoured and says nothing more.
    let c = cfg("arrivals = \"poisson\"\nrate = 100\nburst_mean = 1");
    assert_eq!(Generator::new(&c, 1).unwrap().assumptions().len(), 1);
}
