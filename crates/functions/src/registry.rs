//! The function registry: `kind` → configuration, builder, documentation.
//!
//! Every function kind is one [`Kind`] entry in [`KINDS`]. The engine (simulation), the
//! live setup and the Python front door build every function through [`Registry`], so none
//! of them holds function-specific code: adding a function is its own directory plus one
//! line in [`KINDS`]. A kind owns its configuration — a serde struct parsed from its
//! `[[function]]` table with errors naming the full key path (`function[2].window_s: …`),
//! range-checked where it is parsed so that `wattio check` refuses exactly what a run would
//! — its builder, and a generator of random valid configurations for the swarm test.

use std::sync::Arc;
use wattio_core::function::Function;
use wattio_core::trace::TraceSource;

/// Opens a fresh reader over the host's requests (the run's trace or generator).
pub type TraceOpener = Arc<dyn Fn() -> Result<Box<dyn TraceSource>, String> + Send + Sync>;

/// What a builder gets besides its own table.
pub struct BuildContext<'a> {
    /// The table's key path, for errors: `function[2]`.
    pub key: &'a str,
    /// The run's seed: a randomized function derives its own stream from it.
    pub seed: u64,
    /// Where a function draws an identity it writes to its devices (a RAID's array id, as
    /// md's array UUID): the seed in a simulation (at a restart after a simulated crash, the
    /// seed mixed with the restart's time: each start a session of its own), so a run stays
    /// a pure function of (config, trace, seed); fresh for each live session (the clock and
    /// the process id), so two arrays made live with one config are told apart. Never for a
    /// decision.
    pub nonce: u64,
    /// A reader over the requests the host will issue, for offline functions (the oracle);
    /// `None` live, where nobody knows the future.
    pub lookahead: Option<&'a TraceOpener>,
}

impl BuildContext<'_> {
    /// An identity this layer writes to its devices (a RAID's array id, an EXCES pair's):
    /// from the nonce and the table's key path, so two layers of one build (two arrays,
    /// two cache pairs) never draw the same one — with the nonce alone they did, and a
    /// card swapped between two EXCES pairs of one run went unnoticed (the swarm's
    /// operator scenario for EXCES, seed 5, 2026-12-08). Never 0.
    pub fn identity(&self) -> u64 {
        // FNV-1a of the key path, mixed into the nonce before the id's finalizer.
        let key = self.key.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
        });
        wattio_core::journal::new_id(self.nonce ^ key)
    }
}

/// Parses and checks a table; `Ok` means a run would build it.
pub type CheckFn = fn(&toml::Table, &BuildContext) -> Result<(), String>;
/// Builds the function (unattached: devices come at attach).
pub type BuildFn = fn(&toml::Table, &BuildContext) -> Result<Box<dyn Function>, String>;
/// A random valid table (without `kind`) for the swarm test.
pub type SwarmFn = fn(&mut Draw<'_>, &SwarmDevices<'_>) -> toml::Table;

/// One function kind.
pub struct Kind {
    /// The `kind` key of its `[[function]]` table.
    pub kind: &'static str,
    /// Its module under `crates/functions/src/` (family/mechanism).
    pub module: &'static str,
    /// One line for `wattio functions`.
    pub summary: &'static str,
    /// Where the mechanism comes from.
    pub source: &'static str,
    /// Its documentation page.
    pub doc: &'static str,
    pub check: CheckFn,
    pub build: BuildFn,
    /// `None` for kinds the swarm cannot run on its own (Python functions need an
    /// interpreter and a class).
    pub swarm: Option<SwarmFn>,
}

/// Every kind. One line per function.
pub static KINDS: &[&Kind] = &[
    &crate::power::idle::KIND,
    &crate::external::python::KIND,
    &crate::geometry::probe::KIND,
    &crate::raid::stripe::KIND,
    &crate::cache::exces::KIND,
    &crate::raid::paraid::KIND,
    &crate::placement::fs2::KIND,
    &crate::prefetch::launch::IOLAB_KIND,
    &crate::prefetch::launch::FAST_KIND,
];

/// Look a kind up.
pub fn kind(name: &str) -> Option<&'static Kind> {
    KINDS.iter().copied().find(|k| k.kind == name)
}

/// A builder supplied at run time for a kind whose objects live elsewhere (the Python
/// front door's `kind = "python"`). It gets the checked table.
pub type ExternalBuild<'e> =
    &'e mut dyn FnMut(usize, &toml::Table, &BuildContext) -> Result<Box<dyn Function>, String>;

/// Builds the functions of one stack.
pub struct Registry<'e> {
    external: Vec<(&'static str, ExternalBuild<'e>)>,
}

impl Default for Registry<'_> {
    fn default() -> Self {
        Registry::new()
    }
}

