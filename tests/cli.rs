//! End-to-end tests of the `msc` binary: outputs, exit codes and messages.

mod common;

use common::{leftover_temp_files, msc, read_json, stderr, stdout};

use std::path::Path;
use std::process::Output;

/// Every failure must be a message, never a panic.
fn assert_no_panic(o: &Output) {
    let err = stderr(o);
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
}

/// energy.csv as (header, rows of (step, values)).
fn read_energy(path: &Path) -> (String, Vec<(u64, Vec<f64>)>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header = lines.next().expect("a header").to_string();
    let rows = lines
        .map(|l| {
            let mut cols = l.split(',');
            let step = cols.next().unwrap().parse().expect("integer step");
            let values = cols
                .map(|c| c.parse::<f64>().unwrap_or_else(|_| panic!("number: {c}")))
                .collect::<Vec<_>>();
            assert_eq!(values.len(), 7, "row {l}");
            (step, values)
        })
        .collect();
    (header, rows)
}

const HEADER: &str = "step,time,kinetic,elastic,coulomb,gravity,external,total";

/// A parsed PLY file: vertex rows (x y z vx vy vz charge by name) and faces.
struct Ply {
    vertex_props: Vec<String>,
    vertices: Vec<Vec<f64>>,
    faces: Vec<Vec<i64>>,
}

/// A small PLY reader independent of the writer: ascii or binary_little_endian, scalar
/// properties and `list` faces.
fn read_ply(path: &Path) -> Ply {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let marker = b"end_header\n";
    let end = bytes
        .windows(marker.len())
        .position(|w| w == marker)
        .expect("end_header")
        + marker.len();
    let header = std::str::from_utf8(&bytes[..end]).unwrap();
    let mut lines = header.lines();
    assert_eq!(lines.next(), Some("ply"));
    let mut format = "";
    // (element name, count, [(prop name, type, Option<list count type>)])
    type Prop = (String, String, Option<String>);
    let mut elements: Vec<(String, usize, Vec<Prop>)> = Vec::new();
    for line in lines {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.first().copied() {
            Some("format") => format = if w[1] == "ascii" { "ascii" } else { w[1] },
            Some("element") => elements.push((w[1].into(), w[2].parse().unwrap(), vec![])),
            Some("property") if w[1] == "list" => {
                elements
                    .last_mut()
                    .unwrap()
                    .2
                    .push((w[4].into(), w[3].into(), Some(w[2].into())))
            }
            Some("property") => {
                elements
                    .last_mut()
                    .unwrap()
                    .2
                    .push((w[2].into(), w[1].into(), None))
            }
            _ => {}
        }
    }
    assert!(
        format == "ascii" || format == "binary_little_endian",
        "format {format}"
    );
    let body = &bytes[end..];
    let mut pos = 0usize;
    let mut words = std::str::from_utf8(body)
        .ok()
        .filter(|_| format == "ascii")
        .map(|s| s.split_whitespace().collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter();
    let mut scalar = |ty: &str| -> f64 {
        if format == "ascii" {
            return words.next().expect("more ascii values").parse().unwrap();
        }
        let size = match ty {
            "char" | "uchar" | "int8" | "uint8" => 1,
            "short" | "ushort" | "int16" | "uint16" => 2,
            "int" | "uint" | "float" | "int32" | "uint32" | "float32" => 4,
            "double" | "float64" => 8,
            other => panic!("PLY type {other}"),
        };
        let b = &body[pos..pos + size];
        pos += size;
        match ty {
            "char" | "int8" => b[0] as i8 as f64,
            "uchar" | "uint8" => b[0] as f64,
            "short" | "int16" => i16::from_le_bytes([b[0], b[1]]) as f64,
            "ushort" | "uint16" => u16::from_le_bytes([b[0], b[1]]) as f64,
            "int" | "int32" => i32::from_le_bytes(b.try_into().unwrap()) as f64,
            "uint" | "uint32" => u32::from_le_bytes(b.try_into().unwrap()) as f64,
            "float" | "float32" => f32::from_le_bytes(b.try_into().unwrap()) as f64,
            _ => f64::from_le_bytes(b.try_into().unwrap()),
        }
    };
    let mut ply = Ply {
        vertex_props: vec![],
        vertices: vec![],
        faces: vec![],
    };
    for (name, count, props) in &elements {
        for _ in 0..*count {
            let mut row = Vec::new();
            let mut list = Vec::new();
            for (_, ty, list_ty) in props {
                match list_ty {
                    Some(lt) => {
                        let n = scalar(lt) as usize;
                        list = (0..n).map(|_| scalar(ty) as i64).collect();
                    }
                    None => row.push(scalar(ty)),
                }
            }
            match name.as_str() {
                "vertex" => ply.vertices.push(row),
                "face" => ply.faces.push(list),
                _ => {}
            }
        }
        if name == "vertex" {
            ply.vertex_props = props.iter().map(|p| p.0.clone()).collect();
        }
    }
    if format != "ascii" {
        assert_eq!(pos, body.len(), "{}: trailing bytes", path.display());
    }
    ply
}

/// The steps at which a run of `steps` steps writes a row: 0, every, 2 every, ..., last.
fn expected_steps(steps: u64, every: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..=steps).step_by(every as usize).collect();
    if *v.last().unwrap() != steps {
        v.push(steps);
    }
    v
}

