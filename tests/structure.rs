//! The tree's structure, as the code says it: no source file imports another that imports it
//! back, directly or around a circle (a type in the wrong file shows as such a circle). Each
//! crate's files are modules; a file's edges are the `crate::`, `super::` and `self::` paths
//! in its code outside comments and its `mod tests`, resolved to the longest module they name.
//! No root needed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, as (module path, file), `mod.rs` and `lib.rs`/`main.rs`
/// standing for their folder.
fn modules(root: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).unwrap().with_extension("");
                let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
                if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                    parts.pop();
                }
                out.insert(parts, path);
            }
        }
    }
    out
}

/// The module a path in `from` names, if it is one of `mods` (the longest such prefix).
fn resolve(from: &[String], path: &[&str], mods: &BTreeMap<Vec<String>, PathBuf>) -> Option<Vec<String>> {
    let (mut base, mut rest): (Vec<String>, &[&str]) = match *path.first()? {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (from.to_vec(), &path[1..]),
        "super" => (from[..from.len().saturating_sub(1)].to_vec(), &path[1..]),
        _ => return None,
    };
    while rest.first() == Some(&"super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().map(|s| (*s).to_owned()));
    (1..=base.len()).rev().map(|n| base[..n].to_vec()).find(|m| mods.contains_key(m))
}

/// The code of a file without comment lines and without its `mod tests`.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// Each module's edges to the others it names.
fn edges(mods: &BTreeMap<Vec<String>, PathBuf>) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = BTreeMap::new();
    for (m, file) in mods {
        let src = code(file);
        let mut to = BTreeSet::new();
        let mut i = 0;
        while let Some(at) = src[i..].find(['c', 's']).map(|a| a + i) {
            i = at + 1;
            if at > 0 && src[..at].chars().next_back().is_some_and(word) {
                continue;
            }
            let tail = &src[at..];
            if !["crate::", "super::", "self::"].iter().any(|p| tail.starts_with(p)) {
                continue;
            }
            // The path, then a `{…}` group's first names (`use super::{a, b::c}`).
            let len = tail.find(|c: char| !(word(c) || c == ':')).unwrap_or(tail.len());
            let path: Vec<&str> = tail[..len].split("::").filter(|s| !s.is_empty()).collect();
            let mut targets = vec![path.clone()];
            if tail[len..].starts_with('{') {
                let group = &tail[len + 1..tail[len..].find('}').map_or(tail.len(), |e| len + e)];
                for item in group.split(',') {
                    let first = item.trim().split("::").next().unwrap_or("").split(' ').next().unwrap_or("");
                    if !first.is_empty() && first != "self" {
                        targets.push([path.as_slice(), &[first]].concat());
                    }
                }
            }
            for t in targets {
                if let Some(r) = resolve(m, &t, mods) {
                    if &r != m && !m.starts_with(&r) {
                        to.insert(r);
                    }
                }
            }
        }
        out.insert(m.clone(), to);
    }
    out
}

/// The circles among `edges`: each strongly connected set of more than one module.
fn circles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<String>> {
    let reach = |from: &Vec<String>| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for n in &edges[&m] {
                if seen.insert(n.clone()) {
                    todo.push(n.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<_, _> = edges.keys().map(|m| (m.clone(), reach(m))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for m in edges.keys() {
        let set: Vec<String> =
            edges.keys().filter(|n| reaches[m].contains(*n) && reaches[*n].contains(m)).map(|n| n.join("::")).collect();
        if set.len() > 1 && !out.contains(&set) {
            out.push(set);
        }
    }
    out
}

#[test]
fn no_source_file_imports_one_that_imports_it_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for krate in ["dataplane/src", "config/src", "src"] {
        let mods = modules(&root.join(krate));
        assert!(mods.len() >= 3, "{krate}: {} files found", mods.len());
        let found = circles(&edges(&mods));
        assert!(found.is_empty(), "{krate}: files that import each other around a circle: {found:?}");
    }
}

#[test]
fn a_circle_is_found_when_there_is_one() {
    let dir = std::env::temp_dir().join(format!("xfwd-structure-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("l3")).unwrap();
    std::fs::write(dir.join("lib.rs"), "pub mod l3;\n").unwrap();
    std::fs::write(dir.join("l3/mod.rs"), "pub mod a;\npub mod b;\npub mod c;\n").unwrap();
    std::fs::write(dir.join("l3/a.rs"), "use super::b::{X, Y};\n// use super::c::Z;\n").unwrap();
    std::fs::write(dir.join("l3/b.rs"), "use crate::l3::c::Z;\n").unwrap();
    std::fs::write(dir.join("l3/c.rs"), "pub fn f() -> super::a::W { todo!() }\n").unwrap();
    let mods = modules(&dir);
    let found = circles(&edges(&mods));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found, [vec!["l3::a".to_owned(), "l3::b".into(), "l3::c".into()]]);
}
