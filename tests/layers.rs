//! The crate's structure as a test (docs/architecture.md): the top-level modules form
//! layers and each imports only from layers below its own, so there is no import cycle;
//! inside `gpu/` its parts (sub-folders) do the same; every source file states its job in
//! a first `//!` comment and stays under 600 lines.
//!
//! Imports are read as text: every `crate::name` outside comments and `#[cfg(test)]`
//! blocks, and `super::` paths stay inside a module, so this sees each top-level edge.
//! Inside `gpu/`, a part reaches another only as `crate::gpu::part::...` (never through
//! `super::super` or a re-export at `gpu`'s root), so this sees each edge between parts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layers, lowest first. A module may import any module of a lower layer.
const LAYERS: &[&[&str]] = &[
    &[
        "display",
        "digest",
        "files",
        "interrupt",
        "progress",
        "measures",
    ],
    &["model"],
    &["config"],
    &["physics", "scene"],
    &["coulomb"],
    &["ddef"],
    &["cpu"],
    &["gpu"],
    &["simulator", "output"],
    &["grad", "render", "plot", "bench"],
    &["run"],
    &["batch"],
    &["cli"],
];

/// The parts of `gpu/` (its files and sub-folders), lowest first; `mod.rs` at its root
/// only declares them and re-exports the public API.
const GPU_PARTS: &[&[&str]] = &[
    &["error", "layout"],
    &["device"],
    &["shader"],
    &["host"],
    &["kernels"],
    &["solver"],
    &["batch"],
];

const MAX_LINES: usize = 600;

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`src/gpu/host/engine.rs` -> `gpu`).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel
        .components()
        .next()?
        .as_os_str()
        .to_string_lossy()
        .to_string();
    let name = first.trim_end_matches(".rs").to_string();
    (name != "lib" && name != "main").then_some(name)
}

/// `crate::name` references outside comments and `#[cfg(test)]` blocks, with line numbers.
fn crate_refs(text: &str) -> Vec<(usize, String)> {
    path_refs(text, "crate::")
}

/// The names right after `prefix` outside comments and `#[cfg(test)]` blocks, with line
/// numbers.
fn path_refs(text: &str, prefix: &str) -> Vec<(usize, String)> {
    let mut refs = Vec::new();
    let mut in_tests = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            // Test modules close the file in this code base.
            in_tests = true;
        }
        if in_tests || t.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find(prefix) {
            let after = &rest[at + prefix.len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            refs.push((i + 1, name));
            rest = after;
        }
    }
    refs
}

#[test]
fn modules_import_only_from_lower_layers() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut unknown = Vec::new();
    let mut upward = Vec::new();
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        let Some(own) = layer_of(&module) else {
            unknown.push(module);
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (line, target) in crate_refs(&text) {
            if target == module {
                continue;
            }
            match layer_of(&target) {
                Some(l) if l < own => {}
                Some(_) => upward.push(format!(
                    "{}:{line}: {module} imports {target}",
                    file.strip_prefix(&src).unwrap().display()
                )),
                // Re-exports at the crate root (crate::Config, crate::State, ...).
                None => {}
            }
        }
    }
    unknown.sort();
    unknown.dedup();
    assert!(
        unknown.is_empty(),
        "top-level modules missing from LAYERS (add them to their layer): {unknown:?}"
    );
    assert!(
        upward.is_empty(),
        "imports from the same or a higher layer:\n{}",
        upward.join("\n")
    );
}

fn gpu_part_of(name: &str) -> Option<usize> {
    GPU_PARTS.iter().position(|l| l.contains(&name))
}

