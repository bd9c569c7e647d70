//! DiskSim's parameter-file syntax (libparam): `type Name { Key = value, … }` blocks,
//! nested anonymous blocks (`Key = dm_layout_g1 { … }`), lists `[ … ]`, `#` comments,
//! `source FILE` includes (top level, or as a value), `instantiate [ … ] as X` and
//! `topology …` statements.
//!
//! Keys contain spaces and punctuation (`Read hit over. after read`), so a key or a scalar
//! is the text between two structural characters on one line, trimmed. Every value keeps
//! the file and line it came from, so the importer's errors can name them.

use std::path::{Path, PathBuf};

/// Where a value was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pos {
    pub file: String,
    pub line: u32,
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A number or a bare word, as written.
    Scalar(String, Pos),
    List(Vec<Value>, Pos),
    Block(Block),
}

impl Value {
    pub fn pos(&self) -> &Pos {
        match self {
            Value::Scalar(_, p) | Value::List(_, p) => p,
            Value::Block(b) => &b.pos,
        }
    }
}

/// `type Name { params }` (top level) or `type { params }` (nested, `name` empty).
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub kind: String,
    pub name: String,
    pub params: Vec<(String, Value)>,
    pub pos: Pos,
}

impl Block {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    }
}

/// A parsed file set: top-level blocks (from the file and everything it sources) and the
/// `instantiate` statements (instance names → block name).
#[derive(Clone, Debug, Default)]
pub struct Document {
    pub blocks: Vec<Block>,
    pub instances: Vec<(Vec<String>, String)>,
}

/// Reads included files; a trait so the fuzz target and tests can parse from memory.
pub trait Loader {
    fn load(&mut self, path: &Path) -> Result<String, String>;
}

/// Reads files from disk.
pub struct FsLoader;

impl Loader for FsLoader {
    fn load(&mut self, path: &Path) -> Result<String, String> {
        std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// No includes available (fuzzing): every `source` is an error.
pub struct NoLoader;

impl Loader for NoLoader {
    fn load(&mut self, path: &Path) -> Result<String, String> {
        Err(format!(
            "{}: includes are not available here",
            path.display()
        ))
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Open,
    Close,
    LOpen,
    LClose,
    Comma,
    Eq,
    Text(String),
}

fn tokenize(text: &str) -> Vec<(Tok, u32)> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = (i + 1) as u32;
        let body = match raw.find('#') {
            Some(p) => &raw[..p],
            None => raw,
        };
        let mut cur = String::new();
        let flush = |cur: &mut String, out: &mut Vec<(Tok, u32)>| {
            let t = cur.trim();
            if !t.is_empty() {
                out.push((Tok::Text(t.to_string()), line));
            }
            cur.clear();
        };
        for ch in body.chars() {
            let tok = match ch {
                '{' => Some(Tok::Open),
                '}' => Some(Tok::Close),
                '[' => Some(Tok::LOpen),
                ']' => Some(Tok::LClose),
                ',' => Some(Tok::Comma),
                '=' => Some(Tok::Eq),
                _ => None,
            };
            match tok {
                Some(t) => {
                    flush(&mut cur, &mut out);
                    out.push((t, line));
                }
                None => cur.push(ch),
            }
        }
        flush(&mut cur, &mut out);
    }
    out
}

/// Guards against include cycles and runaway nesting in hostile input.
const MAX_DEPTH: usize = 64;

struct Parser<'a> {
    toks: Vec<(Tok, u32)>,
    i: usize,
    file: String,
    dir: PathBuf,
    loader: &'a mut dyn Loader,
    depth: usize,
}

