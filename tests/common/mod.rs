//! Helpers shared by the integration tests that need a GPU: they run on whatever adapter
//! wgpu finds, software ones (lavapipe) included, skip with a message when there is none,
//! and fail instead when `MSC_REQUIRE_GPU=1`.

// Each test crate compiles its own copy and uses only some of these.
#![allow(dead_code)]

use glam::DVec3;
use msc::config::Config;
use msc::config::{CoulombConfig, CoulombMethod, Integrator};
use msc::gpu::{GpuError, GpuSolver, HeadlessOptions};
use msc::grad::Checkpointing;
use msc::model::{Spring, System, SystemDesc};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

// The checkpoint policies the grad unit tests run too: one list, compiled in each crate.
#[path = "../../src/grad/test_policies.rs"]
pub mod policies;

/// `MSC_REQUIRE_GPU=1`: a missing adapter fails the test instead of skipping it.
pub fn require_gpu() -> bool {
    std::env::var("MSC_REQUIRE_GPU").as_deref() == Ok("1")
}

/// The test found no adapter (`why` says more): fails under `MSC_REQUIRE_GPU=1`, else
/// prints that the test is skipped.
pub fn skip_no_adapter(why: &str) {
    assert!(!require_gpu(), "MSC_REQUIRE_GPU=1 but no adapter{why}");
    eprintln!("skipping: no GPU adapter{why}");
}

/// The adapter lacks `feature` (a wgpu feature or limit), which `test` needs: skipped
/// with a note naming it. The one skip `MSC_REQUIRE_GPU=1` allows: no setting gives an
/// adapter a feature it lacks.
pub fn skip_missing_feature(test: &str, feature: &str) {
    eprintln!("skipping {test}: the adapter lacks {feature}");
}

/// The default adapter, or `None` (test skipped) when there is none.
pub fn adapter() -> Option<wgpu::Adapter> {
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    match pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default())) {
        Ok(a) => Some(a),
        Err(e) => {
            skip_no_adapter(&format!(": {e}"));
            None
        }
    }
}

/// A device and queue of our own (the embedding API), or `None` (test skipped) when
/// there is no adapter.
pub fn device() -> Option<(wgpu::Device, wgpu::Queue)> {
    let adapter = adapter()?;
    Some(
        pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor::default()))
            .expect("device"),
    )
}

/// The headless solver on any adapter, or `None` (test skipped) when there is none.
pub fn gpu(system: &System, config: &Config) -> Option<GpuSolver> {
    match GpuSolver::headless(
        system,
        config,
        &HeadlessOptions {
            allow_software: true,
        },
    ) {
        Ok(s) => Some(s),
        Err(GpuError::NoAdapter(why)) => {
            skip_no_adapter(&why);
            None
        }
        Err(e) => panic!("building the GPU solver failed: {e}"),
    }
}

/// splitmix64: seeded, portable random numbers for test inputs.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn range(&mut self, a: f64, b: f64) -> f64 {
        a + (b - a) * self.next()
    }
    pub fn vec(&mut self, s: f64) -> DVec3 {
        DVec3::new(self.range(-s, s), self.range(-s, s), self.range(-s, s))
    }
}

/// Runs the `msc` binary in `cwd`.
/// Fitting targets from simulated states, each position mapped by `f`.
pub fn targets_of(
    states: Vec<msc::model::State>,
    f: impl Fn(DVec3) -> DVec3,
) -> Vec<msc::grad::Target> {
    states
        .into_iter()
        .map(|s| msc::grad::Target {
            step: s.step,
            positions: s.x.into_iter().map(&f).collect(),
        })
        .collect()
}

/// The arguments of `msc run tiny.toml --backend cpu --quiet --out OUT` with `--set`
/// overrides (tiny.toml written by [`tiny`]).
pub fn tiny_run_args<'a>(out: &'a str, sets: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "tiny.toml",
        "--backend",
        "cpu",
        "--quiet",
        "--out",
        out,
    ];
    for s in sets {
        args.extend(["--set", s]);
    }
    args
}

