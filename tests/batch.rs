//! `msc sweep`, `msc batch` and `msc plot` end to end: folders, runs.csv, resumption,
//! failures that do not stop a batch, PNG output, and one GPU device per batch.

mod common;

use common::{msc, read_json, stderr, tiny};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Output;

fn assert_no_panic(o: &Output) {
    let err = stderr(o);
    assert!(!err.contains("panicked"), "{err}");
}

/// Splits one CSV line, honouring double quotes (RFC 4180).
fn csv_split(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(String::new()),
            _ => out.last_mut().unwrap().push(c),
        }
    }
    out
}

/// runs.csv as one map (column -> value) per row, plus the header.
fn read_runs(out: &Path) -> (Vec<String>, Vec<HashMap<String, String>>) {
    let text = std::fs::read_to_string(out.join("runs.csv")).expect("runs.csv");
    let mut lines = text.lines();
    let header = csv_split(lines.next().unwrap());
    let rows = lines
        .map(|l| {
            let f = csv_split(l);
            assert_eq!(f.len(), header.len(), "{l}");
            header.iter().cloned().zip(f).collect()
        })
        .collect();
    (header, rows)
}

fn scene_value(run: &Path, table: &str, key: &str) -> toml::Value {
    let text = std::fs::read_to_string(run.join("scene.toml")).unwrap();
    let t: toml::Table = text.parse().unwrap();
    t[table][key].clone()
}

