use super::*;
use wattio_core::time::NS_PER_S;

#[test]
fn adaptive_updates_by_hand() {
    let mut p = Adaptive::new(AdaptiveParams {
        initial: 10 * NS_PER_S,
        min: NS_PER_S,
        max: 60 * NS_PER_S,
        increase: 2.0,
        decrease: NS_PER_S,
    });
    p.set_break_even(10 * NS_PER_S);
    // Slept 5 s < break-even 10 s: a bad spin-down doubles the timeout.
    p.observe(15 * NS_PER_S, Some(10 * NS_PER_S), true);
    assert_eq!(p.current(), 20 * NS_PER_S);
    // Slept 20 s ≥ 10 s: good, one second less.
    p.observe(40 * NS_PER_S, Some(20 * NS_PER_S), true);
    assert_eq!(p.current(), 19 * NS_PER_S);
    // Short gap, stayed up: nothing learned.
    p.observe(5 * NS_PER_S, Some(19 * NS_PER_S), false);
    assert_eq!(p.current(), 19 * NS_PER_S);
    // Stayed up through 12 s > break-even: missed opportunity, one second less.
    p.observe(12 * NS_PER_S, Some(19 * NS_PER_S), false);
    assert_eq!(p.current(), 18 * NS_PER_S);
    // Clamped to max.
    for _ in 0..10 {
        p.observe(18 * NS_PER_S + 1, Some(18 * NS_PER_S), true);
    }
    assert_eq!(p.current(), 60 * NS_PER_S);
}

#[test]
fn share_one_update_by_hand() {
    let mut p = Share::new(ShareParams {
        experts: 2,
        max_multiple: 1.0,
        learning_rate: 4.0,
        share_rate: 0.08,
    });
    p.set_break_even(NS_PER_S);
    assert_eq!(p.timeout(), Some(750_000_000)); // (0.5 + 1.0) / 2
    p.observe(750_000_000, None, false);
    // Computed by hand (see docs/functions.md): weights 0.07351, 0.92649.
    assert!(
        (p.predicted() - 0.963_244_505_777_478_8).abs() < 1e-12,
        "{}",
        p.predicted()
    );
}

#[test]
fn share_learns_to_sleep_early_on_long_gaps() {
    let mut p = Share::new(ShareParams::default());
    p.set_break_even(10 * NS_PER_S);
    for _ in 0..50 {
        p.observe(1000 * NS_PER_S, None, true);
    }
    // The cheapest expert on long gaps is the shortest timeout (10 s / 25 = 0.4 s); sharing
    // keeps some weight on every expert, so the vote settles just above it, far below the
    // initial mean of 5.2 s.
    let t = p.timeout().unwrap();
    assert!((400_000_000..1_000_000_000).contains(&t), "{t}");
}