impl<'e> Registry<'e> {
    /// The built-in kinds.
    pub fn new() -> Registry<'e> {
        Registry {
            external: Vec::new(),
        }
    }

    /// Build `kind`'s functions with `f` instead of the kind's own builder (after its check).
    pub fn with_external(mut self, kind: &'static str, f: ExternalBuild<'e>) -> Registry<'e> {
        self.external.push((kind, f));
        self
    }

    /// Check one `[[function]]` table (`kind` included).
    pub fn check(table: &toml::Table, ctx: &BuildContext) -> Result<(), String> {
        let (k, rest) = split_kind(table, ctx.key)?;
        (k.check)(&rest, ctx)
    }

    /// Check and build table `index` of a stack.
    pub fn build(
        &mut self,
        table: &toml::Table,
        index: usize,
        ctx: &BuildContext,
    ) -> Result<Box<dyn Function>, String> {
        let (k, rest) = split_kind(table, ctx.key)?;
        (k.check)(&rest, ctx)?;
        match self.external.iter_mut().find(|(n, _)| *n == k.kind) {
            Some((_, f)) => f(index, &rest, ctx),
            None => (k.build)(&rest, ctx),
        }
    }
}

/// The kind of a table, and the table without its `kind` key.
fn split_kind(table: &toml::Table, key: &str) -> Result<(&'static Kind, toml::Table), String> {
    let name = match table.get("kind") {
        Some(toml::Value::String(s)) => s.as_str(),
        Some(v) => {
            return Err(format!(
                "{key}.kind: expected a string, got {}",
                v.type_str()
            ))
        }
        None => {
            return Err(format!(
                "{key}.kind: missing (one of: {})",
                kind_names().join(", ")
            ))
        }
    };
    let k = kind(name).ok_or_else(|| {
        format!(
            "{key}.kind: unknown function kind `{name}` (one of: {})",
            kind_names().join(", ")
        )
    })?;
    let mut rest = table.clone();
    rest.remove("kind");
    Ok((k, rest))
}

fn kind_names() -> Vec<&'static str> {
    KINDS.iter().map(|k| k.kind).collect()
}

/// Parse `table` into `T`, naming the full key path in errors: `function[2].timeout_s:
/// invalid type: string "5", expected f64`.
pub fn parse<T: serde::de::DeserializeOwned>(table: &toml::Table, key: &str) -> Result<T, String> {
    let value = toml::Value::Table(table.clone());
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        // The message alone: its Display repeats the key ("in `timeout_s`") on a line of
        // its own, and names Rust's types where a user wrote TOML.
        let inner = plain(e.into_inner().message());
        if path.is_empty() || path == "." {
            format!("{key}: {inner}")
        } else {
            format!("{key}.{path}: {inner}")
        }
    })
}

/// A deserializer's message in TOML's words: `expected f64` is `expected a number` (also
/// for the JSON configs the Python front door generates).
pub fn plain(msg: &str) -> String {
    let msg = msg.trim_end();
    for (rust, toml) in [
        ("f64", "a number"),
        ("f32", "a number"),
        ("u64", "a whole number ≥ 0"),
        ("u32", "a whole number ≥ 0"),
        ("u16", "a whole number ≥ 0"),
        ("u8", "a whole number ≥ 0"),
        ("usize", "a whole number ≥ 0"),
        ("i64", "a whole number"),
        ("i32", "a whole number"),
    ] {
        if let Some(head) = msg.strip_suffix(&format!("expected {rust}")) {
            return format!("{head}expected {toml}");
        }
    }
    msg.to_string()
}

/// Range checks, with the key in the message.
pub mod range {
    /// A finite number in `lo..=hi`.
    pub fn within(key: &str, v: f64, lo: f64, hi: f64) -> Result<f64, String> {
        if v.is_finite() && (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(format!(
                "{key}: expected a number from {lo} to {hi}, got {v}"
            ))
        }
    }

    /// A whole number in `lo..=hi`.
    pub fn count(key: &str, v: u64, lo: u64, hi: u64) -> Result<u64, String> {
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(format!(
                "{key}: expected a whole number from {lo} to {hi}, got {v}"
            ))
        }
    }
    /// A device-queue priority in `lo..=hi` (the host's I/O has 0).
    pub fn priority(key: &str, v: i64, lo: i8, hi: i8) -> Result<i8, String> {
        if (lo as i64..=hi as i64).contains(&v) {
            Ok(v as i8)
        } else {
            Err(format!(
                "{key}: expected a whole number from {lo} to {hi} (the host's I/O has 0), got {v}"
            ))
        }
    }
}

/// A source of random choices for swarm generators (the swarm's seeded generator behind it).
pub struct Draw<'a>(pub &'a mut dyn FnMut() -> u64);

impl Draw<'_> {
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        (((self.0)() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        ((self.0)() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    pub fn pick<'t, T>(&mut self, items: &'t [T]) -> &'t T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// What a swarm generator may know of the devices under the stack.
pub struct SwarmDevices<'a> {
    pub names: &'a [String],
    /// Each named device's capacity in bytes, in the same order (empty: not known). A
    /// generator sizes what depends on it (a metadata log's region) so that the table is
    /// valid.
    pub capacities: &'a [u64],
}

/// For tests: a seeded stream of draws (Knuth's MMIX linear congruential generator).
#[cfg(test)]
pub(crate) fn lcg(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed;
    move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x
    }
}

