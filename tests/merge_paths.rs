//! `msc merge` of a batch folder moved since its shards ran: the commands that rerun the
//! missing shards name the folder where it is now, as text.

mod common;

use common::{msc_unsharded, output_text as text, tiny};
use std::process::Output;

fn msc(args: &[&std::ffi::OsStr], cwd: &std::path::Path) -> Output {
    msc_unsharded(args, cwd, &[])
}

/// Moved to a UTF-8 path, the rerun command names it; moved to a path that is not UTF-8,
/// the merge is refused naming the folder (exit 2, no runs.csv), where it printed a
/// command whose `--out` held U+FFFD in place of the folder's bytes: another folder.
#[cfg(unix)]
#[test]
fn a_moved_folder_is_named_by_the_rerun_commands_or_refused() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    tiny(cwd);
    let a = |s: &'static str| -> &OsStr { s.as_ref() };
    let o = msc(
        &[
            a("sweep"),
            a("tiny.toml"),
            a("--vary"),
            a("integrator.dt=0.01,0.02"),
            a("--out"),
            a("sharded"),
            a("--backend"),
            a("cpu"),
            a("--steps"),
            a("2"),
            a("--quiet"),
            a("--shard"),
            a("0/2"),
        ],
        cwd,
    );
    assert!(o.status.success(), "{}", text(&o));

    let moved = cwd.join("moved");
    std::fs::rename(cwd.join("sharded"), &moved).unwrap();
    let o = msc(&[a("merge"), moved.as_os_str()], cwd);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let said = text(&o);
    let line = said.lines().find(|l| l.contains("--shard 1/2")).unwrap();
    assert!(line.contains(moved.to_str().unwrap()), "{said}");
    std::fs::remove_file(moved.join("runs.csv")).unwrap();

    let odd = cwd.join(OsStr::from_bytes(b"moved\xff"));
    std::fs::rename(&moved, &odd).unwrap();
    let o = msc(&[a("merge"), odd.as_os_str()], cwd);
    let said = text(&o);
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert!(
        said.contains("not UTF-8") && said.contains(&odd.display().to_string()),
        "{said}"
    );
    assert!(!said.contains("--shard 1/2"), "{said}");
    assert!(!odd.join("runs.csv").exists(), "runs.csv was written");
}
