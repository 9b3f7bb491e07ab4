//! Hostile strings at the batch layer (`msc sweep`, `msc batch`, `--slurm`, `msc merge`):
//! each one reaches the program unchanged or is refused naming it. Run names never share a
//! folder (also where case and trailing dots do not count), stay within the name limit the
//! plan's readers check, and the job script hands every value to the program as given;
//! `msc merge` names each run it could not take and why.

mod common;

use common::{msc, read_json, stderr, tiny};
use msc::batch::plan;
use msc::batch::slurm::SlurmJob;
use msc::batch::{PlanFile, Rerun, Vary};
use std::path::Path;

/// The longest run name, as the guide gives it.
const MAX_NAME: usize = 120;

/// How macOS and Windows compare folder names: case and trailing dots do not count.
fn folder_key(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Names Windows takes for devices, in any case and with any extension (`nul.txt`).
fn windows_device(name: &str) -> bool {
    let base = name.split('.').next().unwrap().to_ascii_uppercase();
    let numbered = (1..=9).flat_map(|d| [format!("COM{d}"), format!("LPT{d}")]);
    ["CON", "PRN", "AUX", "NUL"]
        .map(String::from)
        .into_iter()
        .chain(numbered)
        .any(|d| d == base)
}

fn sweep_args<'a>(vary: &'a str, out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "sweep",
        "tiny.toml",
        "--vary",
        vary,
        "--out",
        out,
        "--backend",
        "cpu",
        "--steps",
        "2",
        "--quiet",
    ];
    a.extend_from_slice(extra);
    a
}

/// Values of the free-text key `name` that give one name, one folder on a
/// case-insensitive file system, or names at the length limit.
fn colliding_values() -> String {
    let long = "a".repeat(MAX_NAME - "name=".len() - 2);
    format!("\"{long} b\",\"{long}_b\",\"Big\",\"big\",\"x.\",\"x\"")
}

#[test]
fn names_that_share_a_folder_get_distinct_folders_within_the_limit() {
    let vary = Vary::parse(&format!("name={}", colliding_values())).unwrap();
    let plan = plan::sweep("builtin:torus", &[], &[vary]).unwrap();
    let names: Vec<&str> = plan.runs.iter().map(|r| r.name.as_str()).collect();
    for n in &names {
        assert!(n.len() <= MAX_NAME, "{} characters: {n}", n.len());
    }
    let keys: std::collections::HashSet<String> = names.iter().map(|n| folder_key(n)).collect();
    assert_eq!(
        keys.len(),
        names.len(),
        "two runs share a folder: {names:?}"
    );
    // The plan every shard writes is one its readers (the other shards, merge) accept.
    let dir = tempfile::tempdir().unwrap();
    let rerun = Rerun {
        cwd: dir.path().into(),
        program: "msc".into(),
        args: vec!["sweep".into()],
    };
    let file = PlanFile::new("sweep", &plan, 2, "cpu", None, rerun);
    file.write_or_check(dir.path()).unwrap();
    let back = PlanFile::read(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back.plan(), plan);
}

/// End to end: the second shard and merge read the plan the first shard wrote.
#[test]
fn a_sharded_sweep_of_colliding_long_names_merges() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tiny(d);
    let vary = format!("name={}", colliding_values());
    for shard in ["0/2", "1/2"] {
        let o = msc(&sweep_args(&vary, "o", &["--shard", shard]), d);
        assert_eq!(o.status.code(), Some(0), "shard {shard}: {}", stderr(&o));
    }
    let o = msc(&["merge", "o"], d);
    assert_eq!(o.status.code(), Some(0), "merge: {}", stderr(&o));
    let runs = std::fs::read_dir(d.join("o"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().join("summary.json").is_file())
        .count();
    assert_eq!(runs, 6, "one folder per run");
}

fn manifest(dir: &Path, names: &[&str]) -> std::process::Output {
    let mut text = String::new();
    for n in names {
        text.push_str(&format!(
            "[[runs]]\nscene = \"tiny.toml\"\nname = \"{n}\"\n"
        ));
    }
    std::fs::write(dir.join("m.toml"), text).unwrap();
    msc(
        &[
            "batch",
            "m.toml",
            "--out",
            "o",
            "--backend",
            "cpu",
            "--steps",
            "2",
            "--quiet",
        ],
        dir,
    )
}

