//! Bad option values refused up front (exit 2) instead of being acted on: `ddef-error
//! --samples 0`, `render --gif` naming a folder (it drew every frame first), and input
//! files that are FIFOs or devices.

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

/// A scene, mesh or manifest path naming a FIFO or a device is refused (exit 2) at once:
/// opening a FIFO blocked with no way to stop it, and `/dev/zero` was read until memory
/// ran out.
#[cfg(unix)]
#[test]
fn a_fifo_or_a_device_given_as_an_input_file_is_refused_at_once() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("scene.toml");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let fifo = fifo.to_str().unwrap();
    let mesh = format!("mesh.path={fifo}");
    let cases: [&[&str]; 4] = [
        &["run", fifo],
        &["run", "/dev/zero"],
        &["run", "torus", "--set", "mesh.kind=obj", "--set", &mesh],
        &["batch", fifo],
    ];
    for args in cases {
        let mut child = Command::new(env!("CARGO_BIN_EXE_msc"))
            .args(args)
            .args(["--out", "out"])
            .current_dir(tmp.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if started.elapsed() > Duration::from_secs(60) {
                child.kill().unwrap();
                panic!("{args:?} still running after 60 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let o = child.wait_with_output().unwrap();
        assert_eq!(status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("not a regular file"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
}