#[test]
fn a_sweep_of_four_variants_writes_four_folders_and_runs_csv() {
    let tmp = tempfile::tempdir().unwrap();
    let scene = tiny(tmp.path());
    let out = tmp.path().join("sweep");
    let o = msc(
        &[
            "sweep",
            scene.to_str().unwrap(),
            "--vary",
            "integrator.dt=0.01,0.02",
            "--vary",
            "material.stiffness=5,20",
            "--backend",
            "cpu",
            "--out",
            out.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let (header, rows) = read_runs(&out);
    assert_eq!(
        &header[..4],
        ["run", "status", "integrator.dt", "material.stiffness"]
    );
    assert_eq!(rows.len(), 4);
    let mut seen = vec![];
    for row in &rows {
        let (dt, k) = (&row["integrator.dt"], &row["material.stiffness"]);
        seen.push((dt.clone(), k.clone()));
        assert_eq!(row["status"], "ok", "{row:?}");
        assert_eq!(row["steps"], "20");
        assert_eq!(row["finite"], "true");
        assert_eq!(row["skipped"], "false");
        assert!(row["total"].parse::<f64>().unwrap().is_finite());
        let name = format!("integrator.dt={dt}__material.stiffness={k}");
        assert_eq!(row["run"], name);
        // The folder ran exactly the values its row and name say.
        let run = out.join(&name);
        let summary = read_json(&run.join("summary.json"));
        assert_eq!(summary["dt"].as_f64(), Some(dt.parse().unwrap()));
        assert_eq!(summary["steps"].as_u64(), Some(20));
        assert_eq!(
            scene_value(&run, "material", "stiffness")
                .as_float()
                .or_else(|| scene_value(&run, "material", "stiffness")
                    .as_integer()
                    .map(|i| i as f64)),
            Some(k.parse().unwrap())
        );
        assert!(run.join("energy.csv").is_file());
    }
    seen.sort();
    assert_eq!(
        seen,
        [("0.01", "20"), ("0.01", "5"), ("0.02", "20"), ("0.02", "5")]
            .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    // Different stiffnesses give different dynamics: the runs are not copies.
    let e = |name: &str| std::fs::read_to_string(out.join(name).join("energy.csv")).unwrap();
    assert_ne!(
        e("integrator.dt=0.01__material.stiffness=5"),
        e("integrator.dt=0.01__material.stiffness=20")
    );
}

fn stamp(path: &Path) -> (std::time::SystemTime, u64) {
    let m = std::fs::metadata(path).unwrap();
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let ino = 0;
    (m.modified().unwrap(), ino)
}

#[test]
fn an_interrupted_sweep_resumes_without_redoing_complete_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let scene = tiny(tmp.path());
    let out = tmp.path().join("sweep");
    let args = |steps: &'static str| {
        vec![
            "sweep".to_string(),
            scene.to_str().unwrap().to_string(),
            "--vary".into(),
            "integrator.dt=0.01,0.02,0.03".into(),
            "--backend".into(),
            "cpu".into(),
            "--steps".into(),
            steps.into(),
            "--quiet".into(),
            "--out".into(),
            out.to_str().unwrap().to_string(),
        ]
    };
    let run = |steps| {
        let a = args(steps);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        msc(&a, tmp.path())
    };
    let o = run("20");
    assert!(o.status.success(), "{}", stderr(&o));
    let names = [
        "integrator.dt=0.01",
        "integrator.dt=0.02",
        "integrator.dt=0.03",
    ];
    // Simulate a kill during the second run: its summary never got written, and a
    // half-written energy log is left as a temporary file.
    let killed = out.join(names[1]);
    std::fs::remove_file(killed.join("summary.json")).unwrap();
    std::fs::write(killed.join(".energy.csv.tmp-99999-0"), "step,time\n0,0").unwrap();
    let stamps = || -> Vec<_> {
        [names[0], names[2]]
            .iter()
            .flat_map(|n| {
                ["summary.json", "energy.csv", "scene.toml"].map(|f| stamp(&out.join(n).join(f)))
            })
            .collect()
    };
    let before = stamps();
    std::thread::sleep(std::time::Duration::from_millis(20));

    let o = run("20");
    assert!(o.status.success(), "{}", stderr(&o));
    let after = stamps();
    assert_eq!(before, after, "complete runs were rewritten");
    let (_, rows) = read_runs(&out);
    let skipped: Vec<&str> = rows.iter().map(|r| r["skipped"].as_str()).collect();
    assert_eq!(skipped, ["true", "false", "true"]);
    assert!(rows.iter().all(|r| r["status"] == "ok"));
    // The interrupted run was redone from scratch: complete, without the stale temp file.
    assert_eq!(read_json(&killed.join("summary.json"))["steps"], 20);
    assert!(!killed.join(".energy.csv.tmp-99999-0").exists());
    // A run whose resolved scene differs (here the step count) is not "complete".
    let o = run("10");
    assert!(o.status.success(), "{}", stderr(&o));
    let (_, rows) = read_runs(&out);
    assert!(rows
        .iter()
        .all(|r| r["skipped"] == "false" && r["steps"] == "10"));
}

const OCTAHEDRON: &str = "v 1 0 0\nv -1 0 0\nv 0 1 0\nv 0 -1 0\nv 0 0 1\nv 0 0 -1\n\
    f 1 3 5\nf 3 2 5\nf 2 4 5\nf 4 1 5\nf 3 1 6\nf 2 3 6\nf 4 2 6\nf 1 4 6\n";
const PYRAMID: &str = "v 1 0 0\nv 0 1 0\nv -1 0 0\nv 0 -1 0\nv 0 0 1.2\n\
    f 1 2 5\nf 2 3 5\nf 3 4 5\nf 4 1 5\nf 1 3 2\nf 1 4 3\n";

/// A charged OBJ mesh that writes PLY frames: 5 energy rows and 5 frames in 20 steps.
const POLY: &str = r#"
name = "poly"
[mesh]
kind = "obj"
path = "a.obj"
[material]
mass = 0.1
stiffness = 10.0
charge = 1e-6
[integrator]
method = "imex"
dt = 0.01
steps = 20
solver = { method = "jacobi", iterations = 20, omega = 0.5, tolerance = 1e-6 }
[output]
every = 5
frames = "ply"
"#;

/// A rerun trusts an earlier run only when its summary vouches for it: every input file
/// and every output unchanged. Each kind of damage redoes exactly the runs it touched.
#[test]
fn a_rerun_redoes_exactly_the_runs_whose_inputs_or_outputs_changed() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a.obj"), OCTAHEDRON).unwrap();
    std::fs::write(tmp.path().join("b.obj"), PYRAMID).unwrap();
    let scene = tmp.path().join("poly.toml");
    std::fs::write(&scene, POLY).unwrap();
    let out = tmp.path().join("sweep");
    let sweep = || {
        msc(
            &[
                "sweep",
                scene.to_str().unwrap(),
                "--vary",
                "mesh.path=a.obj,b.obj",
                "--vary",
                "material.stiffness=5,10,20,40,80,160",
                "--backend",
                "cpu",
                "--out",
                out.to_str().unwrap(),
            ],
            tmp.path(),
        )
    };
    let o = sweep();
    assert!(o.status.success(), "{}", stderr(&o));
    let run =
        |mesh: &str, k: u32| out.join(format!("mesh.path={mesh}.obj__material.stiffness={k}"));
    let frame = |mesh: &str, k: u32, i: u32| run(mesh, k).join(format!("frames/frame_{i:06}.ply"));
    assert!(frame("a", 5, 4).is_file());

    // (a) b.obj changed (a comment only: same geometry, same resolved scene, new bytes).
    let mut b = std::fs::OpenOptions::new()
        .append(true)
        .open(tmp.path().join("b.obj"))
        .unwrap();
    std::io::Write::write_all(&mut b, b"# edited\n").unwrap();
    drop(b);
    // (b) energy.csv emptied.
    std::fs::write(run("a", 5).join("energy.csv"), "").unwrap();
    // (c) frames/ deleted.
    std::fs::remove_dir_all(run("a", 10).join("frames")).unwrap();
    // (d) one frame truncated by a byte.
    let f = frame("a", 20, 2);
    let len = std::fs::metadata(&f).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .unwrap()
        .set_len(len - 1)
        .unwrap();
    // (e) a summary from before summaries recorded hashes.
    let path = run("a", 40).join("summary.json");
    let mut old = read_json(&path);
    for key in ["scene_sha256", "inputs", "outputs"] {
        old.as_object_mut().unwrap().remove(key).unwrap();
    }
    std::fs::write(&path, old.to_string()).unwrap();
    // (f) a summary saying a signal stopped the run.
    let path = run("a", 80).join("summary.json");
    let mut stopped = read_json(&path);
    stopped["interrupted"] = true.into();
    std::fs::write(&path, stopped.to_string()).unwrap();
    // a/160 is untouched.
    let untouched = [
        "summary.json",
        "energy.csv",
        "scene.toml",
        "frames/frame_000004.ply",
    ]
    .map(|f| run("a", 160).join(f));
    let before: Vec<_> = untouched.iter().map(|p| stamp(p)).collect();
    std::thread::sleep(std::time::Duration::from_millis(20));

    let o = sweep();
    assert!(o.status.success(), "{}", stderr(&o));
    let (_, rows) = read_runs(&out);
    let skipped: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["run"].as_str(), r["skipped"].as_str()))
        .collect();
    let expect: Vec<(String, &str)> = ["a", "b"]
        .iter()
        .flat_map(|m| {
            [5, 10, 20, 40, 80, 160].map(|k| {
                let trusted = *m == "a" && k == 160;
                (
                    format!("mesh.path={m}.obj__material.stiffness={k}"),
                    if trusted { "true" } else { "false" },
                )
            })
        })
        .collect();
    let expect: Vec<(&str, &str)> = expect.iter().map(|(n, s)| (n.as_str(), *s)).collect();
    assert_eq!(skipped, expect);
    assert!(rows.iter().all(|r| r["status"] == "ok"), "{rows:?}");
    let after: Vec<_> = untouched.iter().map(|p| stamp(p)).collect();
    assert_eq!(before, after, "the untouched run was rewritten");
    // Each redone run says why.
    let said = common::stdout(&o);
    for why in [
        "mesh.path=b.obj__material.stiffness=5: redone: ",
        "b.obj changed",
        "energy.csv is missing or changed",
        "frames/frame_000000.ply is missing or changed",
        "frames/frame_000002.ply is missing or changed",
        "summary.json is unreadable or from an older msc",
        "the earlier run was interrupted",
    ] {
        assert!(said.contains(why), "{why}: {said}");
    }
    // The redone runs are whole again, and a third invocation trusts every run.
    for (m, k) in [("a", 5), ("a", 10), ("a", 20), ("b", 5)] {
        let rows = std::fs::read_to_string(run(m, k).join("energy.csv")).unwrap();
        assert_eq!(rows.lines().count(), 6, "{m} {k}");
        assert!(frame(m, k, 4).is_file(), "{m} {k}");
    }
    let o = sweep();
    assert!(o.status.success(), "{}", stderr(&o));
    let (_, rows) = read_runs(&out);
    assert!(rows.iter().all(|r| r["skipped"] == "true"), "{rows:?}");
}