#[test]
fn manifest_names_of_one_folder_or_of_the_batchs_own_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tiny(d);
    for (names, said) in [
        (&["Run", "run"][..], "runs[0] and runs[1]"),
        (&["a", "b", "a."][..], "runs[0] and runs[2]"),
        (&["RUNS.CSV"][..], "own files"),
        (&["Slurm-Logs"][..], "own files"),
        (&["Plan.JSON"][..], "own files"),
        (&["runs.Shard-0-of-2.csv"][..], "own files"),
    ] {
        let o = manifest(d, names);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{names:?}: {err}");
        assert!(err.contains(said), "{names:?}: {err}");
        assert!(
            !d.join("o").exists(),
            "{names:?}: the batch folder was created"
        );
    }
    // Names that differ otherwise run, each into its own folder.
    let o = manifest(d, &["a", "a.b", "A-2"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// Batch folders are copied to Windows: a run folder named like a device (`CON`,
/// `nul.txt`) could not be created there. Given names are refused naming the run; names
/// made from a scene or a sweep's values become other folders.
#[test]
fn windows_device_names_are_refused_or_suffixed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tiny(d);
    for name in ["CON", "nul.txt", "Aux", "com1", "LPT9.tar.gz", "prn."] {
        let o = manifest(d, &["a", name]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(&format!("runs[1].name: '{name}'")) && err.contains("Windows"),
            "{name}: {err}"
        );
        assert!(
            !d.join("o").exists(),
            "{name}: the batch folder was created"
        );
    }
    // Names that only resemble one run.
    let o = manifest(d, &["console", "nul_", "com10", "x.nul", "lpt"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // A name made from the scene's file name.
    for scene in ["nul.toml", "Com3.toml"] {
        std::fs::copy(d.join("tiny.toml"), d.join(scene)).unwrap();
    }
    let text = "[[runs]]\nscene = \"nul.toml\"\n[[runs]]\nscene = \"Com3.toml\"\n";
    std::fs::write(d.join("m.toml"), text).unwrap();
    let args = [
        "batch",
        "m.toml",
        "--out",
        "s",
        "--backend",
        "cpu",
        "--steps",
        "2",
    ];
    let o = msc(&args, d);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let folders: Vec<String> = std::fs::read_dir(d.join("s"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    assert_eq!(folders.len(), 2, "{folders:?}");
    for f in &folders {
        assert!(!windows_device(f), "{f}");
    }
    // A sweep over a key whose first part is a device name (its names all start with the
    // key): distinct folders, none a device, that the plan's readers accept.
    let vary = Vary::parse("aux.x=1,2").unwrap();
    let plan = plan::sweep("builtin:torus", &[], &[vary]).unwrap();
    let names: Vec<&str> = plan.runs.iter().map(|r| r.name.as_str()).collect();
    let keys: std::collections::HashSet<String> = names.iter().map(|n| folder_key(n)).collect();
    assert_eq!(keys.len(), names.len(), "{names:?}");
    for n in &names {
        assert!(!windows_device(n), "{n}");
    }
    let rerun = Rerun {
        cwd: d.into(),
        program: "msc".into(),
        args: vec!["sweep".into()],
    };
    let file = PlanFile::new("sweep", &plan, 2, "cpu", None, rerun);
    let p = d.join("p");
    std::fs::create_dir(&p).unwrap();
    file.write_or_check(&p).unwrap();
    let back = PlanFile::read(&p).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back.plan(), plan);
}

/// A sharded sweep's plan.json edited by hand: each edit is refused naming what is wrong,
/// before merge reads or writes any run's folder.
#[test]
fn hand_edited_plan_files_are_refused_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tiny(d);
    let o = msc(
        &sweep_args("material.stiffness=5,10,20", "p", &["--shard", "0/3"]),
        d,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let path = d.join("p/plan.json");
    let original = read_json(&path);
    type Edit = fn(&mut serde_json::Value);
    let cases: [(Edit, &str); 10] = [
        (
            |v| {
                v["runs"][0]["name"] = "Case".into();
                v["runs"][1]["name"] = "case".into();
            },
            "'Case' and 'case' name one folder",
        ),
        (
            |v| {
                v["runs"][0]["name"] = "x".into();
                v["runs"][2]["name"] = "x...".into();
            },
            "'x' and 'x...'",
        ),
        (|v| v["runs"][1]["name"] = "..".into(), "run name"),
        (|v| v["runs"][1]["name"] = "/tmp/x".into(), "run name"),
        (|v| v["runs"][1]["name"] = "".into(), "run name"),
        (|v| v["runs"][1]["name"] = "RUNS.csv".into(), "own files"),
        (|v| v["runs"][1]["name"] = "Nul.csv".into(), "device name"),
        (
            |v| {
                v.as_object_mut().unwrap().remove("rerun");
            },
            "missing field `rerun`",
        ),
        (
            |v| {
                v["runs"][2].as_object_mut().unwrap().remove("set");
            },
            "missing field `set`",
        ),
        (
            |v| v["shards"] = 4.into(),
            "shard count 4 is not from 1 to its 3 runs",
        ),
    ];
    for (edit, said) in cases {
        let mut v = original.clone();
        edit(&mut v);
        std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
        let o = msc(&["merge", "p"], d);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{said}: {err}");
        assert!(err.contains(said), "{said}: {err}");
        assert!(
            !d.join("p/runs.csv").exists(),
            "{said}: merge wrote a table"
        );
    }
}

/// Runs left half-written (no summary, or an output cut short after its summary) and a
/// run never started: merge names each with why, lists none as done, and exits 1.
#[test]
fn merge_names_each_incomplete_run_and_merges_none_of_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tiny(d);
    let o = msc(
        &sweep_args("material.stiffness=5,10,20,40", "h", &["--shard", "0/1"]),
        d,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let run = |v: &str| d.join(format!("h/material.stiffness={v}"));
    // Interrupted before its summary.
    std::fs::remove_file(run("10").join("summary.json")).unwrap();
    // Its log cut short after the summary was written.
    let energy = run("20").join("energy.csv");
    let text = std::fs::read(&energy).unwrap();
    std::fs::write(&energy, &text[..text.len() / 2]).unwrap();
    // Never started.
    std::fs::remove_dir_all(run("40")).unwrap();
    let o = msc(&["merge", "h"], d);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    for (name, why) in [
        ("material.stiffness=10", "incomplete: no summary.json"),
        ("material.stiffness=20", "incomplete:"),
        ("material.stiffness=40", "not run"),
    ] {
        let line = err
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{name}:")))
            .unwrap_or_else(|| panic!("{name} is not named: {err}"));
        assert!(line.contains(why), "{name}: {line}");
    }
    assert!(
        !err.lines()
            .any(|l| l.trim_start().starts_with("material.stiffness=5:")),
        "the complete run is named: {err}"
    );
    let table = std::fs::read_to_string(d.join("h/runs.csv")).unwrap();
    let rows: Vec<Vec<String>> = table
        .lines()
        .map(msc::batch::record::parse_csv_line)
        .collect();
    let col = |n: &str| rows[0].iter().position(|h| h == n).unwrap();
    for row in &rows[1..] {
        let done = row[0] == "material.stiffness=5";
        assert_eq!(
            row[col("status")],
            if done { "ok" } else { "missing" },
            "{row:?}"
        );
        // No value of a run that is not complete.
        assert_eq!(row[col("steps")].is_empty(), !done, "{row:?}");
        assert_eq!(row[col("total")].is_empty(), !done, "{row:?}");
    }
}

/// A scene path with a newline: refused in words, not as an option `--the scene`.
#[test]
fn a_positional_value_is_named_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::copy(tiny(d), d.join("t\nx.toml")).unwrap();
    let mut args = sweep_args("material.stiffness=5,10", "o", &["--slurm"]);
    args[1] = "t\nx.toml";
    let o = msc(&args, d);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error: the scene: "), "{err}");
}

#[cfg(unix)]
#[test]
fn a_manifest_path_that_is_not_utf8_is_refused_for_a_job_script() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tiny(d);
    let folder = d.join(std::ffi::OsStr::from_bytes(b"m\xff"));
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(
        folder.join("m.toml"),
        "[[runs]]\nscene = \"../tiny.toml\"\nname = \"a\"\n",
    )
    .unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_msc"))
        .arg("batch")
        .arg(folder.join("m.toml"))
        .args([
            "--out",
            "o",
            "--backend",
            "cpu",
            "--slurm",
            "--gres",
            "none",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the manifest") && err.contains("not UTF-8"),
        "{err}"
    );
    assert!(!err.contains("--the"), "{err}");
    assert!(!d.join("o").exists(), "the batch folder was created");
}

/// A shard writes plan.json, whose rerun commands `msc merge` prints: a path it holds as
/// text (the manifest, `--out`, the working folder) that is not UTF-8 would be stored with
/// its bytes replaced and name another file, so it is refused before anything is created.
#[cfg(unix)]
#[test]
fn a_path_that_is_not_utf8_is_refused_for_a_shards_plan() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tiny(d);
    let folder = d.join(OsStr::from_bytes(b"m\xff"));
    std::fs::create_dir(&folder).unwrap();
    tiny(&folder);
    std::fs::write(
        folder.join("m.toml"),
        "[[runs]]\nscene = \"tiny.toml\"\nname = \"a\"\n",
    )
    .unwrap();
    let manifest = folder.join("m.toml");
    let o_ff = OsStr::from_bytes(b"o\xff");
    fn sweep(out: &OsStr) -> Vec<&OsStr> {
        vec![
            "sweep".as_ref(),
            "tiny.toml".as_ref(),
            "--vary".as_ref(),
            "material.stiffness=5".as_ref(),
            "--out".as_ref(),
            out,
        ]
    }
    let batch: Vec<&OsStr> = vec![
        "batch".as_ref(),
        manifest.as_os_str(),
        "--out".as_ref(),
        "o".as_ref(),
    ];
    for (args, cwd, what, out) in [
        (batch, d, "the manifest", d.join("o")),
        (sweep(o_ff), d, "--out", d.join(o_ff)),
        (
            sweep("o".as_ref()),
            &*folder,
            "the working folder",
            folder.join("o"),
        ),
    ] {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_msc"))
            .args(args)
            .args([
                "--backend",
                "cpu",
                "--steps",
                "2",
                "--quiet",
                "--shard",
                "0/1",
            ])
            .current_dir(cwd)
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{what}: {err}");
        assert!(
            err.contains(what) && err.contains("not UTF-8"),
            "{what}: {err}"
        );
        assert!(!out.exists(), "{what}: the batch folder was created");
    }
}

/// Every awkward but printable character a value may hold: shell syntax, both quotes, a
/// backslash, `%`, `#`, leading dashes, non-ASCII text and a long value.
fn hostile() -> Vec<String> {
    let mut v: Vec<String> = [
        "$(touch PWNED)",
        "`touch PWNED`",
        "it's",
        "say \"hi\"",
        "back\\slash\\",
        "a b  c",
        "100%",
        "#not a comment",
        "-x",
        "--out",
        "*",
        "~",
        "; touch PWNED",
        "é ü ß 漢字 \u{2028} \u{a0}",
        "${HOME}",
        "!!",
        "",
    ]
    .map(String::from)
    .to_vec();
    v.push("long".repeat(2000));
    v
}

#[cfg(unix)]
fn executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The script's body (run with bash, as an array task) hands the program its folder and
/// every argument byte for byte, and runs nothing else; `bash -n` accepts it.
#[cfg(unix)]
#[test]
fn the_job_script_hands_every_value_over_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().canonicalize().unwrap();
    let awkward = "a b'c\"d$e`f\\g%h#i-é";
    let cwd = d.join(awkward).join("-cwd");
    let bin = d.join(format!("bin {awkward}"));
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    let program = bin.join("msc stub");
    // The stub records where it ran and its arguments, NUL-separated.
    executable(
        &program,
        "#!/bin/sh\nprintf '%s\\0' \"$PWD\" \"$@\" > \"$STUB_OUT\"\n",
    );
    let args = hostile();
    let job = SlurmJob {
        shards: 3,
        gres: None,
        time: None,
        partition: None,
        job_name: "j".into(),
        command: Rerun {
            cwd: cwd.clone(),
            program: program.clone(),
            args: args.clone(),
        },
    };
    let out = d.join("out");
    let script = job.write(&out).unwrap_or_else(|e| panic!("{e}"));
    let text = std::fs::read_to_string(&script).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "bash -n: {}\n{text}",
        stderr(&check)
    );
    let recorded = d.join("recorded");
    let ran = std::process::Command::new("bash")
        .arg(&script)
        .env("SLURM_ARRAY_TASK_ID", "1")
        .env("STUB_OUT", &recorded)
        .current_dir("/")
        .output()
        .unwrap();
    assert!(ran.status.success(), "{}\n{text}", stderr(&ran));
    let bytes = std::fs::read(&recorded).unwrap();
    let got: Vec<String> = bytes
        .strip_suffix(b"\0")
        .unwrap()
        .split(|&b| b == 0)
        .map(|w| String::from_utf8(w.to_vec()).unwrap())
        .collect();
    assert_eq!(Path::new(&got[0]), cwd, "the folder it ran in");
    assert_eq!(got[1..], args[..], "the arguments");
    for p in [
        d.join("PWNED"),
        cwd.join("PWNED"),
        Path::new("/PWNED").into(),
    ] {
        assert!(!p.exists(), "a command ran: {}", p.display());
    }
}

