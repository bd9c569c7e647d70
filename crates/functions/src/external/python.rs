//! `kind = "python"`: a function written in Python (a subclass of `wattio.Function`).
//!
//! The registry checks its table here like any other kind's; the Python front door (the
//! `wattio` package, through `crates/py`) supplies the builder that wraps the instantiated
//! object, so simulation and live serving build it through the same registry.

use crate::registry::{self, BuildContext, Kind};
use serde::Deserialize;
use wattio_core::function::Function;

pub static KIND: Kind = Kind {
    kind: "python",
    module: "external::python",
    summary: "a function written in Python: a subclass of wattio.Function, `class` and `params`",
    source: "wattio",
    doc: "docs/functions/python.md",
    check: |t, ctx| PythonConfig::parse(t, ctx.key).map(|_| ()),
    build: build_without_python,
    swarm: None,
};

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PythonConfig {
    /// `module:Class`, or `file.py:Class` relative to the config's directory.
    pub class: String,
    /// Keyword arguments for the constructor.
    #[serde(default)]
    pub params: toml::Table,
}

impl PythonConfig {
    pub fn parse(t: &toml::Table, key: &str) -> Result<PythonConfig, String> {
        let c: PythonConfig = registry::parse(t, key)?;
        match c.class.rsplit_once(':') {
            Some((m, cls)) if !m.is_empty() && !cls.is_empty() => Ok(c),
            _ => Err(format!(
                "{key}.class: expected 'module:Class' or 'file.py:Class', got {:?}",
                c.class
            )),
        }
    }
}

fn build_without_python(t: &toml::Table, ctx: &BuildContext) -> Result<Box<dyn Function>, String> {
    let c = PythonConfig::parse(t, ctx.key)?;
    Err(format!(
        "{}: Python class `{}` can only run through the Python front door (`wattio run`, `wattio serve`, `wattio.run`)",
        ctx.key, c.class
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_must_name_a_module_and_a_class() {
        let t = |s: &str| toml::from_str::<toml::Table>(s).unwrap();
        let ok = PythonConfig::parse(&t("class = 'pol.py:Fixed'\nparams = {timeout_s = 5}"), "f")
            .unwrap();
        assert_eq!(ok.class, "pol.py:Fixed");
        assert_eq!(ok.params.get("timeout_s"), Some(&toml::Value::Integer(5)));
        assert_eq!(
            PythonConfig::parse(&t("class = 'Fixed'"), "function[0]").unwrap_err(),
            "function[0].class: expected 'module:Class' or 'file.py:Class', got \"Fixed\""
        );
        let e = PythonConfig::parse(&t("class = 'm:C'\nparam = {}"), "function[0]").unwrap_err();
        assert!(e.contains("unknown field `param`"), "{e}");
    }
}