/// What summary.json vouches for: its recorded sizes and hashes are the files' own.
#[test]
fn the_summary_records_the_size_and_hash_of_every_output_and_input() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a.obj"), OCTAHEDRON).unwrap();
    let scene = tmp.path().join("poly.toml");
    std::fs::write(&scene, POLY).unwrap();
    let out = cpu_run(tmp.path(), &scene, "r", &[]);
    let s = read_json(&out.join("summary.json"));
    let sha = |bytes: &[u8]| msc::digest::sha256_hex(bytes);
    let listed: Vec<&str> = s["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        [
            "energy.csv",
            "scene.toml",
            "frames/frame_000000.ply",
            "frames/frame_000001.ply",
            "frames/frame_000002.ply",
            "frames/frame_000003.ply",
            "frames/frame_000004.ply",
        ]
    );
    for d in s["outputs"].as_array().unwrap() {
        let bytes = std::fs::read(out.join(d["path"].as_str().unwrap())).unwrap();
        assert_eq!(d["bytes"].as_u64(), Some(bytes.len() as u64), "{d}");
        assert_eq!(d["sha256"].as_str(), Some(sha(&bytes).as_str()), "{d}");
    }
    let scene_copy = std::fs::read(out.join("scene.toml")).unwrap();
    assert_eq!(s["scene_sha256"].as_str(), Some(sha(&scene_copy).as_str()));
    // The inputs: the scene file, then the OBJ mesh, by absolute path.
    let inputs = s["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 2, "{inputs:?}");
    for (d, file, text) in [
        (&inputs[0], "poly.toml", POLY),
        (&inputs[1], "a.obj", OCTAHEDRON),
    ] {
        let path = Path::new(d["path"].as_str().unwrap());
        assert!(path.is_absolute(), "{d}");
        assert!(path.ends_with(file), "{d}");
        assert_eq!(d["bytes"].as_u64(), Some(text.len() as u64), "{d}");
        assert_eq!(
            d["sha256"].as_str(),
            Some(sha(text.as_bytes()).as_str()),
            "{d}"
        );
    }
    assert_eq!(s["interrupted"], false);
    // A built-in scene reads no file.
    let out = tmp.path().join("builtin");
    let o = msc(
        &[
            "run",
            "torus",
            "--steps",
            "2",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let s = read_json(&out.join("summary.json"));
    assert_eq!(s["inputs"].as_array().map(Vec::len), Some(0), "{s}");
}

#[test]
fn a_corrupt_scene_in_a_batch_stops_it_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path());
    std::fs::write(tmp.path().join("broken.toml"), "[mesh\nkind = \"torus\"\n").unwrap();
    let manifest = tmp.path().join("manifest.toml");
    std::fs::write(
        &manifest,
        r#"
set = ["integrator.steps=10"]
[[runs]]
scene = "tiny.toml"
name = "first"
[[runs]]
scene = "broken.toml"
[[runs]]
scene = "tiny.toml"
set = ["integrator.dt=0.02"]
"#,
    )
    .unwrap();
    let out = tmp.path().join("batch");
    // Run from another folder: scene paths are relative to the manifest.
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let o = msc(
        &[
            "batch",
            manifest.to_str().unwrap(),
            "--backend",
            "cpu",
            "--out",
            out.to_str().unwrap(),
        ],
        &elsewhere,
    );
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    // The run, the file and the line.
    assert!(err.contains("run 'broken'"), "{err}");
    assert!(err.contains("broken.toml:1"), "{err}");
    // Not even the runs before it: the batch folder is never made.
    assert!(!out.exists());
}