/// For tests: `n` tables of a swarm generator over devices `names` (capacities not known),
/// drawn from [`lcg`]`(seed)`, as the TOML text a config holds.
#[cfg(test)]
pub(crate) fn swarm_tables(
    seed: u64,
    n: usize,
    names: &[&str],
    swarm: impl Fn(&mut Draw<'_>, &SwarmDevices<'_>) -> toml::Table,
) -> Vec<String> {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let devices = SwarmDevices {
        names: &names,
        capacities: &[],
    };
    let mut next = lcg(seed);
    (0..n)
        .map(|_| toml::to_string(&swarm(&mut Draw(&mut next), &devices)).unwrap())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(key: &str) -> BuildContext<'_> {
        BuildContext {
            key,
            seed: 1,
            nonce: 1,
            lookahead: None,
        }
    }

    fn table(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn each_layer_of_a_build_draws_its_own_identity() {
        let (a, b) = (ctx("function[0]").identity(), ctx("function[1]").identity());
        assert_ne!(a, b, "two layers of one build");
        assert_eq!(
            a,
            ctx("function[0]").identity(),
            "a pure function of the build"
        );
        let later = BuildContext {
            nonce: 2,
            ..ctx("function[0]")
        };
        assert_ne!(later.identity(), a, "another start");
        assert!(a != 0 && b != 0);
    }

    #[test]
    fn kinds_are_unique_and_documented() {
        let mut names: Vec<_> = KINDS.iter().map(|k| k.kind).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), KINDS.len());
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        for k in KINDS {
            assert!(
                std::path::Path::new(root).join(k.doc).is_file(),
                "{}: no page {}",
                k.kind,
                k.doc
            );
            let dir = format!(
                "{root}/crates/functions/src/{}",
                k.module.replace("::", "/")
            );
            assert!(
                std::path::Path::new(&dir).is_dir()
                    || std::path::Path::new(&format!("{dir}.rs")).is_file(),
                "{}: no module {dir}",
                k.kind
            );
        }
    }

    #[test]
    fn unknown_and_missing_kinds_name_the_key() {
        let e = Registry::check(&table("policy = 'fixed'"), &ctx("function[3]")).unwrap_err();
        assert!(
            e.starts_with("function[3].kind: missing (one of: spindown, python"),
            "{e}"
        );
        let e = Registry::check(&table("kind = 'exces2'"), &ctx("function[0]")).unwrap_err();
        assert!(
            e.starts_with("function[0].kind: unknown function kind `exces2`"),
            "{e}"
        );
        let e = Registry::check(&table("kind = 3"), &ctx("function[0]")).unwrap_err();
        assert_eq!(e, "function[0].kind: expected a string, got integer");
    }

    #[test]
    fn parse_errors_carry_the_key_path() {
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct T {
            timeout_s: f64,
        }
        // One line, in TOML's words, the key said once.
        let e = parse::<T>(&table("timeout_s = 'five'"), "function[2]").unwrap_err();
        assert_eq!(
            e,
            "function[2].timeout_s: invalid type: string \"five\", expected a number"
        );
        let e = parse::<T>(&table("timeout_s = 1.0\nwindow = 2"), "function[2]").unwrap_err();
        assert!(e.contains("unknown field `window`"), "{e}");
        assert!(e.starts_with("function[2]"), "{e}");
    }

    #[test]
    fn an_external_builder_replaces_the_kinds_own_after_its_check() {
        let mut built = Vec::new();
        let mut ext =
            |i: usize, t: &toml::Table, _: &BuildContext| -> Result<Box<dyn Function>, String> {
                built.push((i, t.get("class").cloned()));
                Err("built".into())
            };
        let mut reg = Registry::new().with_external("python", &mut ext);
        let t = table("kind = 'python'\nclass = 'mod:Cls'");
        assert_eq!(
            reg.build(&t, 4, &ctx("function[4]")).err().as_deref(),
            Some("built")
        );
        // The check runs first: a bad table never reaches the external builder.
        let bad = table("kind = 'python'\nclass = 5");
        assert!(reg.build(&bad, 5, &ctx("function[5]")).is_err());
        drop(reg);
        assert_eq!(
            built,
            vec![(4, Some(toml::Value::String("mod:Cls".into())))]
        );
    }

    #[test]
    fn draw_is_uniform_enough_and_in_range() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut d = Draw(&mut next);
        let mut counts = [0u32; 4];
        for _ in 0..4000 {
            counts[d.below(4) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (900..1100).contains(&c)),
            "{counts:?}"
        );
        assert!((0..1000).all(|_| (0.0..1.0).contains(&d.unit())));
    }
}
