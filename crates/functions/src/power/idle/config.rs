//! `kind = "spindown"`: its configuration, checks, builder and swarm generator.

use super::{Adaptive, AdaptiveParams, Fixed, IdleTimeout, Oracle, Share, ShareParams};
use crate::registry::{self, range, BuildContext, Draw, Kind, SwarmDevices};
use serde::Deserialize;
use wattio_core::function::Function;
use wattio_core::time::{secs_to_ns, NS_PER_S};

pub static KIND: Kind = Kind {
    kind: "spindown",
    module: "power::idle",
    summary: "disk spin-down after idleness: never, fixed, adaptive, share, or the offline oracle",
    source: "Douglis et al. 1995 (adaptive); Helmbold et al., MobiCom 1996 (share)",
    doc: "docs/functions/spindown.md",
    check: |t, ctx| SpinDown::parse(t, ctx.key).map(|_| ()),
    build: |t, ctx| SpinDown::parse(t, ctx.key)?.build(ctx),
    swarm: Some(swarm),
};

/// The longest timeout accepted, in seconds (about 31.7 years): longer is "never", and a
/// bound keeps every deadline far from the clock's end.
pub const MAX_TIMEOUT_S: f64 = 1e9;
/// The most experts the share policy may vote with: each costs two floats and work on
/// every idle period, so a typo (`experts = 1e9`) must not allocate gigabytes.
pub const MAX_EXPERTS: u64 = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Never spin down (always-on, as a layer).
    Never,
    Fixed,
    Adaptive,
    Share,
    Oracle,
}

/// The keys every policy takes.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Common {
    policy: Policy,
    /// Devices to manage (default: every device with a sleep state).
    #[serde(default)]
    devices: Vec<String>,
    /// Sleep state (default: each device's deepest).
    #[serde(default)]
    sleep_state: Option<String>,
}

