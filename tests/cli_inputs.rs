//! Bad option values refused up front (exit 2) instead of being acted on: `ddef-error
//! --samples 0`.

mod common;

use common::{msc, stderr};

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
