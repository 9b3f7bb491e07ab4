//! Writers and their inputs: a second process writing into a run or batch folder is
//! refused while the first runs (with the holder's pid); no command writes over a file it
//! reads; a sharded batch's plan.json is validated before it is trusted; messages say what
//! happened in words.

use super::{assert_no_crash, fixture, SMALL};
use crate::common::{msc, read_json, stderr, stdout};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A background msc, killed if the test fails before it is stopped.
struct Background(Option<Child>);

impl Background {
    fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `msc ARGS` in `dir`, running in the background.
fn spawn(args: &[&str], dir: &Path) -> Background {
    let child = Command::new(env!("CARGO_BIN_EXE_msc"))
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Background(Some(child))
}

/// Waits until `path` exists and is not empty.
fn wait_for(path: &Path) {
    let started = Instant::now();
    while std::fs::metadata(path).map_or(true, |m| m.len() == 0) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stops a background msc with SIGINT and returns its output (it exits 130).
fn stop(mut running: Background) -> std::process::Output {
    let child = running.0.take().unwrap();
    let id = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &id])
        .status()
        .unwrap()
        .success());
    child.wait_with_output().unwrap()
}

/// Refused as a second writer, naming `pid` among the holders.
fn assert_locked(o: &std::process::Output, pid: u32, what: &str) {
    assert_no_crash(o, what);
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{what}: {err}");
    assert!(
        err.contains("being written by another msc process (pid"),
        "{what}: {err}"
    );
    assert!(err.contains(&pid.to_string()), "{what}: {err}");
}