#[test]
fn run_on_the_cpu_writes_every_output() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let (steps, every) = (25u64, 10u64);
    let o = msc(
        &[
            "run",
            "torus",
            "--backend",
            "cpu",
            "--steps",
            &steps.to_string(),
            "--set",
            &format!("output.every={every}"),
            "--out",
            out.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    // stderr is not a terminal here: no progress bar drawn.
    assert!(!stderr(&o).contains("steps ("), "{}", stderr(&o));

    let summary = read_json(&out.join("summary.json"));
    for key in [
        "backend",
        "adapter",
        "particles",
        "springs",
        "charged",
        "steps",
        "dt",
        "wall_seconds",
        "ms_per_step",
        "finite",
        "final_energy",
        "solver_residual",
        "solver_iterations",
        "integrator",
        "solver",
        "scene",
        "msc_version",
    ] {
        assert!(summary.get(key).is_some(), "summary.json lacks {key}");
    }
    assert_eq!(summary["backend"], "cpu");
    assert!(summary["adapter"].is_null());
    assert_eq!(summary["finite"], true);
    assert_eq!(summary["steps"], steps);
    assert_eq!(summary["scene"], "torus");
    let particles = summary["particles"].as_u64().unwrap() as usize;
    assert!(particles > 0);
    let dt = summary["dt"].as_f64().unwrap();
    assert!(summary["wall_seconds"].as_f64().unwrap() >= 0.0);

    let (header, rows) = read_energy(&out.join("energy.csv"));
    assert_eq!(header, HEADER);
    let want = expected_steps(steps, every);
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        want,
        "row steps"
    );
    for (step, v) in &rows {
        assert!(v.iter().all(|x| x.is_finite()), "row {step}: {v:?}");
        assert!(
            (v[0] - *step as f64 * dt).abs() <= 1e-12 * v[0].abs().max(1.0),
            "time column"
        );
        let sum: f64 = v[1..6].iter().sum();
        let scale = v[1..6].iter().map(|x| x.abs()).sum::<f64>().max(1e-300);
        assert!((v[6] - sum).abs() <= 1e-12 * scale, "total = sum of terms");
    }
    // The summary's final energies are the last row's, to the bit.
    let last = &rows.last().unwrap().1;
    let fe = &summary["final_energy"];
    for (k, name) in [
        "kinetic", "elastic", "coulomb", "gravity", "external", "total",
    ]
    .iter()
    .enumerate()
    {
        assert_eq!(
            fe[name].as_f64().unwrap(),
            last[k + 1],
            "final_energy.{name}"
        );
    }

    // One frame per energy row, numbered from 0, each a readable PLY of every particle.
    let frames = out.join("frames");
    let mut names: Vec<String> = std::fs::read_dir(&frames)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let want_names: Vec<String> = (0..want.len())
        .map(|k| format!("frame_{k:06}.ply"))
        .collect();
    assert_eq!(names, want_names);
    for name in &names {
        let ply = read_ply(&frames.join(name));
        assert_eq!(
            ply.vertex_props,
            ["x", "y", "z", "vx", "vy", "vz", "charge"]
        );
        assert_eq!(ply.vertices.len(), particles, "{name}");
        assert!(ply.vertices.iter().flatten().all(|x| x.is_finite()));
        for f in &ply.faces {
            assert_eq!(f.len(), 3);
            assert!(f.iter().all(|&k| k >= 0 && (k as usize) < particles));
        }
    }
    // The torus is a surface mesh: its frames carry triangles.
    assert!(!read_ply(&frames.join(&names[0])).faces.is_empty());
    // Frame 0 is the initial state: charges in the frame match the summary's count.
    let charged = read_ply(&frames.join(&names[0]))
        .vertices
        .iter()
        .filter(|v| v[6] != 0.0)
        .count();
    assert_eq!(charged as u64, summary["charged"].as_u64().unwrap());

    assert!(leftover_temp_files(&out).is_empty());

    // scene.toml re-runs the same simulation, step count included.
    let again = tmp.path().join("again");
    let o = msc(
        &[
            "run",
            out.join("scene.toml").to_str().unwrap(),
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            again.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    assert!(
        stdout(&o).is_empty(),
        "--quiet prints nothing: {}",
        stdout(&o)
    );
    let (_, rows2) = read_energy(&again.join("energy.csv"));
    assert_eq!(rows2.len(), rows.len());
    for ((s1, v1), (s2, v2)) in rows.iter().zip(&rows2) {
        assert_eq!(s1, s2);
        for (a, b) in v1.iter().zip(v2) {
            // Same equations on the same machine; only a parallel sum's order may differ.
            assert!(
                (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-30),
                "{a} vs {b}"
            );
        }
    }
}

/// summary.json names the linear solver of an implicit run; an explicit one solves
/// nothing, so its solver fields are null (they reported the scene's unread settings).
#[test]
fn an_explicit_run_reports_no_linear_solver() {
    let tmp = tempfile::tempdir().unwrap();
    for (method, solver) in [("imex", Some("jacobi")), ("verlet", None)] {
        let out = format!("out-{method}");
        let set = format!("integrator.method=\"{method}\"");
        common::run_tiny(tmp.path(), &out, &[&set]);
        let summary = read_json(&tmp.path().join(&out).join("summary.json"));
        assert_eq!(summary["solver"].as_str(), solver, "{method}");
        assert_eq!(
            summary["solver_max_iterations"].as_u64(),
            solver.map(|_| 20)
        );
        assert_eq!(summary["solver_tolerance"].is_null(), solver.is_none());
    }
}

#[test]
fn default_output_folder_is_out_slash_scene_name() {
    let tmp = tempfile::tempdir().unwrap();
    let o = msc(
        &[
            "run",
            "torus",
            "--backend",
            "cpu",
            "--steps",
            "2",
            "--quiet",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    assert!(tmp.path().join("out/torus/summary.json").is_file());
    assert!(tmp.path().join("out/torus/energy.csv").is_file());
}

#[test]
fn a_diverging_run_stops_and_records_finite_false() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("blowup");
    let requested = 2000u64;
    let o = msc(
        &[
            "run",
            "torus",
            "--backend",
            "cpu",
            "--set",
            "integrator.method=\"symplectic_euler\"",
            "--set",
            "integrator.dt=0.15",
            "--set",
            "output.every=1",
            "--steps",
            &requested.to_string(),
            "--out",
            out.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(&o));
    let err = stderr(&o);
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("diverged"), "{err}");

    let summary = read_json(&out.join("summary.json"));
    assert_eq!(summary["finite"], false);
    let done = summary["steps"].as_u64().unwrap();
    assert!(done < requested, "stopped early: {done}");
    let (header, rows) = read_energy(&out.join("energy.csv"));
    assert_eq!(header, HEADER);
    // Rows up to the divergence, which is the last: non-finite energies, or (the f64
    // CPU) a state that f32 cannot hold while its energies are still finite in f64.
    let (last_step, last) = rows.last().unwrap();
    assert_eq!(*last_step, done);
    let why = summary["divergence"].as_str().unwrap();
    assert!(
        last.iter().any(|x| !x.is_finite()) || why.contains("beyond the f32 range"),
        "{last:?} {why}"
    );
    assert!(rows[..rows.len() - 1]
        .iter()
        .all(|(_, v)| v.iter().all(|x| x.is_finite())));
    assert!(leftover_temp_files(&out).is_empty());
}

#[test]
fn scenes_lists_the_torus() {
    let tmp = tempfile::tempdir().unwrap();
    let o = msc(&["scenes"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("torus"))
        .unwrap_or_else(|| panic!("no torus in:\n{text}"));
    // Name and a description.
    assert!(line.split_whitespace().count() > 1, "{line}");
}

#[test]
fn a_missing_scene_file_exits_2_naming_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("no_such_scene.toml");
    let o = msc(
        &["run", path.to_str().unwrap(), "--backend", "cpu"],
        tmp.path(),
    );
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("no_such_scene.toml"), "{err}");
    assert!(!tmp.path().join("out").exists(), "nothing written");
}

#[test]
fn a_bad_set_key_exits_2_naming_the_key() {
    let tmp = tempfile::tempdir().unwrap();
    let o = msc(
        &[
            "run",
            "torus",
            "--backend",
            "cpu",
            "--set",
            "integrator.no_such_key=1",
        ],
        tmp.path(),
    );
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("no_such_key"), "{err}");
}

#[test]
fn bad_options_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        &["run", "torus", "--steps", "0", "--backend", "cpu"][..],
        &["run", "torus", "--backend", "tpu"],
        &["run", "torus", "--set", "no_equals_sign"],
        &["validate", "torus", "--tolerance", "-1"],
        &["run"],
        &["frobnicate"],
    ] {
        let o = msc(args, tmp.path());
        assert_no_panic(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("error"), "{args:?}: {}", stderr(&o));
    }
    let o = msc(
        &["run", "torus", "--steps", "0", "--backend", "cpu"],
        tmp.path(),
    );
    assert!(stderr(&o).contains("steps"), "{}", stderr(&o));
}

