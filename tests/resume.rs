//! Every branch of the resume verdict (`msc sweep` / `msc batch` / `msc merge` trusting an
//! earlier run folder): one test per reason a rerun must redo a run, each damaging a
//! complete run in exactly one way and checking that the rerun redoes it and says why,
//! plus the runs it must trust. Damage that keeps a file's size (one character changed)
//! is caught only by the hashes, damage to the summary's own records only by the checks
//! that compare them with the files and the scene.

mod common;

use common::{msc, read_json, stderr};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A charged OBJ mesh (an input file besides the scene) writing 5 PLY frames in 20 steps.
const OCTAHEDRON: &str = "# mesh a\nv 1 0 0\nv -1 0 0\nv 0 1 0\nv 0 -1 0\nv 0 0 1\nv 0 0 -1\n\
    f 1 3 5\nf 3 2 5\nf 2 4 5\nf 4 1 5\nf 3 1 6\nf 2 3 6\nf 4 2 6\nf 1 4 6\n";
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

/// A sweep of one run in a folder of its own, run once by [`Sweep::new`].
struct Sweep {
    tmp: tempfile::TempDir,
    sets: Vec<String>,
}

/// What a rerun decided for the run: trusted (not redone), and what it said.
struct Verdict {
    trusted: bool,
    said: String,
}

impl Sweep {
    /// Writes the scene and its mesh, and runs the sweep on `backend`.
    fn new(backend: &str) -> Self {
        Self::with(backend, &[])
    }

    /// [`Sweep::new`] with `--set` overrides.
    fn with(backend: &str, sets: &[&str]) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.obj"), OCTAHEDRON).unwrap();
        std::fs::write(tmp.path().join("poly.toml"), POLY).unwrap();
        let s = Self {
            tmp,
            sets: sets.iter().map(|s| s.to_string()).collect(),
        };
        let v = s.rerun(backend);
        assert!(!v.trusted, "the first sweep found an earlier run");
        s
    }

    fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// The run's folder.
    fn run(&self) -> PathBuf {
        self.path("out/material.stiffness=10")
    }

    /// Runs the sweep again on `backend` and reads its verdict from `runs.csv`.
    fn rerun(&self, backend: &str) -> Verdict {
        let scene = self.path("poly.toml");
        let out = self.path("out");
        let mut args = vec![
            "sweep",
            scene.to_str().unwrap(),
            "--vary",
            "material.stiffness=10",
            "--backend",
            backend,
            "--out",
            out.to_str().unwrap(),
        ];
        for s in &self.sets {
            args.extend(["--set", s.as_str()]);
        }
        let o = msc(&args, self.tmp.path());
        assert!(
            matches!(o.status.code(), Some(0) | Some(1)),
            "{}",
            stderr(&o)
        );
        let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
        let mut lines = csv.lines().map(msc::batch::record::parse_csv_line);
        let header = lines.next().unwrap();
        let row = lines.next().expect("one run");
        let col = |name: &str| &row[header.iter().position(|h| h == name).unwrap()];
        assert!(
            ["ok", "diverged"].contains(&col("status").as_str()),
            "{row:?}"
        );
        Verdict {
            trusted: col("skipped") == "true",
            said: common::stdout(&o),
        }
    }

    /// Rewrites the run's `summary.json` through `edit`.
    fn edit_summary(&self, edit: impl FnOnce(&mut Value)) {
        let path = self.run().join("summary.json");
        let mut s = read_json(&path);
        edit(&mut s);
        std::fs::write(&path, serde_json::to_string_pretty(&s).unwrap()).unwrap();
    }

    /// The summary's record of the output `name`.
    fn output_record<'a>(s: &'a mut Value, name: &str) -> &'a mut Value {
        s["outputs"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|d| d["path"] == name)
            .unwrap_or_else(|| panic!("{name} is not listed"))
    }
}

/// The rerun redid the run, saying `why`.
#[track_caller]
fn assert_redone(v: &Verdict, why: &str) {
    assert!(!v.trusted, "trusted, but it should be redone ({why})");
    assert!(
        v.said.contains(&format!("redone: {why}")),
        "{why}: {}",
        v.said
    );
}

