//! Stop requests on `msc run`: a stop right after an output step records that step once
//! (its row and frame were written twice), and a second signal, which ends the process at
//! once, never claims the clean status 130 ("every output written").

#![cfg(unix)]

mod common;

use common::{msc, read_json, stderr, tiny};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `msc run tiny.toml --out OUT` for very many steps, with `set` overrides, under way
/// (its energy log started) when this returns.
fn start(dir: &Path, out: &str, set: &[&str]) -> Child {
    tiny(dir);
    let mut args = vec![
        "run",
        "tiny.toml",
        "--backend",
        "cpu",
        "--quiet",
        "--out",
        out,
    ];
    args.extend(["--steps", "100000000"]);
    for s in set {
        args.extend(["--set", s]);
    }
    let child = Command::new(env!("CARGO_BIN_EXE_msc"))
        .args(&args)
        .current_dir(dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let run = dir.join(out);
    while !std::fs::read_dir(&run)
        .map(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().contains("energy"))
        })
        .unwrap_or(false)
    {
        assert!(started.elapsed().as_secs() < 60, "the run did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    child
}

fn signal(child: &Child, sig: &str) {
    let kill = Command::new("kill")
        .args([&format!("-{sig}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
}

/// With an output at every step, every stop lands right after one.
#[test]
fn a_stop_after_an_output_step_records_it_once() {
    let tmp = tempfile::tempdir().unwrap();
    let child = start(
        tmp.path(),
        "r",
        &["output.every=1", "output.frames=\"ply\""],
    );
    signal(&child, "INT");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let run = tmp.path().join("r");
    let csv = std::fs::read_to_string(run.join("energy.csv")).unwrap();
    let steps: Vec<u64> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert!(
        steps.windows(2).all(|w| w[0] < w[1]),
        "{:?}",
        &steps[steps.len().saturating_sub(3)..]
    );
    let s = read_json(&run.join("summary.json"));
    assert_eq!(s["interrupted"], true);
    assert_eq!(s["steps"].as_u64(), steps.last().copied());
    let frames = std::fs::read_dir(run.join("frames")).unwrap().count();
    assert_eq!(frames, steps.len());
    assert_eq!(s["frames"].as_u64(), Some(steps.len() as u64));
    // The log plots: its times increase.
    let o = msc(&["plot", "r"], tmp.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// 130 means every output is written; a second signal that ends the run at once exits
/// 137, the rows so far readable.
#[test]
fn a_second_signal_never_claims_the_clean_status() {
    let tmp = tempfile::tempdir().unwrap();
    let child = start(tmp.path(), "t", &["output.every=1000"]);
    signal(&child, "INT");
    std::thread::sleep(Duration::from_millis(5));
    signal(&child, "INT");
    let o = child.wait_with_output().unwrap();
    let run = tmp.path().join("t");
    match o.status.code() {
        // The clean stop finished before the second signal came.
        Some(130) => {
            assert!(run.join("summary.json").is_file() && run.join("energy.csv").is_file());
        }
        // Ended at once: the rows written so far are readable, in energy.csv or, when
        // the log was not finished, in its hidden temporary file.
        Some(137) => {
            let mut logs = common::leftover_temp_files(&run);
            logs.retain(|p| p.to_string_lossy().contains(".energy.csv.tmp-"));
            logs.push(run.join("energy.csv"));
            let rows = logs
                .iter()
                .filter_map(|p| std::fs::read_to_string(p).ok())
                .map(|t| t.lines().count())
                .max();
            assert!(rows.is_some_and(|n| n >= 2), "{logs:?}");
        }
        code => panic!("exit {code:?}: {}", stderr(&o)),
    }
}