/// Two `msc run --out D` at once: the second is refused while the first writes, and the
/// first's summary vouches for its own files only.
#[cfg(unix)]
#[test]
fn a_second_writer_of_a_run_folder_is_refused() {
    let dir = fixture();
    let first = spawn(
        &[
            "run",
            "small.toml",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            "d",
            "--steps",
            "100000000",
            "--set",
            "output.every=1000",
        ],
        dir.path(),
    );
    let pid = first.id();
    wait_for(&dir.path().join("d/scene.toml"));
    let second = msc(
        &[
            "run",
            "small.toml",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            "d",
            "--set",
            "material.charge=2e-9",
        ],
        dir.path(),
    );
    assert_locked(&second, pid, "a second run into d");
    let o = stop(first);
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let summary = read_json(&dir.path().join("d/summary.json"));
    let scene = std::fs::read_to_string(dir.path().join("d/scene.toml")).unwrap();
    assert!(!scene.contains("2e-9"), "the second run's scene: {scene}");
    for f in summary["outputs"].as_array().unwrap() {
        let d: msc::digest::FileDigest = serde_json::from_value(f.clone()).unwrap();
        assert!(
            d.matches(&dir.path().join("d").join(&d.path)),
            "{} is not what was written",
            d.path
        );
    }
    // Once the first has ended, the folder is free.
    let o = msc(
        &[
            "run",
            "small.toml",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            "d",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A batch folder: shards of one plan run side by side; the same shard twice, a whole
/// batch beside a shard, is refused; `msc merge` may read it meanwhile.
#[cfg(unix)]
#[test]
fn batch_folders_take_one_whole_batch_or_distinct_shards() {
    let dir = fixture();
    let sweep = |shard: Option<&str>| -> Vec<String> {
        let mut a: Vec<String> = [
            "sweep",
            "small.toml",
            "--vary",
            "integrator.steps=100000000,3",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            "s",
            "--set",
            "output.every=1000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(k) = shard {
            a.extend(["--shard".to_string(), k.to_string()]);
        }
        a
    };
    let run = |v: Vec<String>| {
        let refs: Vec<&str> = v.iter().map(String::as_str).collect();
        msc(&refs, dir.path())
    };
    let long = sweep(Some("0/2"));
    let long: Vec<&str> = long.iter().map(String::as_str).collect();
    let first = spawn(&long, dir.path());
    let pid = first.id();
    wait_for(&dir.path().join("s/integrator.steps=100000000/scene.toml"));
    // The other shard runs beside it.
    let o = run(sweep(Some("1/2")));
    assert_eq!(o.status.code(), Some(0), "shard 1/2: {}", stderr(&o));
    assert_locked(&run(sweep(Some("0/2"))), pid, "shard 0/2 twice");
    assert_locked(&run(sweep(None)), pid, "a whole sweep beside a shard");
    let o = msc(&["merge", "s"], dir.path());
    assert_eq!(o.status.code(), Some(1), "merge: {}", stderr(&o));
    assert!(!stderr(&o).contains("being written"), "{}", stderr(&o));
    let o = stop(first);
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
}

/// No command writes over a file it reads (issue 22: plot and render replaced the run's
/// energy log).
#[test]
fn outputs_never_replace_inputs() {
    let dir = fixture();
    let d = dir.path();
    let o = msc(
        &[
            "run",
            "small.toml",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            "r",
        ],
        d,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let energy = std::fs::read(d.join("r/energy.csv")).unwrap();
    std::fs::create_dir_all(d.join("f")).unwrap();
    std::fs::copy(d.join("r/frames/frame_000003.ply"), d.join("f/fit.json")).unwrap();
    std::fs::create_dir_all(d.join("sw/material.stiffness=5")).unwrap();
    std::fs::write(d.join("sw/material.stiffness=5/scene.toml"), SMALL).unwrap();
    std::fs::create_dir_all(d.join("o")).unwrap();
    std::fs::copy(d.join("tri.obj"), d.join("o/energy.csv")).unwrap();
    std::fs::create_dir_all(d.join("b")).unwrap();
    std::fs::write(
        d.join("b/runs.csv"),
        "[[runs]]\nscene = \"../small.toml\"\nname = \"a\"\n",
    )
    .unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["plot", "r", "--out", "r/energy.csv"], "r/energy.csv"),
        (
            &["plot", "r", "--out", "r/./summary.json"],
            "r/summary.json",
        ),
        (
            &[
                "plot",
                "r/energy.csv",
                "r",
                "--drift",
                "--out",
                "r/../r/energy.csv",
            ],
            "r/energy.csv",
        ),
        (&["render", "r", "--gif", "r/energy.csv"], "r/energy.csv"),
        (
            &["render", "r", "--gif", "r/frames/frame_000001.ply"],
            "r/frames/frame_000001.ply",
        ),
        (
            &[
                "fit",
                "small.toml",
                "--target",
                "f/fit.json",
                "--param",
                "charge",
                "--backend",
                "cpu",
                "--out",
                "f",
            ],
            "f/fit.json",
        ),
        (
            &[
                "ddef-error",
                "small.toml",
                "--json",
                "small.toml",
                "--samples",
                "50",
            ],
            "small.toml",
        ),
        (
            &[
                "sweep",
                "sw/material.stiffness=5/scene.toml",
                "--vary",
                "material.stiffness=5,10",
                "--backend",
                "cpu",
                "--out",
                "sw",
            ],
            "sw/material.stiffness=5/scene.toml",
        ),
        (
            &["batch", "b/runs.csv", "--backend", "cpu", "--out", "b"],
            "b/runs.csv",
        ),
        // A mesh stored under an output's name in the run folder.
        (
            &[
                "run",
                "small.toml",
                "--backend",
                "cpu",
                "--set",
                "mesh.kind=\"obj\"",
                "--set",
                "mesh.path=\"o/energy.csv\"",
                "--out",
                "o",
            ],
            "o/energy.csv",
        ),
    ];
    let mut failures = Vec::new();
    for (args, input) in cases {
        let before = std::fs::read(d.join(input)).unwrap();
        let o = msc(args, d);
        let what = args.join(" ");
        assert_no_crash(&o, &what);
        let err = stderr(&o);
        if o.status.code() != Some(2) || !err.contains("an input of this command") {
            failures.push(format!(
                "msc {what}: expected exit 2, got {:?}: {err}",
                o.status.code()
            ));
        }
        if std::fs::read(d.join(input)).unwrap() != before {
            failures.push(format!("msc {what} changed {input}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(std::fs::read(d.join("r/energy.csv")).unwrap(), energy);
}

/// A sharded sweep with one shard done, for the plan.json cases.
fn one_shard(d: &Path, out: &str) {
    let o = msc(
        &[
            "sweep",
            "small.toml",
            "--vary",
            "material.stiffness=5,10",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            out,
            "--shard",
            "0/2",
        ],
        d,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn shard_counts_and_plan_files_are_checked_before_they_are_trusted() {
    let dir = fixture();
    let d = dir.path();
    // N beyond the plan's runs: merge would loop over N shards.
    let o = msc(
        &[
            "sweep",
            "small.toml",
            "--vary",
            "material.stiffness=5,10",
            "--backend",
            "cpu",
            "--out",
            "m",
            "--shard",
            "0/18446744073709551615",
        ],
        d,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("at most the plan's 2 runs"),
        "{}",
        stderr(&o)
    );
    one_shard(d, "p");
    let plan_path = d.join("p/plan.json");
    let original: serde_json::Value = read_json(&plan_path);
    let tamper = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = original.clone();
        f(&mut v);
        std::fs::write(&plan_path, serde_json::to_string(&v).unwrap()).unwrap();
    };
    type Edit<'a> = &'a dyn Fn(&mut serde_json::Value);
    let cases: [(Edit, &str); 6] = [
        (
            &|v| v["shards"] = serde_json::json!(u64::MAX),
            "shard count",
        ),
        // A run's values that do not fill the columns shifted its row of runs.csv.
        (
            &|v| v["runs"][0]["columns"] = serde_json::json!(["5", "extra"]),
            "2 column values for the 1 columns",
        ),
        (
            &|v| v["columns"] = serde_json::json!([]),
            "for the 0 columns",
        ),
        (&|v| v["shards"] = serde_json::json!(0), "shard count"),
        (
            &|v| v["runs"][1]["name"] = serde_json::json!("../x"),
            "run name",
        ),
        (
            &|v| v["runs"][1]["name"] = v["runs"][0]["name"].clone(),
            "appears twice",
        ),
    ];
    for (f, fragment) in cases {
        tamper(f);
        let started = Instant::now();
        let o = msc(&["merge", "p"], d);
        assert_no_crash(&o, fragment);
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "merge took {:?}",
            started.elapsed()
        );
        assert_eq!(o.status.code(), Some(2), "{fragment}: {}", stderr(&o));
        assert!(stderr(&o).contains(fragment), "{}", stderr(&o));
    }
}

/// After the batch folder moved, merge's rerun commands name where it is now; a summary
/// that cannot be read is named as such, not as a run that never finished.
#[cfg(unix)]
#[test]
fn merge_names_the_folder_where_it_is_and_unreadable_summaries() {
    let dir = fixture();
    let d = dir.path();
    one_shard(d, "before");
    std::fs::rename(d.join("before"), d.join("after")).unwrap();
    let summary = d.join("after/material.stiffness=5/summary.json");
    std::fs::remove_file(&summary).unwrap();
    // A link to itself: opening it fails with an error other than "not found".
    std::os::unix::fs::symlink(&summary, &summary).unwrap();
    let o = msc(&["merge", "after"], d);
    let said = format!("{}{}", stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(1), "{said}");
    let here = d.canonicalize().unwrap().join("after");
    assert!(
        said.contains(&format!("--out {}", here.display())),
        "{said}"
    );
    assert!(!said.contains("--out before"), "{said}");
    let table = std::fs::read_to_string(d.join("after/runs.csv")).unwrap();
    assert!(table.contains("cannot read summary.json"), "{table}");
}

/// Messages in words: a negative number for a count, an infinite energy.
#[test]
fn messages_name_the_problem() {
    let dir = fixture();
    let d = dir.path();
    for args in [
        &["run", "small.toml", "--steps", "-1"][..],
        &[
            "sweep",
            "small.toml",
            "--vary",
            "material.stiffness=5",
            "--out",
            "o",
            "--shards",
            "-2",
            "--slurm",
        ],
        &["render", "r", "--every", "-3"],
    ] {
        let o = msc(args, d);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
        assert!(err.contains("invalid value '-"), "{args:?}: {err}");
    }
    std::fs::create_dir(d.join("inf")).unwrap();
    std::fs::write(
        d.join("inf/energy.csv"),
        "step,time,kinetic,elastic,coulomb,gravity,external,total\n\
         0,0e0,inf,0e0,0e0,0e0,0e0,inf\n1,1e-2,inf,0e0,0e0,0e0,0e0,inf\n",
    )
    .unwrap();
    let o = msc(&["plot", "inf", "--drift", "--out", "inf.png"], d);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no finite non-zero total energy"), "{err}");
    assert!(!err.contains("zero total energy throughout"), "{err}");
}

/// `--devices 1000` on one adapter: one line saying how many workers share it.
#[test]
fn many_workers_are_summed_up_per_device() {
    if !crate::common::gpu_available() {
        return;
    }
    let dir = fixture();
    let o = msc(
        &[
            "sweep",
            "small.toml",
            "--vary",
            "material.stiffness=5,10",
            "--backend",
            "gpu",
            "--no-batch",
            "--devices",
            "1000",
            "--out",
            "w",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let said = stdout(&o);
    let line = said
        .lines()
        .find(|l| l.contains("workers"))
        .unwrap_or_else(|| panic!("{said}"));
    assert_eq!(line, "2 workers: 2 on device 0", "{said}");
}