/// A run that fails while it runs (here its folder cannot be written) is recorded, and
/// the batch goes on.
#[test]
fn a_run_that_fails_while_running_fails_alone() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path());
    let manifest = tmp.path().join("manifest.toml");
    std::fs::write(
        &manifest,
        r#"
set = ["integrator.steps=10"]
[[runs]]
scene = "tiny.toml"
name = "first"
[[runs]]
scene = "tiny.toml"
name = "blocked"
[[runs]]
scene = "tiny.toml"
set = ["integrator.dt=0.02"]
"#,
    )
    .unwrap();
    let out = tmp.path().join("batch");
    std::fs::create_dir(&out).unwrap();
    // A file where the run's folder should go.
    std::fs::write(out.join("blocked"), "not a folder").unwrap();
    let o = msc(
        &[
            "batch",
            manifest.to_str().unwrap(),
            "--backend",
            "cpu",
            "--out",
            out.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("blocked"), "{err}");
    let (header, rows) = read_runs(&out);
    assert_eq!(&header[..4], ["run", "status", "scene", "set"]);
    let status: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["run"].as_str(), r["status"].as_str()))
        .collect();
    assert_eq!(
        status,
        [
            ("first", "ok"),
            ("blocked", "failed"),
            ("tiny__integrator.dt=0.02", "ok")
        ]
    );
    assert!(rows[1]["reason"].contains("blocked"), "{:?}", rows[1]);
    assert_eq!(rows[1]["steps"], "");
    assert_eq!(rows[2]["set"], "integrator.dt=0.02");
    assert_eq!(rows[2]["dt"], "0.02");
    assert_eq!(rows[0]["steps"], "10");
    for name in ["first", "tiny__integrator.dt=0.02"] {
        assert!(out.join(name).join("summary.json").is_file());
    }
}

