//! Beyond one process and one device: `--shard` and `msc merge`, a Slurm array task's
//! shard, `--slurm` scripts and `--devices`, end to end through the `msc` binary.

mod common;

use common::{comparable_table, msc_unsharded, output_text as text, tiny};
use std::path::Path;
use std::process::{Command, Output};

/// `msc ARGS` in `cwd`, outside any Slurm array task, with `env` set, on one CPU thread.
fn msc_env(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Output {
    msc_unsharded(args, cwd, env)
}

const VARY: &str = "integrator.dt=0.005,0.01,0.015,0.02,0.025";

fn sweep<'a>(out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "sweep",
        "tiny.toml",
        "--vary",
        VARY,
        "--out",
        out,
        "--backend",
        "cpu",
        "--quiet",
    ];
    a.extend_from_slice(extra);
    a
}

#[test]
fn shards_merge_into_the_unsharded_table_and_merge_names_what_is_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    tiny(cwd);
    let o = msc_env(&sweep("whole", &[]), cwd, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let whole = std::fs::read_to_string(cwd.join("whole/runs.csv")).unwrap();

    // Shard 0 of 2 only: runs 0, 2, 4 of the plan.
    let o = msc_env(&sweep("sharded", &["--shard", "0/2"]), cwd, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let table0 = std::fs::read_to_string(cwd.join("sharded/runs.shard-0-of-2.csv")).unwrap();
    assert_eq!(table0.lines().count(), 1 + 3, "{table0}");
    assert!(!cwd.join("sharded/runs.csv").exists());
    assert!(!cwd.join("sharded/integrator.dt=0.01").exists());

    // The merge lists shard 1's runs with the command that reruns them, and fails.
    let o = msc_env(&["merge", "sharded"], cwd, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let said = text(&o);
    assert!(
        said.contains("integrator.dt=0.01, integrator.dt=0.02"),
        "{said}"
    );
    assert!(said.contains("--shard 1/2"), "{said}");
    assert!(!said.contains("--shard 0/2"), "{said}");
    let partial = std::fs::read_to_string(cwd.join("sharded/runs.csv")).unwrap();
    let statuses: Vec<String> = comparable_table(&partial)[1..]
        .iter()
        .map(|r| r[1].clone())
        .collect();
    assert_eq!(statuses, ["ok", "missing", "ok", "missing", "ok"]);

    // A shard with another plan is refused before it runs.
    let o = msc_env(&sweep("sharded", &["--shard", "1/3"]), cwd, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("shard count is 3"), "{}", text(&o));

    // The rerun command as merge printed it finishes the batch.
    let line = said.lines().find(|l| l.contains("rerun with:")).unwrap();
    let command = line.split_once("rerun with: ").unwrap().1;
    let o = Command::new("sh").arg("-c").arg(command).output().unwrap();
    assert!(o.status.success(), "{command}: {}", text(&o));
    let o = msc_env(&["merge", "sharded"], cwd, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let merged = std::fs::read_to_string(cwd.join("sharded/runs.csv")).unwrap();
    assert_eq!(comparable_table(&merged), comparable_table(&whole));

    // Rerunning a finished shard redoes nothing.
    let o = msc_env(&sweep("sharded", &["--shard", "0/2"]), cwd, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let table0 = std::fs::read_to_string(cwd.join("sharded/runs.shard-0-of-2.csv")).unwrap();
    assert!(
        table0.lines().skip(1).all(|l| l.contains(",true,")),
        "{table0}"
    );
}

#[test]
fn a_slurm_array_task_takes_its_shard_from_the_environment() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path());
    let env = [
        ("SLURM_ARRAY_TASK_ID", "11"),
        ("SLURM_ARRAY_TASK_MIN", "10"),
        ("SLURM_ARRAY_TASK_COUNT", "2"),
    ];
    let o = msc_env(&sweep("out", &[]), tmp.path(), &env);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("shard 1/2 (from SLURM_ARRAY_TASK_ID=11)"),
        "{}",
        text(&o)
    );
    let t = std::fs::read_to_string(tmp.path().join("out/runs.shard-1-of-2.csv")).unwrap();
    assert_eq!(t.lines().count(), 1 + 2, "{t}");
    // --shard wins over the environment.
    let o = msc_env(&sweep("out", &["--shard", "0/2"]), tmp.path(), &env);
    assert!(o.status.success(), "{}", text(&o));
    assert!(tmp.path().join("out/runs.shard-0-of-2.csv").exists());
}

/// A shard job runs the sweep as it was asked for: `--no-batch` goes into the script's
/// command, and is absent when not asked for.
#[test]
fn slurm_scripts_pass_no_batch_on() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path());
    for (out, extra, wanted) in [("nb", &["--no-batch"][..], true), ("b", &[][..], false)] {
        let mut args = sweep(out, &["--slurm", "--gres", "none"]);
        args.extend_from_slice(extra);
        let o = msc_env(&args, tmp.path(), &[]);
        assert!(o.status.success(), "{}", text(&o));
        let script = std::fs::read_to_string(tmp.path().join(out).join("slurm-array.sh")).unwrap();
        let exec = script.lines().find(|l| l.starts_with("exec ")).unwrap();
        assert_eq!(exec.contains(" --no-batch"), wanted, "{script}");
    }
}