/// `msc run tiny.toml --backend cpu --quiet --out OUT`, with `--set` overrides, in `dir`
/// (where it writes tiny.toml); the run must succeed.
pub fn run_tiny(dir: &Path, out: &str, sets: &[&str]) {
    tiny(dir);
    let args = tiny_run_args(out, sets);
    let o = msc(&args, dir);
    assert!(o.status.success(), "msc {args:?}: {}", stderr(&o));
}

pub fn msc(args: &[&str], cwd: &Path) -> Output {
    msc_with(args, cwd, &[])
}

/// [`msc`] with these environment variables set.
pub fn msc_with(args: &[&str], cwd: &Path, envs: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_msc"))
        .args(args)
        .envs(envs.iter().copied())
        .current_dir(cwd)
        .output()
        .expect("the msc binary runs")
}

/// `msc ARGS` in `cwd` outside any Slurm array task or shard count, with `envs` set, on
/// one CPU thread: the CPU reference sums energies in parallel, so two runs may differ in
/// the last bit by the order of the sum; with one thread they agree bit for bit, which is
/// what a shard's runs are compared with. Arguments are OS strings: a path need not be
/// UTF-8.
pub fn msc_unsharded<S: AsRef<std::ffi::OsStr>>(
    args: &[S],
    cwd: &Path,
    envs: &[(&str, &str)],
) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_msc"));
    c.args(args).current_dir(cwd).env("RAYON_NUM_THREADS", "1");
    for k in [
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_MIN",
        "SLURM_ARRAY_TASK_COUNT",
        "MSC_SHARD_COUNT",
    ] {
        c.env_remove(k);
    }
    c.envs(envs.iter().copied());
    c.output().expect("the msc binary runs")
}

/// Standard output, then standard error, as text.
pub fn output_text(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A JSON file, parsed; panics naming the file.
pub fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// True when an adapter exists; otherwise the test is skipped (or fails under
/// `MSC_REQUIRE_GPU=1`).
pub fn gpu_available() -> bool {
    adapter().is_some()
}

/// The columns of `runs.csv` that two runs of the same plan must agree on: all but the
/// timings (`ms_per_step`, `wall_seconds`, `setup_seconds`) and `skipped`.
pub fn comparable_table(csv: &str) -> Vec<Vec<String>> {
    let mut lines = csv.lines();
    let header = msc::batch::record::parse_csv_line(lines.next().expect("a header"));
    let keep: Vec<usize> = (0..header.len())
        .filter(|&i| {
            !["ms_per_step", "wall_seconds", "setup_seconds", "skipped"]
                .contains(&header[i].as_str())
        })
        .collect();
    std::iter::once(header.clone())
        .chain(lines.map(msc::batch::record::parse_csv_line))
        .map(|row| keep.iter().map(|&i| row[i].clone()).collect())
        .collect()
}

/// A small charged torus (18 particles): each run takes milliseconds.
pub const TINY: &str = r#"
name = "tiny"
[mesh]
kind = "torus"
major_radius = 1.0
minor_radius = 0.3
rings = 6
sides = 3
[material]
mass = 0.1
stiffness = 10.0
charge = 1e-6
[integrator]
method = "imex"
dt = 0.01
steps = 20
solver = { method = "jacobi", iterations = 20, omega = 0.5, tolerance = 1e-6 }
[coulomb]
method = "all_pairs"
[output]
every = 5
frames = "none"
"#;

pub fn tiny(dir: &Path) -> PathBuf {
    let p = dir.join("tiny.toml");
    std::fs::write(&p, TINY).unwrap();
    p
}

/// Hidden temporary files (`.NAME.tmp-*`) left anywhere under `dir`.
pub fn leftover_temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        if path.is_dir() {
            found.extend(leftover_temp_files(&path));
        } else if entry.file_name().to_string_lossy().contains(".tmp") {
            found.push(path);
        }
    }
    found
}

