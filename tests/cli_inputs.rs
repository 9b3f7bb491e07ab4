//! Bad option values refused up front (exit 2) instead of being acted on: `ddef-error
//! --samples 0`, and `render --gif` naming a folder (it drew every frame first).

mod common;

use common::{msc, run_tiny, stderr};

#[test]
fn ddef_error_refuses_zero_samples() {
    let tmp = tempfile::tempdir().unwrap();
    let o = msc(
        &[
            "ddef-error",
            "--random",
            "1",
            "--samples",
            "0",
            "--grid",
            "lattice",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--samples"), "{}", stderr(&o));
}

#[test]
fn render_refuses_a_gif_path_that_is_a_folder_before_drawing() {
    let tmp = tempfile::tempdir().unwrap();
    run_tiny(tmp.path(), "rf", &["output.frames=\"ply\""]);
    std::fs::create_dir(tmp.path().join("g")).unwrap();
    let o = msc(&["render", "rf", "--gif", "g"], tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--gif"), "{}", stderr(&o));
    assert!(!tmp.path().join("rf/render").exists(), "frames were drawn");
}