#[test]
fn an_unwritable_output_folder_exits_1_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a_file");
    std::fs::write(&file, "not a folder").unwrap();
    let out = file.join("run");
    let o = msc(
        &[
            "run",
            "torus",
            "--backend",
            "cpu",
            "--steps",
            "1",
            "--out",
            out.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("a_file"), "{}", stderr(&o));
}

#[test]
fn help_explains_the_options() {
    let tmp = tempfile::tempdir().unwrap();
    let o = msc(&["run", "--help"], tmp.path());
    assert!(o.status.success());
    let text = stdout(&o);
    for opt in ["--out", "--backend", "--set", "--steps", "--quiet"] {
        assert!(text.contains(opt), "{opt} missing:\n{text}");
    }
    let o = msc(&["validate", "--help"], tmp.path());
    let text = stdout(&o);
    assert!(text.contains("1e-3") && text.contains("f32"), "{text}");
}

#[test]
fn atomic_writes_leave_a_complete_file_and_no_temporaries() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("data.txt");
    std::fs::write(&target, "previous complete contents\n").unwrap();

    // While a write is in progress the old file stays intact.
    let mut file = msc::output::AtomicFile::create(&target).unwrap();
    let big = "0123456789".repeat(100_000);
    file.write_all(big.as_bytes()).unwrap();
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "previous complete contents\n"
    );
    file.commit().unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), big);

    // An abandoned write (an error mid-way) changes nothing and cleans up.
    let mut file = msc::output::AtomicFile::create(&target).unwrap();
    file.write_all(b"half").unwrap();
    drop(file);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), big);

    msc::output::write_atomic(&tmp.path().join("small.json"), b"{}\n").unwrap();
    let names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, ["data.txt", "small.json"]);
}