/// A key or value that any planned run would reject is a usage error: exit 2, naming the
/// run and the key, before any run starts or the batch folder is made.
#[test]
fn a_bad_vary_key_or_value_stops_the_sweep_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let scene = tiny(tmp.path());
    for (vary, run, key) in [
        (
            "integrator.dtt=0.01,0.02",
            "integrator.dtt=0.01",
            "integrator.dtt",
        ),
        ("integrator.dt=0.01,-1", "integrator.dt=-1", "integrator.dt"),
        (
            "integrator.method=imex,leapfrog",
            "integrator.method=leapfrog",
            "integrator.method",
        ),
    ] {
        let out = tmp.path().join("sweep");
        let o = msc(
            &[
                "sweep",
                scene.to_str().unwrap(),
                "--vary",
                vary,
                "--backend",
                "cpu",
                "--quiet",
                "--out",
                out.to_str().unwrap(),
            ],
            tmp.path(),
        );
        assert_no_panic(&o);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{vary}: {err}");
        assert!(err.contains(&format!("run '{run}'")), "{vary}: {err}");
        assert!(err.contains(key), "{vary}: {err}");
        assert!(!out.exists(), "{vary}: the batch folder was made");
    }
    // A malformed --vary is a usage error too.
    let o = msc(
        &[
            "sweep",
            scene.to_str().unwrap(),
            "--vary",
            "integrator.dt",
            "--out",
            tmp.path().join("none").to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!tmp.path().join("none").exists());
}

/// The same for a manifest: an unknown key in a run's `set` (after a good run, which must
/// not run either), the manifest's `set` or the command line's `--set`.
#[test]
fn a_bad_key_in_a_manifest_stops_the_batch_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path());
    let cases = [
        (
            "[[runs]]\nscene = \"tiny.toml\"\nname = \"good\"\n\
             [[runs]]\nscene = \"tiny.toml\"\nname = \"typo\"\nset = [\"material.stifness=5\"]\n",
            vec![],
            "run 'typo'",
            "material.stifness",
        ),
        (
            "set = [\"output.evry=5\"]\n[[runs]]\nscene = \"tiny.toml\"\nname = \"a\"\n",
            vec![],
            "run 'a'",
            "output.evry",
        ),
        (
            "[[runs]]\nscene = \"tiny.toml\"\nname = \"a\"\n",
            vec!["--set", "coulomb.methd=none"],
            "run 'a'",
            "coulomb.methd",
        ),
    ];
    for (i, (text, extra, run, key)) in cases.into_iter().enumerate() {
        let manifest = tmp.path().join(format!("m{i}.toml"));
        std::fs::write(&manifest, text).unwrap();
        let out = tmp.path().join("batch");
        let mut args = vec![
            "batch",
            manifest.to_str().unwrap(),
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(extra);
        let o = msc(&args, tmp.path());
        assert_no_panic(&o);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{text}: {err}");
        assert!(err.contains(run), "{text}: {err}");
        assert!(err.contains(key), "{text}: {err}");
        assert!(!out.exists(), "{text}: the batch folder was made");
    }
}

