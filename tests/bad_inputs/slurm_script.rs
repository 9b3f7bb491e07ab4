//! `--slurm` and `--submit` with hostile values: a control character in any value that
//! reaches the job script, or a value outside Slurm's syntax, is refused naming its option
//! before anything is created; legal but awkward values (spaces, `%`, `$(...)`, quotes) are
//! quoted so that the script runs the command as given and nothing else.

use super::{assert_no_crash, fixture};
use crate::common::{msc, msc_with, stderr};
use std::path::Path;

const SWEEP: &[&str] = &[
    "sweep",
    "small.toml",
    "--vary",
    "material.stiffness=5,10",
    "--backend",
    "cpu",
    "--quiet",
    "--slurm",
];

fn slurm(dir: &Path, out: &str, extra: &[&str]) -> std::process::Output {
    let mut args = SWEEP.to_vec();
    args.extend(["--out", out]);
    args.extend_from_slice(extra);
    msc(&args, dir)
}

#[test]
fn values_that_would_break_the_job_script_are_refused_naming_their_option() {
    let dir = fixture();
    let cases: &[(&str, &[&str], &str)] = &[
        // A newline in --out put a command into the script (issue 22).
        ("nl\ntouch X\n#", &[], "--out"),
        ("o1", &["--partition", "$(touch X)"], "--partition"),
        ("o2", &["--partition", "gpu;touch X"], "--partition"),
        ("o3", &["--time", "1:00`touch X`"], "--time"),
        ("o4", &["--time", "tomorrow"], "--time"),
        ("o5", &["--time", "1:2:3:4"], "--time"),
        ("o6", &["--gres", "gpu:1 touch X"], "--gres"),
        ("o7", &["--job-name", "a\nb"], "--job-name"),
        ("o8", &["--job-name", "tab\there"], "--job-name"),
        // A value that loads (TOML allows a newline inside an array) but would break the
        // script.
        ("o9", &["--set", "mesh.resolution=[4,\n4]"], "--set"),
        ("o\\back", &[], "--out"),
    ];
    let mut failures = Vec::new();
    for (out, extra, option) in cases {
        let o = slurm(dir.path(), out, extra);
        let what = format!("--out {out:?} {extra:?}");
        assert_no_crash(&o, &what);
        let err = stderr(&o);
        if o.status.code() != Some(2) || !err.contains(option) || !err.starts_with("error:") {
            failures.push(format!(
                "{what}: expected exit 2 naming {option}, got {:?}: {err}",
                o.status.code()
            ));
        }
        if dir.path().join(out).exists() {
            failures.push(format!("{what}: the folder was created"));
        }
    }
    assert!(!dir.path().join("X").exists(), "a command ran");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A folder with a space no longer blames a `--job-name` the user never gave.
#[test]
fn an_out_folder_with_a_space_gets_a_job_name_of_its_own() {
    let dir = fixture();
    let o = slurm(dir.path(), "a b", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let script = std::fs::read_to_string(dir.path().join("a b/slurm-array.sh")).unwrap();
    assert!(script.contains("#SBATCH --job-name=msc-a_b\n"), "{script}");
}

/// Spaces, `%`, `$(...)`, backticks and quotes in --out and --job-name: the script parses
/// (`bash -n`), its `#SBATCH` lines quote the values as sbatch reads them (`%` doubled in
/// the log paths), and running its body as an array task (Slurm's variables set by hand)
/// runs the sweep into the folder named exactly so, and nothing else.
#[cfg(unix)]
#[test]
fn awkward_values_are_quoted_so_the_script_runs_only_the_sweep() {
    let dir = fixture();
    let out = "a b%c$(touch PWNED)`touch PWNED2`'q\"";
    let o = slurm(
        dir.path(),
        out,
        &["--job-name", "my job #1 $(touch PWNED3)"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let script_path = dir.path().join(out).join("slurm-array.sh");
    let script = std::fs::read_to_string(&script_path).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script_path)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "bash -n: {}\n{script}",
        stderr(&check)
    );
    let logs = dir
        .path()
        .canonicalize()
        .unwrap()
        .join(out)
        .join("slurm-logs");
    let logs = logs
        .to_str()
        .unwrap()
        .replace('%', "%%")
        .replace('"', "\\\"");
    for want in [
        format!("#SBATCH --output=\"{logs}/%A_%a.out\""),
        format!("#SBATCH --error=\"{logs}/%A_%a.err\""),
        "#SBATCH --job-name=\"my job #1 $(touch PWNED3)\"".to_string(),
    ] {
        assert!(
            script.lines().any(|l| l == want),
            "{want} missing from\n{script}"
        );
    }
    let ran = std::process::Command::new("bash")
        .arg(&script_path)
        .env("SLURM_ARRAY_TASK_ID", "1")
        .env("SLURM_ARRAY_TASK_MIN", "0")
        .env("SLURM_ARRAY_TASK_COUNT", "2")
        .current_dir("/")
        .output()
        .unwrap();
    assert!(ran.status.success(), "{}\n{script}", stderr(&ran));
    for injected in ["PWNED", "PWNED2", "PWNED3"] {
        assert!(
            !dir.path().join(injected).exists(),
            "{injected}: a command ran"
        );
        assert!(
            !Path::new("/").join(injected).exists(),
            "{injected}: a command ran"
        );
    }
    let table = dir.path().join(out).join("runs.shard-1-of-2.csv");
    let text =
        std::fs::read_to_string(&table).unwrap_or_else(|e| panic!("{}: {e}", table.display()));
    assert_eq!(text.lines().count(), 2, "{text}");
}

/// `--slurm` into a folder whose plan.json holds another plan is refused at once (every
/// task would fail), in words rather than Rust's debug output.
#[test]
fn a_script_for_a_folder_with_another_plan_is_refused() {
    let dir = fixture();
    let o = slurm(dir.path(), "p", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = msc(
        &[
            "sweep",
            "small.toml",
            "--vary",
            "material.stiffness=5,20",
            "--backend",
            "cpu",
            "--quiet",
            "--slurm",
            "--out",
            "p",
        ],
        dir.path(),
    );
    assert_no_crash(&o, "second --slurm");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("holds another plan"), "{err}");
    assert!(
        err.contains("run 2") && err.contains("material.stiffness=20"),
        "{err}"
    );
    assert!(
        !err.contains('{') && !err.contains("Some("),
        "debug output: {err}"
    );
}

/// sbatch that exits 0 but prints no job id: said so, not "submitted job ;".
#[cfg(unix)]
#[test]
fn a_submission_without_a_job_id_is_an_error() {
    use std::os::unix::fs::PermissionsExt;
    let dir = fixture();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let sbatch = bin.join("sbatch");
    std::fs::write(&sbatch, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&sbatch, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut args = SWEEP.to_vec();
    args.extend(["--out", "s", "--submit"]);
    let o = msc_with(&args, dir.path(), &[("PATH", path.as_str())]);
    assert_no_crash(&o, "--submit");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("printed no job id"), "{err}");
    assert!(
        !crate::common::stdout(&o).contains("submitted job"),
        "{}",
        crate::common::stdout(&o)
    );
}

/// A folder or scene whose name starts with `-` (given as `--out=-o` and after `--`):
/// the script's command must not hand clap a word it takes for an option, so the task
/// runs its shard instead of failing at argument parsing.
#[cfg(unix)]
#[test]
fn names_that_start_with_a_dash_stay_values_in_the_script() {
    let dir = fixture();
    std::fs::copy(dir.path().join("small.toml"), dir.path().join("-s.toml")).unwrap();
    let o = msc(
        &[
            "sweep",
            "--vary",
            "material.stiffness=5,10",
            "--backend",
            "cpu",
            "--quiet",
            "--slurm",
            "--out=-o",
            "--",
            "-s.toml",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let script_path = dir.path().join("-o/slurm-array.sh");
    let script = std::fs::read_to_string(&script_path).unwrap();
    let ran = std::process::Command::new("bash")
        .arg(&script_path)
        .env("SLURM_ARRAY_TASK_ID", "0")
        .env("SLURM_ARRAY_TASK_MIN", "0")
        .env("SLURM_ARRAY_TASK_COUNT", "2")
        .current_dir("/")
        .output()
        .unwrap();
    assert!(ran.status.success(), "{}\n{script}", stderr(&ran));
    let table = dir.path().join("-o/runs.shard-0-of-2.csv");
    let text =
        std::fs::read_to_string(&table).unwrap_or_else(|e| panic!("{}: {e}", table.display()));
    assert_eq!(text.lines().count(), 2, "{text}");
    // merge's rerun command for the missing shard parses too.
    let o = msc(&["merge", "./-o"], dir.path());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let line = err
        .lines()
        .find_map(|l| l.trim().strip_prefix("rerun with: "))
        .unwrap_or_else(|| panic!("no rerun command: {err}"));
    let rerun = std::process::Command::new("bash")
        .arg("-c")
        .arg(line)
        .output()
        .unwrap();
    assert!(rerun.status.success(), "{line}: {}", stderr(&rerun));
    assert!(dir.path().join("-o/runs.shard-1-of-2.csv").exists());
}
