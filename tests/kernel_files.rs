//! The `kernel-files` development feature end to end (`cargo test --features kernel-files
//! --test kernel_files`; without the feature this file is empty): `msc bench` compiles a
//! kernel from `$MSC_KERNEL_FILES/<kernel>.wgsl`, says so in every GPU record, gives the
//! built-in kernel's result for a copy of its body, and refuses a folder whose file names
//! no kernel before it runs anything. GPU rows run on any adapter (lavapipe included);
//! they skip without one unless `MSC_REQUIRE_GPU=1`.
#![cfg(feature = "kernel-files")]

mod common;

use common::stderr;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// `msc bench` of one small DDEF row on the GPU, with `MSC_KERNEL_FILES=files` if given.
fn bench(files: Option<&Path>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_msc"));
    c.args(
        "bench --backend gpu --workload ddef --sizes 1500 --samples 300 --steps 1 \
         --warmup 0 --warmup-ms 0 --repeats 1 --quiet"
            .split_whitespace(),
    );
    c.env_remove("MSC_KERNEL_FILES");
    if let Some(f) = files {
        c.env("MSC_KERNEL_FILES", f);
    }
    c.output().unwrap()
}

fn record(o: &Output) -> Value {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
    let line = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(line.lines().next().unwrap()).unwrap()
}

/// `ddef_gather`'s built-in body.
fn gather_body() -> &'static str {
    msc::gpu::kernels::all()
        .find(|k| k.name == "ddef_gather")
        .unwrap()
        .body
}

/// True (test skipped) when the command failed only because there is no adapter.
fn no_adapter(o: &Output) -> bool {
    if o.status.code() == Some(1) && stderr(o).contains("no GPU adapter") {
        assert!(!common::require_gpu(), "MSC_REQUIRE_GPU=1 but no adapter");
        eprintln!("skipped: no GPU adapter");
        return true;
    }
    false
}

#[test]
fn a_kernel_file_replaces_the_kernel_body_and_the_record_names_it() {
    let builtin = bench(None);
    if no_adapter(&builtin) {
        return;
    }
    let builtin = record(&builtin);
    assert!(builtin["kernel_files"].is_null(), "{builtin}");

    // A copy of the built-in body: the same forces, to the last bit of the error.
    let copy = tempfile::tempdir().unwrap();
    std::fs::write(copy.path().join("ddef_gather.wgsl"), gather_body()).unwrap();
    let same = record(&bench(Some(copy.path())));
    let label = same["kernel_files"].as_str().unwrap_or_default();
    assert!(label.ends_with(": ddef_gather"), "{same}");
    assert_eq!(same["force_error_mean"], builtin["force_error_mean"]);

    // A body whose every force write is doubled (both paths: staged and a CPU adapter's
    // direct one): the force error moves, so the file, not the built-in body, ran.
    let doubled = gather_body().replace(" * field, f.w)", " * 2.0 * field, f.w)");
    assert_eq!(
        doubled.matches("2.0 * field").count(),
        2,
        "both force writes of ddef_gather changed"
    );
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("ddef_gather.wgsl"), doubled).unwrap();
    let changed = record(&bench(Some(other.path())));
    let (e0, e1) = (
        builtin["force_error_mean"].as_f64().unwrap(),
        changed["force_error_mean"].as_f64().unwrap(),
    );
    assert!(e1 > 10.0 * e0, "built-in {e0}, doubled gather {e1}");
}

#[test]
fn a_folder_naming_no_kernel_or_holding_none_is_refused_before_any_row() {
    let typo = tempfile::tempdir().unwrap();
    std::fs::write(typo.path().join("ddef_gathr.wgsl"), gather_body()).unwrap();
    let o = bench(Some(typo.path()));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("ddef_gathr.wgsl names no kernel"),
        "{}",
        stderr(&o)
    );
    assert!(o.stdout.is_empty(), "no row ran");

    let empty = tempfile::tempdir().unwrap();
    std::fs::write(empty.path().join("notes.txt"), "not a kernel").unwrap();
    let o = bench(Some(empty.path()));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("holds no <kernel>.wgsl file"),
        "{}",
        stderr(&o)
    );

    let missing = typo.path().join("absent");
    let o = bench(Some(&missing));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("MSC_KERNEL_FILES="), "{}", stderr(&o));
}