/// Charges of both signs, a fraction `uncharged` of them zero.
pub fn charges(rng: &mut Rng, n: usize, q: f64, uncharged: f64) -> Vec<f64> {
    (0..n)
        .map(|_| {
            if rng.next() < uncharged {
                0.0
            } else {
                q * rng.range(0.5, 1.5) * if rng.next() < 0.5 { -1.0 } else { 1.0 }
            }
        })
        .collect()
}

/// What the GPU holds: positions rounded to f32.
pub fn f32_round(x: &[DVec3]) -> Vec<DVec3> {
    x.iter().map(|p| p.as_vec3().as_dvec3()).collect()
}

/// Free particles with charges `q` at `x` (unit masses, no springs).
pub fn cloud(x: &[DVec3], q: &[f64]) -> System {
    let n = x.len();
    System::new(SystemDesc {
        positions: x.to_vec(),
        velocities: vec![DVec3::ZERO; n],
        masses: vec![1.0; n],
        charges: q.to_vec(),
        pinned: vec![false; n],
        springs: Vec::new(),
        faces: Vec::new(),
    })
    .expect("system")
}

/// Free charges under the lattice DDEF at `samples` sites (`variant`, softening
/// `softening`) and symplectic Euler, h = 1e-3, no gravity.
pub fn ddef_cloud_config(
    samples: msc::config::DdefSamples,
    variant: msc::config::DdefVariant,
    softening: f64,
) -> Config {
    use msc::config::DdefConfig;
    Config {
        integrator: Integrator::SymplecticEuler,
        dt: 1e-3,
        gravity: DVec3::ZERO,
        coulomb: CoulombConfig {
            method: CoulombMethod::Ddef(DdefConfig {
                samples,
                variant,
                ..Default::default()
            }),
            softening,
        },
        ..Default::default()
    }
}

/// Two charged particles joined by one spring.
pub fn pair() -> System {
    System::new(SystemDesc {
        positions: vec![DVec3::ZERO, DVec3::X],
        masses: vec![1.0; 2],
        charges: vec![1e-6; 2],
        springs: vec![Spring {
            i: 0,
            j: 1,
            stiffness: 10.0,
            rest_length: 0.5,
            damping: 0.0,
        }],
        ..Default::default()
    })
    .expect("a valid pair")
}

/// The default settings at h = 10 ms.
pub fn at_10_ms() -> Config {
    Config {
        dt: 0.01,
        ..Config::default()
    }
}

/// `n` unlinked charged particles (1 mg, 1e-12 C) on a line, 1 mm apart.
pub fn charged_line(n: usize) -> System {
    System::new(SystemDesc {
        positions: (0..n).map(|i| DVec3::X * (i as f64 * 1e-3)).collect(),
        masses: vec![1e-3; n],
        charges: vec![1e-12; n],
        ..Default::default()
    })
    .expect("unlinked charges on a line")
}

/// All-pairs Coulomb (softening 1 mm) under symplectic Euler at h = 0.1 ms.
pub fn all_pairs_config() -> Config {
    Config {
        integrator: Integrator::SymplecticEuler,
        dt: 1e-4,
        coulomb: CoulombConfig {
            method: CoulombMethod::AllPairs,
            softening: 1e-3,
        },
        ..Config::default()
    }
}

/// The charged ball the gradient and fit tests recover parameters of: an icosphere of
/// radius 1 m (subdivision 1), mass 0.05 kg, stiffness 2.5 N/m, damping 0.05, charge 2e-6
/// C, PLY frames every 10 steps; `integrator` is the body of its `[integrator]` table
/// (method, dt, steps, solver).
pub fn ball_scene(integrator: &str) -> String {
    format!(
        r#"
name = "ball"
[mesh]
kind = "icosphere"
radius = 1.0
subdivisions = 1
[material]
mass = 0.05
stiffness = 2.5
damping = 0.05
charge = 2e-6
[integrator]
{integrator}
[output]
every = 10
frames = "ply"
"#
    )
}