const COMMON_KEYS: [&str; 3] = ["policy", "devices", "sleep_state"];

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoKeys {}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FixedKeys {
    timeout_s: f64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AdaptiveKeys {
    /// The initial timeout.
    timeout_s: Option<f64>,
    min_timeout_s: Option<f64>,
    max_timeout_s: Option<f64>,
    increase: Option<f64>,
    decrease_s: Option<f64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShareKeys {
    experts: Option<u64>,
    max_multiple: Option<f64>,
    learning_rate: Option<f64>,
    share_rate: Option<f64>,
}

/// A checked spin-down configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct SpinDown {
    pub devices: Vec<String>,
    pub sleep_state: Option<String>,
    pub policy: Checked,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Checked {
    Never,
    Fixed { timeout_s: f64 },
    Adaptive(AdaptiveParams),
    Share(ShareParams),
    Oracle,
}

impl SpinDown {
    /// Parse and range-check a `kind = "spindown"` table (without `kind`); `key` is its path.
    pub fn parse(t: &toml::Table, key: &str) -> Result<SpinDown, String> {
        let mut common = toml::Table::new();
        let mut rest = t.clone();
        for k in COMMON_KEYS {
            if let Some(v) = rest.remove(k) {
                common.insert(k.to_string(), v);
            }
        }
        let c: Common = registry::parse(&common, key)?;
        let name = |p: Policy| match p {
            Policy::Never => "never",
            Policy::Fixed => "fixed",
            Policy::Adaptive => "adaptive",
            Policy::Share => "share",
            Policy::Oracle => "oracle",
        };
        // A key of another policy gets a message that says which policy takes it.
        let scoped = |e: String| format!("{e} (policy `{}`)", name(c.policy));
        let k = |sub: &str| format!("{key}.{sub}");
        let timeout = |sub: &str, v: f64| range::within(&k(sub), v, 0.0, MAX_TIMEOUT_S);
        let policy = match c.policy {
            Policy::Never => {
                registry::parse::<NoKeys>(&rest, key).map_err(scoped)?;
                Checked::Never
            }
            Policy::Oracle => {
                registry::parse::<NoKeys>(&rest, key).map_err(scoped)?;
                Checked::Oracle
            }
            Policy::Fixed => {
                // Only when nothing else is there: `timeout_sec = 5` is a misspelt key, and
                // the parse below names it (with the key it expected).
                if rest.is_empty() {
                    return Err(format!(
                        "{key}.timeout_s: the fixed policy needs a timeout in seconds"
                    ));
                }
                let f: FixedKeys = registry::parse(&rest, key).map_err(scoped)?;
                Checked::Fixed {
                    timeout_s: timeout("timeout_s", f.timeout_s)?,
                }
            }
            Policy::Adaptive => {
                let a: AdaptiveKeys = registry::parse(&rest, key).map_err(scoped)?;
                let d = AdaptiveParams::default();
                let secs = |sub: &str, v: Option<f64>, dflt: u64| -> Result<u64, String> {
                    Ok(match v {
                        Some(v) => secs_to_ns(timeout(sub, v)?),
                        None => dflt,
                    })
                };
                let p = AdaptiveParams {
                    initial: secs("timeout_s", a.timeout_s, d.initial)?,
                    min: secs("min_timeout_s", a.min_timeout_s, d.min)?,
                    max: secs("max_timeout_s", a.max_timeout_s, d.max)?,
                    increase: match a.increase {
                        // A multiplier below 1 would shorten the timeout after a spin-down
                        // that did not pay: the opposite of the rule.
                        Some(v) => range::within(&k("increase"), v, 1.0, 1000.0)?,
                        None => d.increase,
                    },
                    decrease: secs("decrease_s", a.decrease_s, d.decrease)?,
                };
                if p.min > p.max {
                    return Err(format!(
                        "{key}.min_timeout_s: {} s is above max_timeout_s ({} s)",
                        p.min as f64 / NS_PER_S as f64,
                        p.max as f64 / NS_PER_S as f64
                    ));
                }
                Checked::Adaptive(p)
            }
            Policy::Share => {
                let s: ShareKeys = registry::parse(&rest, key).map_err(scoped)?;
                let d = ShareParams::default();
                Checked::Share(ShareParams {
                    experts: match s.experts {
                        Some(n) => range::count(&k("experts"), n, 1, MAX_EXPERTS)? as usize,
                        None => d.experts,
                    },
                    max_multiple: match s.max_multiple {
                        Some(v) => range::within(&k("max_multiple"), v, 1e-6, 1e6)?,
                        None => d.max_multiple,
                    },
                    learning_rate: match s.learning_rate {
                        Some(v) => range::within(&k("learning_rate"), v, 0.0, 1e6)?,
                        None => d.learning_rate,
                    },
                    share_rate: match s.share_rate {
                        Some(v) if v.is_finite() && (0.0..1.0).contains(&v) => v,
                        Some(v) => {
                            return Err(format!(
                                "{key}.share_rate: expected a fraction from 0 to below 1, got {v}"
                            ))
                        }
                        None => d.share_rate,
                    },
                })
            }
        };
        Ok(SpinDown {
            devices: c.devices,
            sleep_state: c.sleep_state,
            policy,
        })
    }

    pub fn build(self, ctx: &BuildContext) -> Result<Box<dyn Function>, String> {
        let (devs, sleep) = (self.devices, self.sleep_state);
        Ok(match self.policy {
            Checked::Never => Box::new(IdleTimeout::new("always-on", devs, sleep, || Fixed(None))),
            Checked::Fixed { timeout_s } => {
                let t = secs_to_ns(timeout_s);
                let name = format!("fixed-{timeout_s}s");
                Box::new(IdleTimeout::new(name, devs, sleep, move || Fixed(Some(t))))
            }
            Checked::Adaptive(p) => {
                Box::new(IdleTimeout::new("adaptive", devs, sleep, move || {
                    Adaptive::new(p.clone())
                }))
            }
            Checked::Share(p) => Box::new(IdleTimeout::new("share", devs, sleep, move || {
                Share::new(p.clone())
            })),
            Checked::Oracle => {
                let Some(open) = ctx.lookahead.cloned() else {
                    return Err(format!(
                        "{}.policy: the oracle needs to see the future requests, which only a simulation has (not a live session)",
                        ctx.key
                    ));
                };
                Box::new(Oracle::new(devs, sleep, Box::new(move || open())))
            }
        })
    }
}

/// A random valid configuration: any policy, timeouts from 0 to a minute, sometimes a
/// subset of the devices.
fn swarm(d: &mut Draw<'_>, devices: &SwarmDevices<'_>) -> toml::Table {
    let mut t = toml::Table::new();
    let policy = *d.pick(&["never", "fixed", "adaptive", "share", "oracle"]);
    t.insert("policy".into(), policy.into());
    let secs = |d: &mut Draw<'_>| (d.unit() * 60.0 * 1000.0).round() / 1000.0;
    match policy {
        "fixed" => {
            t.insert("timeout_s".into(), secs(d).into());
        }
        "adaptive" => {
            let lo = secs(d);
            t.insert("min_timeout_s".into(), lo.into());
            t.insert("max_timeout_s".into(), (lo + secs(d)).into());
            t.insert("timeout_s".into(), secs(d).into());
        }
        "share" => {
            t.insert("experts".into(), (1 + d.below(40) as i64).into());
        }
        _ => {}
    }
    if !devices.names.is_empty() && d.chance(0.3) {
        let one = d.pick(devices.names).clone();
        t.insert("devices".into(), toml::Value::Array(vec![one.into()]));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SpinDown, String> {
        SpinDown::parse(&toml::from_str(text).unwrap(), "function[1]")
    }

    #[test]
    fn each_policy_takes_its_own_keys_with_defaults() {
        assert_eq!(
            parse("policy = 'fixed'\ntimeout_s = 5").unwrap().policy,
            Checked::Fixed { timeout_s: 5.0 }
        );
        let a = parse("policy = 'adaptive'\nmin_timeout_s = 2\ndevices = ['d0']").unwrap();
        assert_eq!(a.devices, vec!["d0".to_string()]);
        assert_eq!(
            a.policy,
            Checked::Adaptive(AdaptiveParams {
                min: 2 * NS_PER_S,
                ..AdaptiveParams::default()
            })
        );
        assert_eq!(
            parse("policy = 'share'\nexperts = 3").unwrap().policy,
            Checked::Share(ShareParams {
                experts: 3,
                ..ShareParams::default()
            })
        );
        assert_eq!(parse("policy = 'oracle'").unwrap().policy, Checked::Oracle);
    }

    #[test]
    fn the_audits_configs_are_refused_with_their_key() {
        let cases = [
            // The audit's panic: min above max.
            (
                "policy = 'adaptive'\nmin_timeout_s = 100\nmax_timeout_s = 10",
                "function[1].min_timeout_s: 100 s is above max_timeout_s (10 s)",
            ),
            // The audit's 8 GB allocation.
            (
                "policy = 'share'\nexperts = 1000000000",
                "function[1].experts: expected a whole number from 1 to 10000, got 1000000000",
            ),
            (
                "policy = 'fixed'",
                "function[1].timeout_s: the fixed policy needs a timeout in seconds",
            ),
            (
                "policy = 'fixed'\ntimeout_sec = 5",
                "function[1].timeout_sec: unknown field `timeout_sec`, expected `timeout_s` (policy `fixed`)",
            ),
            (
                "policy = 'fixed'\ntimeout_s = -1",
                "function[1].timeout_s: expected a number from 0 to 1000000000, got -1",
            ),
            (
                "policy = 'fixed'\ntimeout_s = nan",
                "function[1].timeout_s: expected a number from 0 to 1000000000, got NaN",
            ),
            (
                "policy = 'adaptive'\nincrease = 0.5",
                "function[1].increase: expected a number from 1 to 1000, got 0.5",
            ),
            (
                "policy = 'share'\nshare_rate = 1",
                "function[1].share_rate: expected a fraction from 0 to below 1, got 1",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).unwrap_err(), want, "{text}");
        }
        // Type errors and keys of another policy name the key and the policy.
        let e = parse("policy = 'fixed'\ntimeout_s = '5'").unwrap_err();
        assert!(
            e.starts_with("function[1].timeout_s: invalid type: string \"5\""),
            "{e}"
        );
        let e = parse("policy = 'fixed'\ntimeout_s = 5\nexperts = 3").unwrap_err();
        assert!(
            e.contains("unknown field `experts`") && e.ends_with("(policy `fixed`)"),
            "{e}"
        );
        let e = parse("policy = 'sometimes'").unwrap_err();
        assert!(
            e.starts_with("function[1].policy: unknown variant `sometimes`"),
            "{e}"
        );
    }

    #[test]
    fn the_oracle_is_refused_where_there_is_no_future() {
        let ctx = BuildContext {
            key: "function[0]",
            seed: 0,
            nonce: 0,
            lookahead: None,
        };
        let e = parse("policy = 'oracle'")
            .unwrap()
            .build(&ctx)
            .err()
            .unwrap();
        assert!(e.starts_with("function[0].policy: the oracle needs"), "{e}");
    }

    #[test]
    fn every_swarm_draw_is_valid() {
        for t in crate::registry::swarm_tables(7, 500, &["a", "b"], swarm) {
            parse(&t).unwrap();
        }
    }
}