/// Changes one byte of `file` without changing its size: the last decimal digit of a text
/// file (to another digit), the last byte of a binary one (its lowest bit).
fn same_size_edit(file: &Path) {
    let mut bytes = std::fs::read(file).unwrap();
    let len = bytes.len();
    let text = file.extension().is_none_or(|e| e != "ply");
    match bytes.iter().rposition(u8::is_ascii_digit) {
        Some(i) if text => bytes[i] = if bytes[i] == b'9' { b'8' } else { bytes[i] + 1 },
        _ => bytes[len - 1] ^= 1,
    }
    std::fs::write(file, &bytes).unwrap();
    assert_eq!(std::fs::metadata(file).unwrap().len() as usize, len);
}

/// A file's digest as a summary records it.
fn digest_of(file: &Path, name: &str) -> Value {
    serde_json::to_value(msc::digest::FileDigest::of_file(name, file).unwrap()).unwrap()
}

/// The baseline of every test below: an untouched complete run is trusted, by a rerun on
/// its backend and by one that lets msc choose.
#[test]
fn an_untouched_complete_run_is_trusted() {
    let s = Sweep::new("cpu");
    let v = s.rerun("cpu");
    assert!(v.trusted && !v.said.contains("redone:"), "{}", v.said);
    assert!(s.rerun("auto").trusted, "--backend auto trusts a CPU run");
}

#[test]
fn a_same_size_edit_of_the_energy_log_is_redone() {
    let s = Sweep::new("cpu");
    same_size_edit(&s.run().join("energy.csv"));
    assert_redone(&s.rerun("cpu"), "energy.csv is missing or changed");
}

#[test]
fn a_same_size_edit_of_a_frame_is_redone() {
    let s = Sweep::new("cpu");
    same_size_edit(&s.run().join("frames/frame_000002.ply"));
    assert_redone(
        &s.rerun("cpu"),
        "frames/frame_000002.ply is missing or changed",
    );
}

/// The run folder's copy of the resolved scene, edited (one digit): what the folder says
/// it ran is no longer what it ran.
#[test]
fn a_same_size_edit_of_the_run_s_scene_toml_is_redone() {
    let s = Sweep::new("cpu");
    same_size_edit(&s.run().join("scene.toml"));
    assert_redone(&s.rerun("cpu"), "scene.toml is missing or changed");
}

/// The scene file given to the sweep, edited to another mass of the same length: the
/// resolved scene changed.
#[test]
fn a_same_size_edit_of_the_input_scene_is_redone() {
    let s = Sweep::new("cpu");
    let text = POLY.replace("mass = 0.1", "mass = 0.2");
    assert_eq!(text.len(), POLY.len());
    std::fs::write(s.path("poly.toml"), text).unwrap();
    assert_redone(&s.rerun("cpu"), "the resolved scene changed");
}

/// A rerun with another override: the resolved scene differs though no file changed.
#[test]
fn a_rerun_with_another_override_is_redone() {
    let Sweep { tmp, .. } = Sweep::new("cpu");
    let s = Sweep {
        tmp,
        sets: vec!["material.mass=0.2".into()],
    };
    assert_redone(&s.rerun("cpu"), "the resolved scene changed");
}

/// The mesh file, edited in a comment (same size, same geometry, same resolved scene):
/// the run read other bytes than those there now.
#[test]
fn a_same_size_edit_of_an_input_mesh_is_redone() {
    let s = Sweep::new("cpu");
    let text = OCTAHEDRON.replace("# mesh a", "# mesh b");
    std::fs::write(s.path("a.obj"), text).unwrap();
    let why = format!(
        "{} changed since the earlier run",
        s.path("a.obj").display()
    );
    assert_redone(&s.rerun("cpu"), &why);
}

#[test]
fn a_run_without_its_summary_is_redone() {
    let s = Sweep::new("cpu");
    std::fs::remove_file(s.run().join("summary.json")).unwrap();
    assert_redone(&s.rerun("cpu"), "no summary.json");
}

#[test]
fn an_interrupted_run_is_redone() {
    let s = Sweep::new("cpu");
    s.edit_summary(|j| j["interrupted"] = true.into());
    assert_redone(&s.rerun("cpu"), "the earlier run was interrupted");
}

