use super::*;
use wattio_core::function::Action;
use wattio_core::io::{Op, Request, Status};
use wattio_core::testing::{always_on, disk, replied, submitted, Harness};
use wattio_core::time::NS_PER_S;
use wattio_core::trace::VecSource;

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
    // Computed by hand (see docs/functions/spindown.md): weights 0.07351, 0.92649.
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

// The layer itself, driven event by event through the scripted harness. The test disk
// (`wattio_core::testing::disk`) breaks even at 10.5 s and wakes in 2 s.

const S: Nanos = NS_PER_S;

fn fixed(t: Nanos, devices: Vec<String>) -> IdleTimeout<Fixed> {
    IdleTimeout::new("fixed", devices, None, move || Fixed(Some(t)))
}

fn read(id: u64, dev: u16, at: Nanos) -> wattio_core::io::Io {
    let mut r = Request::new(at, Op::Read, 0, 4096);
    r.dev = dev;
    r.io(id)
}

#[test]
fn fixed_timeout_sleeps_after_the_idle_period_and_cancels_on_a_request() {
    let mut h = Harness::new(fixed(5 * S, vec![]), vec![disk(0, "d")]).unwrap();
    let standby = h.state(0, "standby");
    // Idle from the start: the timer is armed for 5 s.
    assert_eq!(
        h.start(0),
        vec![Action::SetTimer {
            timer: 0,
            at: 5 * S
        }]
    );
    // A request at 1 s cancels it and passes through untouched.
    let io = read(1, 0, S);
    assert_eq!(
        h.request(S, io),
        vec![Action::CancelTimer { timer: 0 }, Action::Submit(io)]
    );
    // Its completion at 1.25 s re-arms for 6.25 s and replies.
    let back = h.complete(S + S / 4, io, Status::Ok);
    assert_eq!(
        back[0],
        Action::SetTimer {
            timer: 0,
            at: 6 * S + S / 4
        }
    );
    assert_eq!(replied(&back).len(), 1);
    assert_eq!(replied(&back)[0].io, io);
    // The timer fires: spin down, once.
    assert_eq!(
        h.timer(6 * S + S / 4, 0),
        vec![Action::SetPower {
            device: 0,
            state: standby
        }]
    );
    assert_eq!(h.timer(7 * S, 0), vec![], "a second expiry does nothing");
    assert_eq!(h.counter("spin_down_commands"), 1.0);
    // The next request does not cancel a timer that already fired.
    assert_eq!(
        h.request(20 * S, read(2, 0, 20 * S)),
        vec![Action::Submit(read(2, 0, 20 * S))]
    );
}

#[test]
fn outstanding_io_holds_the_timer_until_the_last_completion() {
    let mut h = Harness::new(fixed(5 * S, vec![]), vec![disk(0, "d")]).unwrap();
    h.start(0);
    let (a, b) = (read(1, 0, S), read(2, 0, S));
    h.request(S, a);
    assert_eq!(
        h.request(S, b),
        vec![Action::Submit(b)],
        "already busy: nothing to cancel"
    );
    // a back, b still out: a reply and no timer.
    let back = h.complete(2 * S, a, Status::Ok);
    assert_eq!(back.len(), 1);
    assert_eq!(replied(&back)[0].io, a);
    assert_eq!(submitted(&back), vec![]);
    // A stale expiry now must not spin the disk down under b.
    assert_eq!(h.timer(3 * S, 0), vec![]);
    // b back: now idle, the timer is armed from its completion.
    assert_eq!(
        h.complete(4 * S, b, Status::Ok)[0],
        Action::SetTimer {
            timer: 0,
            at: 9 * S
        }
    );
}

#[test]
fn never_arms_nothing_and_unmanaged_devices_pass_through() {
    let mut h = Harness::new(
        IdleTimeout::new("always-on", vec![], None, || Fixed(None)),
        vec![disk(0, "d")],
    )
    .unwrap();
    assert_eq!(h.start(0), vec![]);
    let io = read(1, 0, S);
    assert_eq!(h.request(S, io), vec![Action::Submit(io)]);
    assert_eq!(h.complete(2 * S, io, Status::Ok).len(), 1);

    // Only `d1` managed; `flash` has no sleep state and `d0` is not asked for.
    let devs = vec![disk(0, "d0"), disk(1, "d1"), always_on(2, "flash")];
    let mut h = Harness::new(fixed(S, vec!["d1".into()]), devs).unwrap();
    assert_eq!(h.start(0), vec![Action::SetTimer { timer: 1, at: S }]);
    let io = read(1, 0, S);
    assert_eq!(h.request(S, io), vec![Action::Submit(io)]);
}