/// Inside `gpu/`, each part imports only from its own part and the parts before it, always
/// by its full path `crate::gpu::part`.
#[test]
fn gpu_parts_import_only_from_lower_parts() {
    let gpu = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/gpu");
    let mut files = Vec::new();
    rust_files(&gpu, &mut files);
    let mut problems = Vec::new();
    let mut parts_seen = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&gpu).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let part = first.trim_end_matches(".rs").to_string();
        if part == "mod" {
            continue;
        }
        let shown = format!("gpu/{}", rel.display());
        let Some(own) = gpu_part_of(&part) else {
            problems.push(format!("{shown}: part {part} missing from GPU_PARTS"));
            continue;
        };
        parts_seen.push(part.clone());
        let text = std::fs::read_to_string(file).unwrap();
        // `super` is gpu's root in a part's own file or `mod.rs`, and beyond the part
        // from deeper.
        let depth = rel.components().count();
        let at_root = depth == 1 || (depth == 2 && rel.ends_with("mod.rs"));
        let escape = if at_root { "super::" } else { "super::super" };
        for (line, _) in path_refs(&text, escape) {
            problems.push(format!("{shown}:{line}: {escape} (use crate::gpu::part)"));
        }
        for (line, target) in path_refs(&text, "crate::gpu::") {
            match gpu_part_of(&target) {
                Some(l) if l <= own => {}
                Some(_) => problems.push(format!("{shown}:{line}: {part} imports {target}")),
                None => problems.push(format!(
                    "{shown}:{line}: crate::gpu::{target} is no part (import it from its part)"
                )),
            }
        }
    }
    parts_seen.sort();
    parts_seen.dedup();
    let listed: usize = GPU_PARTS.iter().map(|l| l.len()).sum();
    assert_eq!(parts_seen.len(), listed, "parts with files: {parts_seen:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_source_file_states_its_job_and_stays_short() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut problems = BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let rel = file.strip_prefix(&root).unwrap().display().to_string();
        if !text.trim_start().starts_with("//!") {
            problems.insert(rel.clone(), "no first //! comment".to_string());
        }
        let lines = text.lines().count();
        if lines >= MAX_LINES {
            problems.insert(rel, format!("{lines} lines (limit {MAX_LINES})"));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_layer_reader_sees_imports_and_skips_comments_and_tests() {
    let text = "//! doc crate::cli\nuse crate::gpu::X;\nfn f() { crate::model::y(); }\n\
                // crate::batch\n#[cfg(test)]\nmod tests { use crate::cli; }\n";
    let names: Vec<String> = crate_refs(text).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, ["gpu", "model"]);
}

/// The code of `text` the import reader looks at: without comment lines and without the
/// `#[cfg(test)]` blocks that close a file; each kept line with its number.
fn code_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            break;
        }
        if !t.starts_with("//") {
            out.push((i + 1, line));
        }
    }
    out
}

fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Parses the path (or use tree) at `chars[i..]` into the paths it names, expanded over
/// `{...}` groups; returns them and where it stopped.
fn parse_tree(chars: &[char], mut i: usize) -> (Vec<Vec<String>>, usize) {
    let skip = |i: &mut usize| {
        while *i < chars.len() && chars[*i].is_whitespace() {
            *i += 1;
        }
    };
    let mut prefix = Vec::new();
    loop {
        skip(&mut i);
        if i < chars.len() && chars[i] == '{' {
            i += 1;
            let mut out = Vec::new();
            loop {
                skip(&mut i);
                if i >= chars.len() || chars[i] == '}' {
                    break;
                }
                let (sub, end) = parse_tree(chars, i);
                i = end;
                for s in sub {
                    let mut p = prefix.clone();
                    p.extend(s);
                    out.push(p);
                }
                skip(&mut i);
                if i < chars.len() && chars[i] == ',' {
                    i += 1;
                } else if i < chars.len() && chars[i] != '}' {
                    // `as` aliases and the like: skip to the next item.
                    while i < chars.len() && chars[i] != ',' && chars[i] != '}' {
                        i += 1;
                    }
                }
            }
            return (out, i + 1);
        }
        let start = i;
        while i < chars.len() && ident_char(chars[i]) {
            i += 1;
        }
        if i == start {
            return (vec![prefix], i);
        }
        prefix.push(chars[start..i].iter().collect());
        if chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
            i += 2;
        } else {
            return (vec![prefix], i);
        }
    }
}

/// Every path the code of `text` names from `crate`, `super` or `self`, made absolute for
/// a file whose module is `module`, with its line.
fn absolute_paths(text: &str, module: &[String]) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    for (line, code) in code_lines(text) {
        let chars: Vec<char> = code.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let at_start = i == 0 || !(ident_char(chars[i - 1]) || chars[i - 1] == ':');
            let rest: String = chars[i..chars.len().min(i + 7)].iter().collect();
            if at_start
                && (rest.starts_with("crate::")
                    || rest.starts_with("super::")
                    || rest.starts_with("self::"))
            {
                let (paths, end) = parse_tree(&chars, i);
                for p in paths {
                    let mut abs: Vec<String> = Vec::new();
                    let mut resolved = module.to_vec();
                    let mut first = true;
                    for seg in p {
                        match (first, seg.as_str()) {
                            (true, "crate") => resolved.clear(),
                            (_, "super") if abs.is_empty() => {
                                resolved.pop();
                            }
                            (true, "self") => {}
                            _ => abs.push(seg),
                        }
                        first = false;
                    }
                    resolved.extend(abs);
                    out.push((line, resolved));
                }
                i = end.max(i + 1);
            } else {
                i += 1;
            }
        }
    }
    out
}

