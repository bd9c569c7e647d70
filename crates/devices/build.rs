//! Embeds every `catalogue/*.toml` of the repository into the crate, so runs never need a
//! data directory at run time.
use std::fmt::Write as _;
use std::path::Path;

fn main() {
    // Read at run time, not `env!`: a build-script binary reused from another checkout must
    // still look at this one's catalogue.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest).join("../../catalogue");
    println!("cargo:rerun-if-changed={}", dir.display());
    let rd = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the device catalogue {}: {e}", dir.display()));
    let mut names: Vec<_> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    assert!(
        !names.is_empty(),
        "the device catalogue {} has no .toml entries",
        dir.display()
    );
    names.sort();
    let mut out = String::from("pub(crate) static EMBEDDED: &[(&str, &str)] = &[\n");
    for p in &names {
        println!("cargo:rerun-if-changed={}", p.display());
        let stem = p.file_stem().unwrap().to_string_lossy();
        let abs = p.canonicalize().unwrap();
        writeln!(
            out,
            "    ({stem:?}, include_str!({:?})),",
            abs.display().to_string()
        )
        .unwrap();
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("catalogue.rs");
    std::fs::write(dest, out).unwrap();
}