impl Parser<'_> {
    fn pos(&self) -> Pos {
        let line = self
            .toks
            .get(self.i)
            .or_else(|| self.toks.last())
            .map_or(0, |t| t.1);
        Pos {
            file: self.file.clone(),
            line,
        }
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{}: {what}", self.pos()))
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.i).map(|t| &t.0)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.i).map(|t| t.0.clone());
        self.i += 1;
        t
    }

    fn include(&mut self, name: &str) -> Result<Document, String> {
        if self.depth >= MAX_DEPTH {
            return self.err(&format!("`source {name}`: includes nested too deep"));
        }
        let path = self.dir.join(name);
        let text = self
            .loader
            .load(&path)
            .map_err(|e| format!("{}: source {name}: {e}", self.pos()))?;
        parse_text(
            &text,
            &path.display().to_string(),
            path.parent().unwrap_or(Path::new(".")),
            self.loader,
            self.depth + 1,
        )
    }

    fn document(&mut self) -> Result<Document, String> {
        let mut doc = Document::default();
        while let Some(t) = self.next() {
            let Tok::Text(text) = t else {
                return self.err("expected a block, `source`, `instantiate` or `topology`");
            };
            let mut words = text.split_whitespace();
            let first = words.next().unwrap_or("");
            let rest: Vec<&str> = words.collect();
            match first {
                "source" => {
                    let name = rest.join(" ");
                    let sub = self.include(&name)?;
                    doc.blocks.extend(sub.blocks);
                    doc.instances.extend(sub.instances);
                }
                "instantiate" => {
                    let names = match self.value()? {
                        Value::List(vs, _) => vs
                            .into_iter()
                            .filter_map(|v| match v {
                                Value::Scalar(s, _) => Some(s),
                                _ => None,
                            })
                            .collect(),
                        _ => return self.err("instantiate: expected a list of names"),
                    };
                    match self.next() {
                        Some(Tok::Text(t)) if t.starts_with("as ") || t == "as" => {
                            let target = t.trim_start_matches("as").trim().to_string();
                            if target.is_empty() {
                                return self.err("instantiate: expected `as NAME`");
                            }
                            doc.instances.push((names, target));
                        }
                        _ => return self.err("instantiate: expected `as NAME`"),
                    }
                }
                "topology" => {
                    // The topology only matters for multi-device systems; skip its nesting.
                    self.skip_nested()?;
                }
                _ => {
                    if self.peek() != Some(&Tok::Open) {
                        return self.err(&format!("`{text}`: expected `{{` after a block header"));
                    }
                    let pos = self.pos();
                    self.next();
                    let params = self.params(Tok::Close)?;
                    doc.blocks.push(Block {
                        kind: first.to_string(),
                        name: rest.join(" "),
                        params,
                        pos,
                    });
                }
            }
        }
        Ok(doc)
    }

    fn skip_nested(&mut self) -> Result<(), String> {
        let mut depth = 0usize;
        loop {
            match self.next() {
                Some(Tok::LOpen) | Some(Tok::Open) => depth += 1,
                Some(Tok::LClose) | Some(Tok::Close) => {
                    if depth == 0 {
                        return self.err("unbalanced bracket in topology");
                    }
                    depth -= 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                Some(_) => {}
                None => return self.err("unterminated topology"),
            }
        }
    }

    /// `Key = value` pairs separated by commas, up to `end`.
    fn params(&mut self, end: Tok) -> Result<Vec<(String, Value)>, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err("blocks nested too deep");
        }
        let mut out = Vec::new();
        loop {
            match self.next() {
                Some(t) if t == end => break,
                Some(Tok::Comma) => continue,
                Some(Tok::Text(key)) => {
                    if self.next() != Some(Tok::Eq) {
                        return self.err(&format!("`{key}`: expected `=`"));
                    }
                    let v = self.value()?;
                    out.push((key, v));
                }
                Some(_) => return self.err("expected `Key = value`"),
                None => return self.err("unterminated block (missing `}`)"),
            }
        }
        self.depth -= 1;
        Ok(out)
    }

    fn value(&mut self) -> Result<Value, String> {
        let pos = self.pos();
        match self.next() {
            Some(Tok::LOpen) => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return self.err("lists nested too deep");
                }
                let mut items = Vec::new();
                loop {
                    match self.peek() {
                        Some(Tok::LClose) => {
                            self.next();
                            break;
                        }
                        Some(Tok::Comma) => {
                            self.next();
                        }
                        None => return self.err("unterminated list (missing `]`)"),
                        _ => items.push(self.value()?),
                    }
                }
                self.depth -= 1;
                Ok(Value::List(items, pos))
            }
            Some(Tok::Open) => {
                let params = self.params(Tok::Close)?;
                Ok(Value::Block(Block {
                    kind: String::new(),
                    name: String::new(),
                    params,
                    pos,
                }))
            }
            Some(Tok::Text(t)) => {
                if let Some(name) = t.strip_prefix("source ") {
                    let doc = self.include(name.trim())?;
                    return match doc.blocks.into_iter().next() {
                        Some(b) => Ok(Value::Block(b)),
                        None => self.err(&format!("source {name}: file holds no block")),
                    };
                }
                if self.peek() == Some(&Tok::Open) {
                    self.next();
                    let params = self.params(Tok::Close)?;
                    let mut words = t.split_whitespace();
                    let kind = words.next().unwrap_or("").to_string();
                    let name = words.collect::<Vec<_>>().join(" ");
                    return Ok(Value::Block(Block {
                        kind,
                        name,
                        params,
                        pos,
                    }));
                }
                Ok(Value::Scalar(t, pos))
            }
            _ => self.err("expected a value"),
        }
    }
}

