//! Reading model parameters from a `[timing]` table, with errors that name the key.

/// Largest time or rate accepted: beyond it no real device lives, and nanosecond arithmetic
/// on it would overflow.
pub(crate) const MAX_VALUE: f64 = 1e12;

pub(crate) fn f64_key(t: &toml::Table, key: &str) -> Result<f64, String> {
    opt_f64(t, key)?.ok_or_else(|| format!("timing.{key}: missing (expected a number)"))
}

pub(crate) fn opt_f64(t: &toml::Table, key: &str) -> Result<Option<f64>, String> {
    match t.get(key) {
        None => Ok(None),
        Some(toml::Value::Float(f)) if f.is_finite() && (0.0..=MAX_VALUE).contains(f) => {
            Ok(Some(*f))
        }
        Some(toml::Value::Integer(i)) if *i >= 0 && (*i as f64) <= MAX_VALUE => Ok(Some(*i as f64)),
        Some(v) => Err(format!(
            "timing.{key}: expected a number in [0, {MAX_VALUE:e}], got {v}"
        )),
    }
}

/// Longest accepted latency parameter (1 s) and slowest accepted rate (1 kB/s): NAND and
/// controller operations take µs to ms, links move at least kB/s, and every simulated time
/// a model sums from them stays far from u64 overflow.
pub(crate) const MAX_US: f64 = 1e6;
pub(crate) const MIN_MBPS: f64 = 1e-3;

/// `timing.<key>` = `v` µs as nanoseconds, at most [`MAX_US`].
pub(crate) fn latency_us(key: &str, v: f64) -> Result<wattio_core::time::Nanos, String> {
    if v > MAX_US {
        return Err(format!(
            "timing.{key}: expected at most {MAX_US} µs, got {v}"
        ));
    }
    Ok(wattio_core::time::secs_to_ns(v / 1e6))
}

/// `timing.<key>` in MB/s, at least [`MIN_MBPS`], as bytes per second.
pub(crate) fn rate_mbps(t: &toml::Table, key: &str) -> Result<f64, String> {
    let v = positive(t, key)?;
    if v < MIN_MBPS {
        return Err(format!(
            "timing.{key}: expected at least {MIN_MBPS} MB/s, got {v}"
        ));
    }
    Ok(v * 1e6)
}

pub(crate) fn positive(t: &toml::Table, key: &str) -> Result<f64, String> {
    let v = f64_key(t, key)?;
    if v >= 1e-9 {
        Ok(v)
    } else {
        Err(format!("timing.{key}: expected a number > 0, got {v}"))
    }
}

/// A count of bytes or similar: a whole number ≥ 1 (no ceiling: capacities exceed 1e12).
pub(crate) fn count(t: &toml::Table, key: &str) -> Result<u64, String> {
    match t.get(key) {
        None => Err(format!(
            "timing.{key}: missing (expected a whole number ≥ 1)"
        )),
        Some(toml::Value::Integer(i)) if *i >= 1 => Ok(*i as u64),
        Some(toml::Value::Float(f)) if *f >= 1.0 && f.fract() == 0.0 && *f <= 9.0e15 => {
            Ok(*f as u64)
        }
        Some(v) => Err(format!(
            "timing.{key}: expected a whole number ≥ 1, got {v}"
        )),
    }
}

/// Keys a model accepts besides its own: `model`, and `sources` (key → where the value
/// comes from).
pub(crate) fn check_keys(t: &toml::Table, allowed: &[&str]) -> Result<(), String> {
    for k in t.keys() {
        if k != "model" && k != "sources" && !allowed.contains(&k.as_str()) {
            return Err(format!(
                "timing.{k}: unknown key (expected one of: {})",
                allowed.join(", ")
            ));
        }
    }
    Ok(())
}
