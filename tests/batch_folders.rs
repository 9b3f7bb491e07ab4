//! `msc batch` and `msc sweep` never clear a folder they did not write: a planned run's
//! folder holding the user's files stops the batch (exit 2, nothing run or removed), and
//! the batch folder's own names are refused as run names.

mod common;

use common::{msc, stderr, tiny};
use std::path::Path;

fn manifest(dir: &Path, name: &str) -> std::path::PathBuf {
    let scene = tiny(dir);
    let path = dir.join("md.toml");
    std::fs::write(
        &path,
        format!(
            "[[runs]]\nscene = \"{}\"\nname = \"{name}\"\n",
            scene.file_name().unwrap().to_string_lossy()
        ),
    )
    .unwrap();
    path
}

#[test]
fn a_run_folder_holding_the_users_files_is_refused_not_cleared() {
    let tmp = tempfile::tempdir().unwrap();
    let md = manifest(tmp.path(), "data");
    let data = tmp.path().join("home/data");
    std::fs::create_dir_all(data.join("sub")).unwrap();
    std::fs::write(data.join("thesis.txt"), "precious").unwrap();
    let args = ["batch", "md.toml", "--out", "home", "--backend", "cpu"];
    let o = msc(&args, tmp.path());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("thesis.txt") && err.contains("sub/") && err.contains("data"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(data.join("thesis.txt")).unwrap(),
        "precious"
    );
    assert!(data.join("sub").is_dir());
    assert!(!tmp.path().join("home/runs.csv").exists(), "nothing ran");
    assert!(md.is_file());
}

#[test]
fn a_sweep_run_folder_holding_the_users_files_is_refused_too() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path());
    let run = tmp.path().join("out/integrator.dt=0.01");
    std::fs::create_dir_all(run.join("frames")).unwrap();
    std::fs::write(run.join("frames/notes.txt"), "mine").unwrap();
    let args = [
        "sweep",
        "tiny.toml",
        "--vary",
        "integrator.dt=0.01",
        "--out",
        "out",
        "--backend",
        "cpu",
    ];
    let o = msc(&args, tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("frames/notes.txt"), "{}", stderr(&o));
    assert!(run.join("frames/notes.txt").is_file());
}

/// What an unfinished run left (its scene copy, a temporary energy log, a frame) is
/// msc's own: the batch clears it and runs.
#[test]
fn an_unfinished_runs_leftovers_are_cleared_and_the_run_redone() {
    let tmp = tempfile::tempdir().unwrap();
    manifest(tmp.path(), "r");
    let run = tmp.path().join("home/r");
    std::fs::create_dir_all(run.join("frames")).unwrap();
    std::fs::write(run.join("scene.toml"), "old").unwrap();
    std::fs::write(run.join(".energy.csv.tmp-1-0"), "step\n").unwrap();
    std::fs::write(run.join("frames/frame_000099.ply"), "old").unwrap();
    let args = ["batch", "md.toml", "--out", "home", "--backend", "cpu"];
    let o = msc(&args, tmp.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(run.join("summary.json").is_file());
    assert!(!run.join(".energy.csv.tmp-1-0").exists());
    assert!(!run.join("frames/frame_000099.ply").exists());
}

#[test]
fn the_batch_folders_own_names_are_refused_as_run_names() {
    for name in [
        "slurm-logs",
        "plan.json",
        "slurm-array.sh",
        "runs.shard-1-of-2.csv",
    ] {
        let tmp = tempfile::tempdir().unwrap();
        manifest(tmp.path(), name);
        let logs = tmp.path().join("home/slurm-logs");
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::write(logs.join("1_0.out"), "log").unwrap();
        let args = ["batch", "md.toml", "--out", "home", "--backend", "cpu"];
        let o = msc(&args, tmp.path());
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains(name), "{}", stderr(&o));
        assert!(logs.join("1_0.out").is_file());
    }
}

/// An unsharded sweep into the folder of a sharded one must run the same plan: `msc
/// merge` would replace its runs.csv with the table of the folder's plan.
#[test]
fn an_unsharded_sweep_into_a_sharded_folder_must_run_its_plan() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path());
    let sweep = |values: &str, shard: Option<&str>| {
        let vary = format!("integrator.dt={values}");
        let mut args = vec!["sweep", "tiny.toml", "--vary", &vary, "--steps", "2"];
        args.extend(["--backend", "cpu", "--quiet", "--out", "mg"]);
        if let Some(s) = shard {
            args.extend(["--shard", s]);
        }
        msc(&args, tmp.path())
    };
    for s in ["0/2", "1/2"] {
        let o = sweep("0.01,0.02,0.03,0.04", Some(s));
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let o = sweep("0.05,0.06", None);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("plan.json"), "{}", stderr(&o));
    assert!(!tmp.path().join("mg/runs.csv").exists());
    assert!(!tmp.path().join("mg/integrator.dt=0.05").exists());
    // The same plan unsharded is the same batch: it runs.
    let o = sweep("0.01,0.02,0.03,0.04", None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A manifest's built-in scene is the built-in wherever the batch runs from, and so is a
/// sharded sweep's when merge checks it: a file of the same name in the current folder
/// (which `msc run torus` would read) was run, or vouched for, instead.
#[test]
fn a_built_in_scene_of_a_plan_is_never_a_file_of_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let elsewhere = d.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::copy(tiny(d), elsewhere.join("torus")).unwrap();
    std::fs::write(
        d.join("m.toml"),
        "[[runs]]\nscene = \"torus\"\nname = \"t\"\nset = ['output.frames=\"none\"']\n",
    )
    .unwrap();
    let o = msc(
        &[
            "batch",
            "../m.toml",
            "--out",
            "../b",
            "--backend",
            "cpu",
            "--quiet",
            "--steps",
            "1",
        ],
        &elsewhere,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let scene = std::fs::read_to_string(d.join("b/t/scene.toml")).unwrap();
    assert!(scene.contains("name = \"torus\""), "{scene}");
    // A sweep of the built-in, sharded here; merge runs where a file named torus lies.
    for k in ["0/2", "1/2"] {
        let o = msc(
            &[
                "sweep",
                "torus",
                "--vary",
                "material.stiffness=5,10",
                "--set",
                "output.frames=\"none\"",
                "--steps",
                "1",
                "--backend",
                "cpu",
                "--quiet",
                "--out",
                "s",
                "--shard",
                k,
            ],
            d,
        );
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let o = msc(&["merge", "../s"], &elsewhere);
    let said = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{said}");
    let table = std::fs::read_to_string(d.join("s/runs.csv")).unwrap();
    assert_eq!(table.matches(",ok,").count(), 2, "{table}");
}