#[test]
fn info_reports_adapters_or_none() {
    let tmp = tempfile::tempdir().unwrap();
    let o = msc(&["info"], tmp.path());
    assert_no_panic(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("adapter 0:") || text.contains("no GPU adapters found"),
        "{text}"
    );
}

#[test]
fn auto_backend_uses_a_hardware_gpu_or_says_it_fell_back() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("auto");
    let o = msc(
        &[
            "run",
            "torus",
            "--steps",
            "3",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let summary = read_json(&out.join("summary.json"));
    if summary["adapter"].is_null() {
        assert_eq!(summary["backend"], "cpu");
        assert!(
            stderr(&o).contains("note:") && stderr(&o).contains("CPU"),
            "{}",
            stderr(&o)
        );
    } else {
        assert_ne!(summary["adapter"]["device_type"], "Cpu", "{summary}");
    }
}

/// True when the GPU tests must run (CI sets MSC_REQUIRE_GPU=1 with lavapipe installed).
fn gpu_available(test: &str) -> bool {
    if !msc::gpu::list_adapters().is_empty() {
        return true;
    }
    assert!(
        std::env::var("MSC_REQUIRE_GPU").as_deref() != Ok("1"),
        "{test}: MSC_REQUIRE_GPU=1 but wgpu found no adapter"
    );
    eprintln!("{test}: skipped, no GPU adapter (set MSC_REQUIRE_GPU=1 to make this fail)");
    false
}

#[test]
fn gpu_run_records_its_adapter() {
    if !gpu_available("gpu_run_records_its_adapter") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("gpu");
    let o = msc(
        &[
            "run",
            "torus",
            "--backend",
            "gpu",
            "--steps",
            "10",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let summary = read_json(&out.join("summary.json"));
    assert_eq!(summary["finite"], true);
    assert!(summary["adapter"]["name"].is_string(), "{summary}");
    let (_, rows) = read_energy(&out.join("energy.csv"));
    assert_eq!(rows.last().unwrap().0, 10);
}

/// A DDEF run reports its grid builds in summary.json, on both backends: one evaluation
/// per IMEX step, a rebuild every `rebuild_every` of them (the torus barely moves in 10
/// steps, so no charge leaves the padded box early).
#[test]
fn ddef_runs_report_how_often_the_grid_was_rebuilt() {
    let gpu = gpu_available("ddef_runs_report_how_often_the_grid_was_rebuilt");
    // The lattice (default) is planned once and followed at every evaluation on both
    // backends; the Delaunay grid (CPU only) is rebuilt every `rebuild_every`.
    let mut runs: Vec<(&str, &[&str], u64)> = vec![("cpu", &[], 1)];
    if gpu {
        runs.push(("gpu", &[], 1));
    }
    let delaunay: &[&str] = &[
        "--set",
        "coulomb.ddef_grid=\"delaunay\"",
        "--set",
        "coulomb.rebuild_every=3",
    ];
    // 10 steps = 10 evaluations; builds at evaluations 1, 4, 7, 10.
    runs.push(("cpu", delaunay, 4));
    for (backend, extra, rebuilds) in runs {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("ddef");
        let mut args = vec![
            "run",
            "torus",
            "--backend",
            backend,
            "--set",
            "coulomb.method=\"ddef\"",
            "--set",
            "coulomb.samples=200",
            "--steps",
            "10",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = msc(&args, tmp.path());
        assert!(o.status.success(), "{backend}: {}", stderr(&o));
        let summary = read_json(&out.join("summary.json"));
        assert_eq!(summary["coulomb"], "ddef");
        // The energy diagnostic uses the exact sum, so it adds no evaluation.
        assert_eq!(summary["ddef"]["evaluations"], 10, "{backend}: {summary}");
        assert_eq!(
            summary["ddef"]["rebuilds"], rebuilds,
            "{backend}: {summary}"
        );
    }
    // Without DDEF the field is null.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("exact");
    let o = msc(
        &[
            "run",
            "torus",
            "--backend",
            "cpu",
            "--steps",
            "2",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(read_json(&out.join("summary.json"))["ddef"].is_null());
}

#[test]
fn validate_agrees_within_its_default_tolerance() {
    if !gpu_available("validate_agrees_within_its_default_tolerance") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // The default tolerance 1e-3 (f32 GPU vs f64 CPU over the steps run).
    let o = msc(&["validate", "torus", "--steps", "50"], tmp.path());
    assert_no_panic(&o);
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    let text = stdout(&o);
    for q in [
        "positions",
        "velocities",
        "kinetic",
        "elastic",
        "coulomb",
        "total",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(q)),
            "{q} missing:\n{text}"
        );
    }
    // And a tolerance below f32 round-off must fail with exit 1.
    let o = msc(
        &["validate", "torus", "--steps", "50", "--tolerance", "1e-12"],
        tmp.path(),
    );
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
}

/// A DDEF scene is validated like with like: both backends run the same lattice policy
/// (same box, sites and stencils), agree within the default tolerance, and the output
/// says which method both ran.
#[test]
fn validate_compares_ddef_with_ddef() {
    if !gpu_available("validate_compares_ddef_with_ddef") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let o = msc(
        &[
            "validate",
            "torus",
            "--steps",
            "30",
            "--set",
            "coulomb.method=\"ddef\"",
        ],
        tmp.path(),
    );
    assert_no_panic(&o);
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("Coulomb: ddef on both backends (the lattice grid, corrected variant"),
        "{text}"
    );
    let o = msc(&["validate", "torus", "--steps", "30"], tmp.path());
    assert!(stdout(&o).contains("Coulomb: all_pairs on both backends"));
}

#[test]
fn the_copied_scene_reruns_from_anywhere() {
    // A scene file with an OBJ mesh next to it, referenced by a relative path.
    let tmp = tempfile::tempdir().unwrap();
    let scenes = tmp.path().join("scenes");
    std::fs::create_dir_all(&scenes).unwrap();
    std::fs::write(
        scenes.join("tet.obj"),
        "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n",
    )
    .unwrap();
    std::fs::write(
        scenes.join("tet.toml"),
        "[mesh]\nkind = \"obj\"\npath = \"tet.obj\"\n\
         [material]\nmass = 0.01\nstiffness = 10.0\ncharge = 1e-7\n\
         [integrator]\ndt = 0.01\nduration = 0.05\n\
         [output]\nevery = 1\n",
    )
    .unwrap();
    let o = msc(
        &[
            "run",
            "scenes/tet.toml",
            "--backend",
            "cpu",
            "--steps",
            "3",
            "--quiet",
            "--out",
            "run1",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let first = read_json(&tmp.path().join("run1/summary.json"));
    assert_eq!(first["scene"], "tet");
    assert_eq!(first["particles"], 4);
    assert_eq!(first["springs"], 6);

    // From another working directory, with no --steps: same name, same 3 steps.
    let o = msc(
        &[
            "run",
            "scene.toml",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            "../run2",
        ],
        &tmp.path().join("run1"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let second = read_json(&tmp.path().join("run2/summary.json"));
    assert_eq!(second["scene"], "tet");
    assert_eq!(second["steps"], 3);
    let (_, r1) = read_energy(&tmp.path().join("run1/energy.csv"));
    let (_, r2) = read_energy(&tmp.path().join("run2/energy.csv"));
    assert_eq!(r1.len(), 4);
    assert_eq!(r1.len(), r2.len());
}
