//! Each of the host's crates imports its modules one way only: no two top-level
//! modules of a crate depend on each other, however indirectly, and no two files of
//! one folder do (between crates, Cargo refuses a cycle itself). A
//! cycle ties modules into one unit that must be understood, tested and changed
//! together, and it lets a low layer (the contract, the metrics) grow a need for a
//! high one (the runtime, the controller) without anyone deciding it. This test
//! reads the sources (no tool to install) and names the cycle it finds.
//!
//! A mention of `crate::m` in a file of module `f` is an arrow `f → m`; within a
//! folder, `super::sibling` is an arrow between its files (the folder's `mod.rs`, which
//! declares and re-exports them, is not a sibling), and so is `super::Name` when the
//! `mod.rs` re-exports `Name` from a sibling.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Arrows between nodes, each with one file that draws it (to name in a failure).
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// Every `.rs` file under `dir`, with its path relative to `root`.
fn sources(root: &Path, dir: &Path, found: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("readable source directory")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            sources(root, &path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path.strip_prefix(root).expect("under root").to_path_buf());
        }
    }
}

/// The modules named right after `prefix` in `text`: `crate::kube::x` names `kube`,
/// `super::{Manager, load}` names `Manager` and `load` (what is not a module is
/// dropped by the caller).
fn mentioned<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    let ident_end = |s: &str| {
        s.find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s.len())
    };
    let mut found = Vec::new();
    for (at, _) in text.match_indices(prefix) {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue; // part of a longer path or word
        }
        let rest = &text[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for item in group.split(',') {
                let item = item.trim();
                found.push(&item[..ident_end(item)]);
            }
        } else {
            found.push(&rest[..ident_end(rest)]);
        }
    }
    found.retain(|m| !m.is_empty());
    found
}

/// `text` without its comments (doc comments name modules without importing them); a
/// `//` inside a string cuts its line short, which can only hide an arrow.
fn code(text: &str) -> String {
    let lines = text
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""));
    lines.collect::<Vec<_>>().join("\n")
}

/// What a folder's `mod.rs` re-exports from its files (`pub use load::{Loaded, start
/// as begin};` maps `Loaded` and `begin` to `load`), so `super::Loaded` in a sibling is
/// an arrow to `load`, not to the folder: without it a cycle through a re-export hides.
fn reexports(mod_rs: &str) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for (at, _) in mod_rs.match_indices(" use ") {
        let head = &mod_rs[..at];
        let public = head.ends_with("pub") || head.ends_with(')') && head.contains("pub(");
        let statement = &mod_rs[at + 5..];
        let statement = statement[..statement.find(';').unwrap_or(statement.len())].trim();
        let statement = statement.strip_prefix("self::").unwrap_or(statement);
        let Some((module, items)) = statement.split_once("::").filter(|_| public) else {
            continue;
        };
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let name = match item.split_once(" as ") {
                Some((_, alias)) => alias.trim(),
                None => item.rsplit("::").next().unwrap_or(item),
            };
            found.insert(name.to_string(), module.to_string());
        }
    }
    found
}

/// Adds `from → to` drawn by `file`, unless it is a loop onto itself.
fn arrow(graph: &mut Graph, from: &str, to: &str, file: &Path) {
    if from != to {
        let arrows = graph.entry(from.to_string()).or_default();
        arrows
            .entry(to.to_string())
            .or_insert_with(|| file.display().to_string());
    }
}