/// A run another msc version made, everything else intact: that version may compute other
/// results from the same resolved scene (a fixed kernel, another default), so a batch
/// mixing its runs with this version's would compare unlike results.
#[test]
fn a_run_of_another_msc_version_is_redone() {
    let s = Sweep::new("cpu");
    s.edit_summary(|j| {
        assert_eq!(j["msc_version"], env!("CARGO_PKG_VERSION"));
        j["msc_version"] = "0.0.0-other".into();
    });
    let why = format!(
        "the earlier run was made by msc 0.0.0-other (this is msc {})",
        env!("CARGO_PKG_VERSION")
    );
    assert_redone(&s.rerun("cpu"), &why);
}

/// A finite run that did fewer steps than it was asked for is incomplete (the summary
/// says 15 of 20; every file it lists is intact).
#[test]
fn a_run_with_fewer_steps_than_requested_is_redone() {
    let s = Sweep::new("cpu");
    s.edit_summary(|j| {
        assert_eq!(j["steps_requested"], 20);
        j["steps"] = 15.into();
    });
    assert_redone(&s.rerun("cpu"), "the earlier run did not do all its steps");
}

/// A diverged run stopped early, and is complete: rerunning it would diverge again.
#[test]
fn a_diverged_run_is_trusted() {
    // k = 10 N/m (the varied value) on 1e-5 kg at h = 0.1 s: h omega = 100, far beyond
    // explicit Verlet's stability limit of 2. (A --set of the stiffness would be replaced
    // by the --vary, and is refused.)
    let s = Sweep::with(
        "cpu",
        &[
            "integrator.method=\"verlet\"",
            "material.mass=1e-5",
            "integrator.dt=0.1",
            "integrator.steps=400",
        ],
    );
    let summary = read_json(&s.path("out/material.stiffness=10/summary.json"));
    assert_eq!(summary["finite"], false, "{summary}");
    assert!(summary["steps"].as_u64().unwrap() < 400, "{summary}");
    let v = s.rerun("cpu");
    assert!(v.trusted, "{}", v.said);
}

/// `--backend cpu` does not trust a GPU run (f32 outputs), nor `--backend gpu` a CPU
/// run; `--backend auto` trusts either. Here the GPU run is one as a GPU writes it, its
/// backend field naming the adapter; [`a_real_gpu_run_is_not_trusted_by_a_cpu_rerun`]
/// runs one.
#[test]
fn a_run_of_another_backend_is_not_trusted() {
    let s = Sweep::new("cpu");
    s.edit_summary(|j| j["backend"] = "llvmpipe (LLVM 15.0.6, 256 bits)".into());
    assert_redone(
        &s.rerun("cpu"),
        "the earlier run used the backend llvmpipe (LLVM 15.0.6, 256 bits)",
    );
    // The rerun was a CPU run: a GPU rerun must not trust it. Without an adapter the GPU
    // rerun fails after its verdict, which is all this asks.
    let scene = s.path("poly.toml");
    let out = s.path("out");
    let o = msc(
        &[
            "sweep",
            scene.to_str().unwrap(),
            "--vary",
            "material.stiffness=10",
            "--backend",
            "gpu",
            "--out",
            out.to_str().unwrap(),
        ],
        s.tmp.path(),
    );
    let said = common::stdout(&o);
    assert!(
        said.contains("redone: the earlier run used the backend cpu"),
        "{said}{}",
        stderr(&o)
    );
}