/// The module path of a source file (`src/batch/exec.rs` -> `batch::exec`, `src/batch/
/// mod.rs` -> `batch`).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut m: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    if m.last().is_some_and(|l| l == "mod" || l == "lib") {
        m.pop();
    }
    m
}

/// Inside every folder, its files and sub-folders import each other without a circle
/// (directly, or through what the folder's `mod.rs` re-exports).
#[test]
fn no_folder_has_an_import_circle() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: Vec<(Vec<String>, String, bool)> = files
        .iter()
        .map(|f| {
            let is_mod = f.file_name().is_some_and(|n| n == "mod.rs");
            (
                module_path(&src, f),
                std::fs::read_to_string(f).unwrap(),
                is_mod,
            )
        })
        .collect();
    let folders: Vec<&Vec<String>> = modules
        .iter()
        .filter(|(_, _, is_mod)| *is_mod)
        .map(|(m, _, _)| m)
        .collect();
    let mut circles = Vec::new();
    for folder in folders {
        let depth = folder.len();
        let children: BTreeMap<String, ()> = modules
            .iter()
            .filter(|(m, _, _)| m.len() > depth && m.starts_with(folder))
            .map(|(m, _, _)| (m[depth].clone(), ()))
            .collect();
        // What mod.rs re-exports: item -> the child it comes from.
        let mut reexports: BTreeMap<String, String> = BTreeMap::new();
        for (m, text, _) in &modules {
            if m != folder {
                continue;
            }
            for (_, line) in code_lines(text) {
                let t = line.trim_start();
                if !(t.starts_with("pub use ") || t.starts_with("pub(crate) use ")) {
                    continue;
                }
                let at = t.find("use ").unwrap() + 4;
                let chars: Vec<char> = format!("self::{}", &t[at..]).chars().collect();
                let (paths, _) = parse_tree(&chars, 0);
                for p in paths {
                    if p.len() >= 3 && children.contains_key(&p[1]) {
                        reexports.insert(p.last().unwrap().clone(), p[1].clone());
                    }
                }
            }
        }
        // Edges between children, with one place each comes from.
        let mut edges: BTreeMap<(String, String), String> = BTreeMap::new();
        for (m, text, _) in &modules {
            if !(m.len() > depth && m.starts_with(folder)) {
                continue;
            }
            let from = &m[depth];
            for (line, path) in absolute_paths(text, m) {
                if !(path.len() > depth && path.starts_with(folder)) {
                    continue;
                }
                let name = &path[depth];
                let to = if children.contains_key(name) {
                    name.clone()
                } else if let Some(child) = reexports.get(name) {
                    child.clone()
                } else {
                    continue;
                };
                if &to != from {
                    edges
                        .entry((from.clone(), to))
                        .or_insert_with(|| format!("{}:{line}", m.join("/")));
                }
            }
        }
        // A circle: a child that reaches itself.
        for start in children.keys() {
            let mut stack = vec![(start.clone(), vec![start.clone()])];
            let mut seen = vec![start.clone()];
            while let Some((node, path)) = stack.pop() {
                for ((a, b), at) in &edges {
                    if a != &node {
                        continue;
                    }
                    if b == start {
                        let mut names = path.clone();
                        names.push(b.clone());
                        if names.iter().min() == Some(start) {
                            circles.push(format!(
                                "{}: {} (one edge at {at})",
                                folder.join("/"),
                                names.join(" -> ")
                            ));
                        }
                    } else if !seen.contains(b) {
                        seen.push(b.clone());
                        let mut p = path.clone();
                        p.push(b.clone());
                        stack.push((b.clone(), p));
                    }
                }
            }
        }
    }
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_path_reader_expands_groups_and_resolves_super() {
    let text = "use super::{exec::run, plan::{Plan, Vary}};\nuse crate::gpu::GpuError;\n\
                fn f() { super::super::model::x(); }\n// super::ignored\n";
    let m = vec!["batch".to_string(), "exec".to_string()];
    let paths: Vec<String> = absolute_paths(text, &m)
        .into_iter()
        .map(|(_, p)| p.join("::"))
        .collect();
    assert_eq!(
        paths,
        [
            "batch::exec::run",
            "batch::plan::Plan",
            "batch::plan::Vary",
            "gpu::GpuError",
            "model::x"
        ]
    );
}