/// The graph of the top-level modules, and one of each folder's files.
fn graphs(src: &Path) -> (Graph, BTreeMap<String, Graph>) {
    let mut files = Vec::new();
    sources(src, src, &mut files);
    let mut top = Graph::new();
    let mut folders: BTreeMap<String, Graph> = BTreeMap::new();
    for file in &files {
        let parts: Vec<String> = (file.iter())
            .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        // The crate's root declares every module; it is not one of them.
        if parts.len() == 1 && ["main", "lib"].contains(&parts[0].as_str()) {
            continue;
        }
        let text = code(&std::fs::read_to_string(src.join(file)).expect("readable source"));
        let module = &parts[0];
        top.entry(module.clone()).or_default();
        for target in mentioned(&text, "crate::") {
            arrow(&mut top, module, target, file);
        }
        let Some((name, folder)) = parts.split_last().filter(|(_, f)| !f.is_empty()) else {
            continue;
        };
        if name == "mod" {
            continue;
        }
        let dir = src.join(folder.join("/"));
        let exported = std::fs::read_to_string(dir.join("mod.rs"))
            .map(|text| reexports(&code(&text)))
            .unwrap_or_default();
        let siblings = folders.entry(folder.join("/")).or_default();
        siblings.entry(name.clone()).or_default();
        for target in mentioned(&text, "super::") {
            let module = |m: &str| {
                dir.join(format!("{m}.rs")).exists() || dir.join(m).join("mod.rs").exists()
            };
            if module(target) {
                arrow(siblings, name, target, file);
            } else if let Some(from) = exported.get(target).filter(|m| module(m)) {
                arrow(siblings, name, from, file);
            }
        }
    }
    (top, folders)
}

/// A cycle of `graph`, as the nodes and the files that draw its arrows, if any.
fn cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut found = path[start..].to_vec();
            found.push(node.to_string());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flat_map(|a| a.keys()) {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// `cycle` as `a → b (in file) → ...`.
fn described(graph: &Graph, cycle: &[String]) -> String {
    let steps: Vec<String> = cycle
        .windows(2)
        .map(|w| format!("{} → {} (in {})", w[0], w[1], graph[&w[0]][&w[1]]))
        .collect();
    steps.join(", ")
}

/// The sources of each of the host's crates: the runtime core, the daemon, the
/// tooling and the binary.
const CRATES: [&str; 4] = ["core/src", "daemon/src", "tooling/src", "src"];

#[test]
fn the_modules_import_one_another_one_way_only() {
    let mut read = 0;
    for krate in CRATES {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(krate);
        let (top, folders) = graphs(&src);
        read += top.len();
        if let Some(found) = cycle(&top) {
            panic!("{krate}: modules in a cycle: {}", described(&top, &found));
        }
        for (folder, graph) in &folders {
            if let Some(found) = cycle(graph) {
                panic!(
                    "{krate}: files of {folder} in a cycle: {}",
                    described(graph, &found)
                );
            }
        }
    }
    assert!(read > 30, "read too few modules: {read}");
}

#[test]
fn a_cycle_is_found_and_named_with_the_files_that_draw_it() {
    let mut graph = Graph::new();
    arrow(&mut graph, "a", "b", Path::new("a.rs"));
    arrow(&mut graph, "b", "c", Path::new("b.rs"));
    assert_eq!(cycle(&graph), None);
    arrow(&mut graph, "c", "a", Path::new("c/mod.rs"));
    let found = cycle(&graph).expect("a cycle");
    assert_eq!(
        described(&graph, &found),
        "a → b (in a.rs), b → c (in b.rs), c → a (in c/mod.rs)"
    );
    let text = "use crate::kube::x; crate::metrics::y(); my_crate::no; super::load::f();\n\
                use super::{Manager, waiting::W};";
    assert_eq!(mentioned(text, "crate::"), ["kube", "metrics"]);
    assert_eq!(mentioned(text, "super::"), ["load", "Manager", "waiting"]);
}

#[test]
fn a_name_a_mod_rs_re_exports_is_an_arrow_to_the_file_it_comes_from() {
    let mod_rs = "mod load;\nmod reuse;\npub use load::{Loaded, start as begin};\n\
                  pub(crate) use self::reuse::Pool;\nuse private::Hidden;\n\
                  pub use crate::other::Far;";
    let found = reexports(mod_rs);
    let pairs: Vec<(&str, &str)> = found
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("Far", "crate"),
            ("Loaded", "load"),
            ("Pool", "reuse"),
            ("begin", "load")
        ]
    );
}
