//! `msc plot` on hostile inputs: infinite times and values no axis can span (it returned
//! nothing and spun forever), an output path that is another file of a run it plots, and
//! a window start that is not a number.

mod common;

use common::{msc, run_tiny, stderr};
use msc::output::energy::HEADER;
use std::path::Path;

fn log(dir: &Path, name: &str, rows: &[&str]) {
    let run = dir.join(name);
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(
        run.join("energy.csv"),
        format!("{HEADER}\n{}\n", rows.join("\n")),
    )
    .unwrap();
}

#[test]
fn an_infinite_time_is_left_out_like_an_infinite_value() {
    let tmp = tempfile::tempdir().unwrap();
    log(tmp.path(), "inf", &["0,0,1,1,1,0,0,3", "3,inf,1,1,1,0,0,3"]);
    log(
        tmp.path(),
        "bigdt",
        &["0,0,1,1,1,0,0,3", "2,inf,NaN,NaN,NaN,0,0,NaN"],
    );
    for run in ["inf", "bigdt"] {
        let o = msc(&["plot", run], tmp.path());
        assert_eq!(o.status.code(), Some(0), "{run}: {}", stderr(&o));
        assert!(tmp.path().join(run).join("energy.png").is_file());
    }
}

#[test]
fn values_no_axis_can_span_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    log(
        tmp.path(),
        "wide",
        &["0,0,-1e308,1,1,0,0,3", "1,1,1e308,1,1,0,0,3"],
    );
    log(
        tmp.path(),
        "wide_t",
        &["0,-1e308,1,1,1,0,0,3", "1,1e308,1,1,1,0,0,3"],
    );
    for (run, axis) in [("wide", "y axis"), ("wide_t", "x axis")] {
        let o = msc(&["plot", run], tmp.path());
        assert_eq!(o.status.code(), Some(2), "{run}: {}", stderr(&o));
        assert!(stderr(&o).contains(axis), "{}", stderr(&o));
        assert!(!tmp.path().join(run).join("energy.png").exists());
    }
}

#[test]
fn the_png_never_replaces_a_runs_scene_or_frames() {
    let tmp = tempfile::tempdir().unwrap();
    run_tiny(tmp.path(), "r1", &["output.frames=\"ply\""]);
    let frame = tmp.path().join("r1/frames/frame_000000.ply");
    assert!(frame.is_file());
    let before = |p: &str| std::fs::read(tmp.path().join(p)).unwrap();
    for target in [
        "r1/scene.toml",
        "r1/frames/frame_000000.ply",
        "r1/frames/new.png",
    ] {
        let existed = tmp.path().join(target).exists();
        let old = existed.then(|| before(target));
        let o = msc(&["plot", "r1", "--out", target], tmp.path());
        assert_eq!(o.status.code(), Some(2), "{target}: {}", stderr(&o));
        assert_eq!(old, existed.then(|| before(target)), "{target} changed");
        assert!(!tmp.path().join("r1/frames/new.png").exists());
    }
}

#[test]
fn a_window_start_that_is_not_a_number_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    log(tmp.path(), "a", &["0,0,1,1,1,0,0,3", "1,1,1,1,1,0,0,3"]);
    let o = msc(
        &[
            "plot",
            "a",
            "--reference",
            "a",
            "--relative-error",
            "--by-dt",
            "--from",
            "nan",
            "--out",
            "x.png",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--from"), "{}", stderr(&o));
    assert!(!tmp.path().join("x.png").exists());
}

/// Options the chosen plot would not use are refused, not ignored: `--term` on one run's
/// plot of every term, `--reference` without `--relative-error`.
#[test]
fn options_the_plot_would_ignore_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    log(tmp.path(), "a", &["0,0,1,1,1,0,0,3", "1,1,2,1,1,0,0,4"]);
    log(tmp.path(), "b", &["0,0,1,1,1,0,0,3", "1,1,2,2,1,0,0,5"]);
    let cases: [(&[&str], &str); 2] = [
        (&["plot", "a", "--term", "kinetic"], "--term kinetic"),
        (&["plot", "a", "--reference", "b"], "--relative-error"),
    ];
    for (args, fragment) in cases {
        let o = msc(args, tmp.path());
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(fragment), "{args:?}: {err}");
        assert!(!tmp.path().join("a/energy.png").exists(), "{args:?}");
    }
    // --term still picks the term where it applies.
    let o = msc(
        &["plot", "a", "b", "--term", "kinetic", "-o", "k.png"],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}