#[test]
fn a_diverging_variant_is_recorded_as_diverged() {
    let tmp = tempfile::tempdir().unwrap();
    let scene = tiny(tmp.path());
    let out = tmp.path().join("sweep");
    // k = 1e4 N/m on 0.1 kg at h = 0.1 s: h omega ~ 60, far beyond explicit Verlet's
    // stability limit of 2; the implicit springs of IMEX stay bounded.
    let o = msc(
        &[
            "sweep",
            scene.to_str().unwrap(),
            "--vary",
            "integrator.method=imex,verlet",
            "--set",
            "material.stiffness=1e4",
            "--set",
            "integrator.dt=0.1",
            "--steps",
            "400",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("diverged"), "{}", stderr(&o));
    let (_, rows) = read_runs(&out);
    assert_eq!(rows[0]["integrator.method"], "imex");
    assert_eq!(rows[0]["status"], "ok");
    assert_eq!(rows[1]["integrator.method"], "verlet");
    assert_eq!(rows[1]["status"], "diverged");
    assert_eq!(rows[1]["finite"], "false");
    let steps: u64 = rows[1]["steps"].parse().unwrap();
    assert!(steps < 400, "stopped early: {steps}");
    let summary = read_json(&out.join("integrator.method=verlet/summary.json"));
    assert_eq!(summary["finite"], false);
}

/// Decodes a PNG: (width, height, RGB(A) pixels as [r, g, b]).
fn decode_png(path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().expect("a PNG of sane size")];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    let px = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    (info.width, info.height, px)
}

/// Pixels of exactly this colour (the plot palette's line colours).
fn count(px: &[[u8; 3]], rgb: [u8; 3]) -> usize {
    px.iter().filter(|p| **p == rgb).count()
}

const BLUE: [u8; 3] = [31, 119, 180];
const ORANGE: [u8; 3] = [255, 127, 14];
const GREEN: [u8; 3] = [44, 160, 44];