#[test]
fn attach_refuses_what_it_cannot_manage() {
    let e = Harness::new(fixed(S, vec!["nope".into()]), vec![disk(0, "d")])
        .err()
        .unwrap();
    assert_eq!(e, "devices: unknown device `nope` (devices: d)");
    let e = Harness::new(fixed(S, vec!["f".into()]), vec![always_on(0, "f")])
        .err()
        .unwrap();
    assert_eq!(e, "devices: device `f` has no sleep state to spin down to");
    let l = IdleTimeout::new("x", vec![], Some("sleep".into()), || Fixed(Some(S)));
    let e = Harness::new(l, vec![disk(0, "d")]).err().unwrap();
    assert!(
        e.starts_with("sleep_state: device `d` has no sleep state `sleep`"),
        "{e}"
    );
}

#[test]
fn adaptive_layer_doubles_after_a_spin_down_that_did_not_pay() {
    let p = AdaptiveParams {
        initial: 4 * S,
        min: S,
        max: 100 * S,
        increase: 2.0,
        decrease: S,
    };
    let layer = IdleTimeout::new("adaptive", vec![], None, move || Adaptive::new(p.clone()));
    let mut h = Harness::new(layer, vec![disk(0, "d")]).unwrap();
    assert_eq!(
        h.start(0),
        vec![Action::SetTimer {
            timer: 0,
            at: 4 * S
        }]
    );
    let standby = h.state(0, "standby");
    assert_eq!(
        h.timer(4 * S, 0),
        vec![Action::SetPower {
            device: 0,
            state: standby
        }]
    );
    // Woken at 9 s: asleep 5 s < break-even 10.5 s, a bad spin-down.
    let io = read(1, 0, 9 * S);
    h.request(9 * S, io);
    assert_eq!(
        h.complete(12 * S, io, Status::Ok)[0],
        Action::SetTimer {
            timer: 0,
            at: 20 * S
        }
    );
    assert_eq!(h.counter("adaptive_bad_spin_downs"), 1.0);
    assert_eq!(h.counter("adaptive_final_timeout_s"), 8.0);
}

#[test]
fn oracle_sleeps_through_gaps_longer_than_break_even_and_wakes_just_in_time() {
    // Requests at 1 s and 40 s: after the first completes (1.5 s) the gap is 38.5 s > 10.5 s,
    // so it spins down at once and sets the wake-up 2 s (the spin-up) before 40 s.
    let mut reqs = vec![
        Request::new(S, Op::Read, 0, 4096),
        Request::new(40 * S, Op::Read, 0, 4096),
    ];
    reqs.iter_mut().for_each(|r| r.dev = 0);
    let open = reqs.clone();
    let oracle = Oracle::new(
        vec![],
        None,
        Box::new(move || Ok(Box::new(VecSource::new(open.clone())) as Box<_>)),
    );
    let mut h = Harness::new(oracle, vec![disk(0, "d")]).unwrap();
    let (standby, idle) = (h.state(0, "standby"), h.state(0, "idle"));
    // At start the first request is 1 s away: below break-even, stay up.
    assert_eq!(h.start(0), vec![]);
    let io = reqs[0].io(0);
    h.request(S, io);
    assert_eq!(
        h.complete(S + S / 2, io, Status::Ok)[..2],
        [
            Action::SetPower {
                device: 0,
                state: standby
            },
            Action::SetTimer {
                timer: 0,
                at: 38 * S
            }
        ]
    );
    assert_eq!(
        h.timer(38 * S, 0),
        vec![Action::SetPower {
            device: 0,
            state: idle
        }]
    );
    assert_eq!(h.counter("spin_down_commands"), 1.0);
}