#[test]
fn a_real_gpu_run_is_not_trusted_by_a_cpu_rerun() {
    if !common::gpu_available() {
        return;
    }
    let s = Sweep::new("gpu");
    let gpu = read_json(&s.run().join("summary.json"))["backend"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(gpu, "cpu");
    assert!(s.rerun("gpu").trusted, "a GPU rerun trusts the GPU run");
    assert!(s.rerun("auto").trusted, "--backend auto trusts a GPU run");
    assert_redone(
        &s.rerun("cpu"),
        &format!("the earlier run used the backend {gpu}"),
    );
    assert_redone(&s.rerun("gpu"), "the earlier run used the backend cpu");
}

/// The summary's recorded hash of an output edited (the file itself intact): the file no
/// longer matches what the summary vouches for.
#[test]
fn a_summary_whose_output_hash_was_edited_is_redone() {
    let s = Sweep::new("cpu");
    s.edit_summary(|j| {
        let d = Sweep::output_record(j, "energy.csv");
        d["sha256"] = "0".repeat(64).into();
    });
    assert_redone(&s.rerun("cpu"), "energy.csv is missing or changed");
}

/// The summary's recorded hash of an input edited: the input now is not the one it read.
#[test]
fn a_summary_whose_input_hash_was_edited_is_redone() {
    let s = Sweep::new("cpu");
    s.edit_summary(|j| j["inputs"][1]["sha256"] = "0".repeat(64).into());
    let why = format!(
        "{} changed since the earlier run",
        s.path("a.obj").display()
    );
    assert_redone(&s.rerun("cpu"), &why);
}

/// The summary's recorded hash of the resolved scene edited, or its scene name.
#[test]
fn a_summary_whose_scene_hash_or_name_was_edited_is_redone() {
    let s = Sweep::new("cpu");
    s.edit_summary(|j| j["scene_sha256"] = "0".repeat(64).into());
    assert_redone(&s.rerun("cpu"), "the resolved scene changed");
    // The rerun rewrote the run; now its name.
    s.edit_summary(|j| j["scene"] = "polx".into());
    assert_redone(&s.rerun("cpu"), "the resolved scene changed");
}

/// The run folder's scene copy edited, and the summary's record of it rewritten to match:
/// every listed file checks out, but the copy is not the scene the summary says ran.
#[test]
fn a_scene_copy_other_than_the_scene_that_ran_is_redone() {
    let s = Sweep::new("cpu");
    let copy = s.run().join("scene.toml");
    same_size_edit(&copy);
    let record = digest_of(&copy, "scene.toml");
    s.edit_summary(|j| *Sweep::output_record(j, "scene.toml") = record);
    assert_redone(
        &s.rerun("cpu"),
        "summary.json does not vouch for every output",
    );
}

/// A summary that leaves out what it must list: the energy log, or a frame it wrote.
#[test]
fn a_summary_that_does_not_list_every_output_is_redone() {
    let s = Sweep::new("cpu");
    s.edit_summary(|j| {
        j["outputs"]
            .as_array_mut()
            .unwrap()
            .retain(|d| d["path"] != "energy.csv")
    });
    assert_redone(
        &s.rerun("cpu"),
        "summary.json does not vouch for every output",
    );
    s.edit_summary(|j| {
        j["outputs"]
            .as_array_mut()
            .unwrap()
            .retain(|d| d["path"] != "frames/frame_000004.ply")
    });
    assert_redone(
        &s.rerun("cpu"),
        "summary.json does not vouch for every output",
    );
}

/// A summary that vouches for a file outside the run folder (with its true digest):
/// never trusted, whatever that file holds.
#[test]
fn a_summary_listing_a_file_outside_the_run_folder_is_redone() {
    let s = Sweep::new("cpu");
    let record = digest_of(&s.path("poly.toml"), "../../poly.toml");
    s.edit_summary(|j| j["outputs"].as_array_mut().unwrap().push(record));
    assert_redone(
        &s.rerun("cpu"),
        "../../poly.toml is not a path inside the run folder",
    );
}

/// A summary listing one frame twice in place of another (the count still matches): the
/// frame it no longer lists is missing, yet every listed file checks out.
#[test]
fn a_summary_listing_a_frame_twice_is_redone() {
    let s = Sweep::new("cpu");
    std::fs::remove_file(s.run().join("frames/frame_000004.ply")).unwrap();
    s.edit_summary(|j| {
        let first = Sweep::output_record(j, "frames/frame_000000.ply").clone();
        *Sweep::output_record(j, "frames/frame_000004.ply") = first;
    });
    assert_redone(
        &s.rerun("cpu"),
        "summary.json does not vouch for every output",
    );
}

/// A complete run whose frames/ also holds a frame it did not write (another run's, with
/// a later number): trusting the folder would hand that frame out as this run's.
#[test]
fn a_run_beside_a_frame_it_did_not_write_is_redone() {
    let s = Sweep::new("cpu");
    let frames = s.run().join("frames");
    std::fs::copy(
        frames.join("frame_000000.ply"),
        frames.join("frame_000005.ply"),
    )
    .unwrap();
    assert_redone(
        &s.rerun("cpu"),
        "frames/frame_000005.ply is not one of the earlier run's frames",
    );
    assert!(
        !frames.join("frame_000005.ply").exists(),
        "the redo kept it"
    );
}