/// sbatch's own reading of the `#SBATCH` lines (`sbatch -v` prints the options it parsed
/// before it looks for a controller): the job name and log paths come back as given.
/// Skipped where sbatch is not installed.
#[cfg(unix)]
#[test]
fn sbatch_reads_the_directives_back_as_given() {
    let have = std::process::Command::new("sh")
        .args(["-c", "command -v sbatch"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        eprintln!("skipping: sbatch is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().canonicalize().unwrap();
    // No controller listens on this port: sbatch parses, prints, then fails to submit.
    let conf = d.join("slurm.conf");
    std::fs::write(
        &conf,
        "ClusterName=t\nSlurmctldHost=localhost\nSlurmctldPort=1\nAuthType=auth/none\n\
         NodeName=localhost CPUs=1\nPartitionName=p Nodes=localhost Default=YES\n",
    )
    .unwrap();
    let out = d.join("o 'q' \"d\" $x #1 100% -é");
    let job_name = "my \"job\" 'x' \\ $(y) #2 -z é";
    let job = SlurmJob {
        shards: 2,
        gres: Some("gpu:1".into()),
        time: Some("1-02:03:04".into()),
        partition: Some("p-1.a,b_2".into()),
        job_name: job_name.into(),
        command: Rerun {
            cwd: d.clone(),
            program: "/bin/true".into(),
            args: vec!["sweep".into()],
        },
    };
    let script = job.write(&out).unwrap_or_else(|e| panic!("{e}"));
    let o = std::process::Command::new("timeout")
        .args(["30", "sbatch", "-v"])
        .arg(&script)
        .env("SLURM_CONF", &conf)
        .output()
        .unwrap();
    let said = stderr(&o);
    let option = |name: &str| -> String {
        let prefix = format!("sbatch: {name}");
        let line = said
            .lines()
            .find(|l| l.starts_with(&prefix) && l[prefix.len()..].trim_start().starts_with(':'))
            .unwrap_or_else(|| panic!("sbatch printed no {name}: {said}"));
        line.split_once(": ")
            .unwrap()
            .1
            .split_once(": ")
            .unwrap()
            .1
            .to_string()
    };
    assert_eq!(option("job-name"), job_name, "{said}");
    assert_eq!(option("partition"), "p-1.a,b_2", "{said}");
    // Slurm reads `%%` as one `%` when it names the file.
    let logs = out.join("slurm-logs").to_str().unwrap().replace('%', "%%");
    assert_eq!(option("output"), format!("{logs}/%A_%a.out"), "{said}");
    assert_eq!(option("error"), format!("{logs}/%A_%a.err"), "{said}");
}
