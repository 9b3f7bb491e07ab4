//! The crate's structure as a test (docs/architecture.md): the top-level modules form
//! layers and each imports only from layers below its own, so there is no import cycle;
//! every source file states its job in a first `//!` comment and stays under 600 lines.
//!
//! Imports are read as text: every `crate::name` outside comments and `#[cfg(test)]`
//! blocks, and `super::` paths stay inside a module, so this sees each top-level edge.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layers, lowest first. A module may import any module of a lower layer.
const LAYERS: &[&[&str]] = &[
    &["display", "digest", "interrupt", "progress", "sim"],
    &["model"],
    &["config"],
    &["physics", "coulomb", "scene"],
    &["ddef"],
    &["cpu"],
    &["gpu"],
    &["simulator", "output"],
    &["grad", "render", "plot", "bench"],
    &["run"],
    &["batch"],
    &["cli"],
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

/// The top-level module a file belongs to (`src/gpu/launch.rs` -> `gpu`).
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
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
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