#[test]
fn slurm_writes_an_array_script_and_submit_without_sbatch_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path());
    let o = msc_env(
        &sweep(
            "out",
            &[
                "--slurm", "--shards", "2", "--time", "00:10:00", "--gres", "none",
            ],
        ),
        tmp.path(),
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let script = std::fs::read_to_string(tmp.path().join("out/slurm-array.sh")).unwrap();
    assert!(script.contains("#SBATCH --array=0-1\n"), "{script}");
    assert!(script.contains("#SBATCH --time=00:10:00\n"), "{script}");
    assert!(!script.contains("--gres"), "{script}");
    let exec = script.lines().find(|l| l.starts_with("exec ")).unwrap();
    assert!(exec.contains(" sweep tiny.toml --vary "), "{script}");
    for gone in ["--slurm", "--shards", "--time", "--gres", "--shard "] {
        assert!(!exec.contains(gone), "{gone}: {script}");
    }
    // Nothing ran.
    assert!(!tmp.path().join("out/integrator.dt=0.005").exists());
    // --submit where there is no sbatch.
    let o = msc_env(
        &sweep("out2", &["--submit"]),
        tmp.path(),
        &[("PATH", "/nonexistent")],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("cannot run sbatch"), "{}", text(&o));
    // A plan that cannot run writes no script.
    let o = msc_env(
        &[
            "sweep",
            "tiny.toml",
            "--vary",
            "integrator.dtt=1,2",
            "--out",
            "bad",
            "--slurm",
        ],
        tmp.path(),
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!tmp.path().join("bad/slurm-array.sh").exists());
}

#[test]
fn several_device_workers_write_what_one_device_writes() {
    if msc::gpu::list_adapters().is_empty() {
        common::skip_no_adapter("");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path());
    let gpu = |out: &'static str, devices: &'static str| {
        vec![
            "sweep",
            "tiny.toml",
            "--vary",
            VARY,
            "--out",
            out,
            "--backend",
            "gpu",
            "--quiet",
            "--devices",
            devices,
        ]
    };
    let o = msc_env(&gpu("one", "1"), tmp.path(), &[]);
    assert!(o.status.success(), "{}", text(&o));
    // Two workers (on this machine's one device, or two devices of one type).
    let o = msc_env(&gpu("two", "2"), tmp.path(), &[]);
    assert!(o.status.success(), "{}", text(&o));
    let o = msc_env(&gpu("all", "all"), tmp.path(), &[]);
    assert!(o.status.success(), "{}", text(&o));
    let one = std::fs::read_to_string(tmp.path().join("one/runs.csv")).unwrap();
    for other in ["two", "all"] {
        let t = std::fs::read_to_string(tmp.path().join(other).join("runs.csv")).unwrap();
        assert_eq!(comparable_table(&t), comparable_table(&one), "{other}");
        // And each run's energy log, byte for byte.
        for run in ["integrator.dt=0.005", "integrator.dt=0.025"] {
            let a = std::fs::read(tmp.path().join("one").join(run).join("energy.csv")).unwrap();
            let b = std::fs::read(tmp.path().join(other).join(run).join("energy.csv")).unwrap();
            assert_eq!(a, b, "{other}/{run}");
        }
    }
    assert_eq!(comparable_table(&one).len(), 6);
}

#[test]
fn a_sharded_manifest_merges_from_any_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let study = tmp.path().join("study");
    std::fs::create_dir_all(study.join("scenes")).unwrap();
    tiny(&study.join("scenes"));
    // Scenes relative to the manifest, which is not in the folder the shards run from.
    std::fs::write(
        study.join("runs.toml"),
        r#"
[[runs]]
scene = "scenes/tiny.toml"
name = "a"
[[runs]]
scene = "scenes/tiny.toml"
name = "b"
set = ["integrator.dt=0.02"]
[[runs]]
scene = "scenes/tiny.toml"
name = "c"
set = ["material.charge=2e-6"]
"#,
    )
    .unwrap();
    let batch = |out: &'static str, shard: Option<&'static str>| {
        let mut a = vec![
            "batch",
            "study/runs.toml",
            "--out",
            out,
            "--backend",
            "cpu",
            "--quiet",
        ];
        if let Some(s) = shard {
            a.extend(["--shard", s]);
        }
        a
    };
    let o = msc_env(&batch("whole", None), tmp.path(), &[]);
    assert!(o.status.success(), "{}", text(&o));
    for s in ["0/2", "1/2"] {
        let o = msc_env(&batch("sharded", Some(s)), tmp.path(), &[]);
        assert!(o.status.success(), "{s}: {}", text(&o));
    }
    // Merged from another folder, by absolute path.
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let dir = tmp.path().join("sharded");
    let o = msc_env(&["merge", dir.to_str().unwrap()], &elsewhere, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let merged = std::fs::read_to_string(dir.join("runs.csv")).unwrap();
    let whole = std::fs::read_to_string(tmp.path().join("whole/runs.csv")).unwrap();
    assert_eq!(comparable_table(&merged), comparable_table(&whole));
    assert_eq!(comparable_table(&merged).len(), 4);
    // A folder without a plan is an input error.
    let o = msc_env(&["merge", "whole"], tmp.path(), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("plan.json"), "{}", text(&o));
}