fn cpu_run(tmp: &Path, scene: &Path, name: &str, set: &[&str]) -> PathBuf {
    let out = tmp.join(name);
    let mut args = vec![
        "run",
        scene.to_str().unwrap(),
        "--backend",
        "cpu",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    for s in set {
        args.extend(["--set", s]);
    }
    let o = msc(&args, tmp);
    assert!(o.status.success(), "{}", stderr(&o));
    out
}

#[test]
fn plot_writes_a_png_of_the_energy_terms() {
    let tmp = tempfile::tempdir().unwrap();
    let scene = tiny(tmp.path());
    let run = cpu_run(tmp.path(), &scene, "r", &["integrator.steps=60"]);
    let o = msc(&["plot", run.to_str().unwrap()], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let png = run.join("energy.png");
    let (w, h, px) = decode_png(&png);
    assert_eq!((w, h), (1024, 640));
    let white = count(&px, [255, 255, 255]);
    // Mostly white background, but axes, text and curves drawn.
    assert!(white > px.len() / 2, "{white} of {}", px.len());
    let dark = px.iter().filter(|p| p.iter().all(|&c| c < 100)).count();
    assert!(dark > 1000, "axes and text: {dark} dark pixels");
    // The torus has kinetic, elastic, Coulomb and total energy: four curves.
    for c in [BLUE, ORANGE, GREEN] {
        assert!(count(&px, c) > 200, "curve colour {c:?}: {}", count(&px, c));
    }
    // A missing run is an input error naming it.
    let o = msc(&["plot", "nope", "--out", "x.png"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("nope"), "{}", stderr(&o));
}

#[test]
fn plot_overlays_runs_against_a_reference() {
    let tmp = tempfile::tempdir().unwrap();
    let scene = tiny(tmp.path());
    // A fine reference and two coarser runs over the same 0.6 s.
    let reference = cpu_run(
        tmp.path(),
        &scene,
        "ref",
        &[
            "integrator.method=verlet",
            "integrator.dt=0.002",
            "integrator.steps=300",
            "output.every=1",
        ],
    );
    let a = cpu_run(
        tmp.path(),
        &scene,
        "a",
        &[
            "integrator.dt=0.01",
            "integrator.steps=60",
            "output.every=1",
        ],
    );
    let b = cpu_run(
        tmp.path(),
        &scene,
        "b",
        &[
            "integrator.dt=0.03",
            "integrator.steps=20",
            "output.every=1",
        ],
    );
    let png = tmp.path().join("err.png");
    let o = msc(
        &[
            "plot",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--relative-error",
            "--reference",
            reference.to_str().unwrap(),
            "--size",
            "800x500",
            "--out",
            png.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let (w, h, px) = decode_png(&png);
    assert_eq!((w, h), (800, 500));
    // One curve per run, in the palette's first two colours.
    assert!(count(&px, BLUE) > 100 && count(&px, ORANGE) > 100);
    assert_eq!(count(&px, GREEN), 0, "only two curves");

    // The library reports what it drew: the coarse run's points are its own times
    // (the reference is interpolated there), t = 0 excluded on the log axis (error 0).
    let done = msc::plot::plot(&msc::plot::PlotRequest {
        runs: vec![a.clone(), b.clone()],
        labels: vec!["h = 0.01".into(), "h = 0.03".into()],
        mode: msc::plot::Mode::RelativeError {
            reference: reference.clone(),
        },
        term: msc::plot::Term::Total,
        title: None,
        size: (640, 400),
        out: tmp.path().join("lib.png"),
    })
    .unwrap();
    assert_eq!(done.curves.len(), 2);
    assert_eq!(done.curves[0].0, "h = 0.01");
    assert!(
        done.curves[1].1 <= 20 && done.curves[1].1 >= 15,
        "{:?}",
        done.curves
    );

    // Drift and the error against the time step also draw.
    for extra in [
        vec!["--drift"],
        vec![
            "--relative-error",
            "--reference",
            reference.to_str().unwrap(),
            "--by-dt",
        ],
    ] {
        let out = tmp.path().join("more.png");
        let mut args = vec!["plot", a.to_str().unwrap(), b.to_str().unwrap()];
        args.extend(extra);
        args.extend(["--out", out.to_str().unwrap()]);
        let o = msc(&args, tmp.path());
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let (_, _, px) = decode_png(&out);
        assert!(count(&px, BLUE) > 20, "{args:?}");
    }
    // Several runs need --out.
    let o = msc(
        &["plot", a.to_str().unwrap(), b.to_str().unwrap()],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn a_gpu_sweep_opens_one_device_for_all_runs() {
    if msc::gpu::list_adapters().is_empty() {
        assert!(
            std::env::var("MSC_REQUIRE_GPU").as_deref() != Ok("1"),
            "MSC_REQUIRE_GPU=1 but wgpu found no adapter"
        );
        eprintln!("skipping: no GPU adapter (set MSC_REQUIRE_GPU=1 to make this fail)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let scene = tiny(tmp.path());
    let varies = [msc::batch::Vary::parse("integrator.dt=0.01,0.02,0.03").unwrap()];
    let plan = msc::batch::plan::sweep(scene.to_str().unwrap(), &[], &varies).unwrap();
    let report = msc::batch::run_batch(
        &plan,
        &msc::batch::BatchOptions {
            out: tmp.path().join("gpu"),
            backend: msc::cli::BackendArg::Gpu,
            steps: Some(10),
            quiet: true,
            shard: None,
            devices: msc::batch::Devices::One,
            no_batch: false,
        },
    )
    .unwrap();
    assert_eq!(report.devices_opened, 1);
    assert_eq!(report.records.len(), 3);
    let backends: Vec<String> = report
        .records
        .iter()
        .map(|r| {
            assert_eq!(r.status, msc::batch::RunStatus::Ok, "{r:?}");
            r.summary.as_ref().unwrap().backend.clone()
        })
        .collect();
    assert_ne!(backends[0], "cpu");
    assert!(backends.iter().all(|b| *b == backends[0]), "{backends:?}");
    // Every run still wrote its own outputs, on the GPU.
    for r in &report.records {
        let s = read_json(&tmp.path().join("gpu").join(&r.name).join("summary.json"));
        assert_eq!(s["steps"], 10);
        assert!(s["adapter"]["name"].is_string());
    }
}

#[test]
fn the_figure_4_scenes_differ_from_the_torus_only_in_their_step() {
    let torus = msc::scene::load("torus", &[]).unwrap();
    // (name, h, steps over 15 s, integrator)
    for (name, dt, steps, integrator) in [
        ("torus_dt003", 0.03, 500, "imex"),
        ("torus_dt015", 0.15, 100, "imex"),
        ("torus_reference", 0.0015, 10000, "verlet"),
    ] {
        let s = msc::scene::load(name, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((s.config.dt, s.config.steps), (dt, steps), "{name}");
        assert_eq!(s.config.integrator.name(), integrator, "{name}");
        // The same torus: 145 vertices, q = 6 uC, k = 10 N/m, released from rest.
        assert_eq!(s.system.positions(), torus.system.positions(), "{name}");
        assert_eq!(s.system.charges(), torus.system.charges(), "{name}");
        assert_eq!(s.system.springs(), torus.system.springs(), "{name}");
        assert_eq!(s.config.coulomb, torus.config.coulomb, "{name}");
    }
    assert_eq!(torus.system.len(), 145);
    assert_eq!(torus.config.dt, 0.015);
}