fn parse_text(
    text: &str,
    file: &str,
    dir: &Path,
    loader: &mut dyn Loader,
    depth: usize,
) -> Result<Document, String> {
    let mut p = Parser {
        toks: tokenize(text),
        i: 0,
        file: file.to_string(),
        dir: dir.to_path_buf(),
        loader,
        depth,
    };
    p.document()
}

/// Parse `text` (named `file` in errors); `source` paths resolve against `dir`.
pub fn parse(
    text: &str,
    file: &str,
    dir: &Path,
    loader: &mut dyn Loader,
) -> Result<Document, String> {
    parse_text(text, file, dir, loader, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_lists_nesting_and_comments() {
        let text = "disksim_disk D { # a disk\n  Bulk sector transfer time = 0.106,\n  Model = dm_layout_g1 { Zones = [ dm_layout_g1_zone { slips = [ 1, 2 ] } ] },\n}\ninstantiate [ disk0 ] as D\n";
        let doc = parse(text, "t.parv", Path::new("."), &mut NoLoader).unwrap();
        assert_eq!(doc.blocks.len(), 1);
        let b = &doc.blocks[0];
        assert_eq!((b.kind.as_str(), b.name.as_str()), ("disksim_disk", "D"));
        assert_eq!(
            b.get("bulk sector transfer time"),
            Some(&Value::Scalar(
                "0.106".into(),
                Pos {
                    file: "t.parv".into(),
                    line: 2
                }
            ))
        );
        let Some(Value::Block(m)) = b.get("Model") else {
            panic!("nested block")
        };
        let Some(Value::List(zones, _)) = m.get("Zones") else {
            panic!("zones list")
        };
        let Value::Block(z) = &zones[0] else {
            panic!("zone block")
        };
        assert_eq!(z.kind, "dm_layout_g1_zone");
        let Some(Value::List(slips, _)) = z.get("slips") else {
            panic!("slips")
        };
        assert_eq!(slips.len(), 2);
        assert_eq!(
            doc.instances,
            vec![(vec!["disk0".to_string()], "D".to_string())]
        );
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = parse("a B {\n  Key 3\n}", "x.parv", Path::new("."), &mut NoLoader).unwrap_err();
        assert!(e.starts_with("x.parv:"), "{e}");
        assert!(e.contains("`Key 3`: expected `=`"), "{e}");
        let e = parse(
            "a B {\n K = [ 1, 2\n",
            "y.parv",
            Path::new("."),
            &mut NoLoader,
        )
        .unwrap_err();
        assert!(e.contains("y.parv:2") && e.contains("unterminated"), "{e}");
        let e = parse(
            "source other.diskspecs\n",
            "z.parv",
            Path::new("."),
            &mut NoLoader,
        )
        .unwrap_err();
        assert!(
            e.contains("z.parv:1") && e.contains("other.diskspecs"),
            "{e}"
        );
    }
}
