//! Running a plan: one run after another into `OUT/<run name>/` (or one worker per device,
//! runs dealt round-robin), with `runs.csv` (or the shard's table) rewritten atomically
//! after each, one GPU device shared by all GPU runs of a worker, and resumption of an
//! interrupted batch.

use super::plan::{Plan, RunSpec};
use super::planfile::PlanFile;
use super::record::{write_runs_csv, RunRecord, RunStatus, SummaryRecord};
use super::shard::Shard;
use super::{BatchError, RUNS_CSV};
use crate::cli::backend::{self, Backend, BackendArg};
use crate::cli::error::render;
use crate::cli::run::run_scene;
use crate::cli::scene_args::{self, SceneArgs};
use crate::cli::CliError;
use crate::config::Config;
use crate::digest::sha256_hex;
use crate::gpu::{device_adapters, open_headless_device_on, HeadlessDevice};
use crate::gpu::{GpuError, GpuSolver, HeadlessOptions};
use crate::model::System;
use crate::output::run_dir::{check_outputs, ENERGY_FILE, FRAMES_DIR, SCENE_FILE, SUMMARY_FILE};
use crate::output::OutputError;
use crate::scene::LoadedScene;
use crate::sim::SimError;
use std::path::{Path, PathBuf};

/// How to run a plan.
#[derive(Clone, Debug)]
pub struct BatchOptions {
    /// The batch folder: one sub-folder per run, and `runs.csv`.
    pub out: PathBuf,
    pub backend: BackendArg,
    /// Overrides every run's step count, as `msc run --steps`.
    pub steps: Option<u64>,
    /// No per-run lines and no progress bar (failures are still reported on stderr).
    pub quiet: bool,
    /// Run only this shard's runs, with its own table, after writing (or checking)
    /// `plan.json`.
    pub shard: Option<ShardRun>,
    /// How many GPU devices run the batch at once.
    pub devices: Devices,
}

/// A sharded batch: the shard, and the plan file every shard writes.
#[derive(Clone, Debug)]
pub struct ShardRun {
    pub shard: Shard,
    pub plan_file: PlanFile,
}

/// `--devices`: one worker per device, runs dealt round-robin in plan order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Devices {
    /// One device (the best adapter), the default.
    #[default]
    One,
    /// Every usable device of [`crate::gpu::device_adapters`].
    All,
    /// N workers on the usable devices, worker `w` on device `w mod D` (more workers
    /// than devices share them).
    Count(usize),
}

/// What a batch did.
#[derive(Debug)]
pub struct BatchReport {
    /// One record per run, in plan order.
    pub records: Vec<RunRecord>,
    /// GPU devices opened: 1 for a whole GPU batch (more only after a lost device), 0 on
    /// the CPU.
    pub devices_opened: usize,
    pub runs_csv: PathBuf,
}

impl BatchReport {
    pub fn count(&self, label: &str) -> usize {
        self.records
            .iter()
            .filter(|r| r.status.label() == label)
            .count()
    }
    /// `Err(RunsFailed)` when any run failed or diverged.
    pub fn check(&self) -> Result<(), BatchError> {
        let (failed, diverged) = (self.count("failed"), self.count("diverged"));
        if failed + diverged == 0 {
            return Ok(());
        }
        Err(BatchError::RunsFailed {
            failed,
            diverged,
            total: self.records.len(),
            csv: self.runs_csv.clone(),
        })
    }
}

/// Runs every run of `plan` into `options.out`. A run that fails or diverges is recorded
/// and the batch goes on; only an unwritable batch folder or `runs.csv`, or a stop
/// request ([`BatchError::Interrupted`], after the run under way wrote its outputs),
/// stops it.
///
/// First every run's scene is loaded with its overrides, as the run will load it: one
/// that does not load (an unknown key, a bad value, a missing file) is
/// [`BatchError::Plan`], and nothing is run or written.
///
/// With a shard, only the runs `i` with `i mod N = K` run, into the same folder, with
/// the table `runs.shard-K-of-N.csv`, after `plan.json` is written or found equal. With
/// several devices, worker `w` of `W` runs the runs `w, w + W, ...` on its own device;
/// the table is written by this thread, in plan order.
///
/// Resumption: a run whose folder holds a summary that vouches for it (the same scene,
/// every input and output unchanged: see `completed`) is not redone; its record is read
/// back. Any other folder of a planned run is cleared and the run starts over.
pub fn run_batch(plan: &Plan, options: &BatchOptions) -> Result<BatchReport, BatchError> {
    check_plan(plan, options.steps)?;
    let workers = worker_devices(options)?;
    std::fs::create_dir_all(&options.out).map_err(|source| OutputError::CreateDir {
        path: options.out.clone(),
        source,
    })?;
    let (plan, runs_csv) = match &options.shard {
        Some(s) => {
            s.plan_file.write_or_check(&options.out)?;
            let mine = Plan {
                columns: plan.columns.clone(),
                runs: (plan.runs.iter().enumerate())
                    .filter(|(i, _)| s.shard.owns(*i))
                    .map(|(_, r)| r.clone())
                    .collect(),
            };
            (mine, options.out.join(s.shard.table_name()))
        }
        None => (plan.clone(), options.out.join(RUNS_CSV)),
    };
    let total = plan.runs.len();
    let bar = crate::progress::bar(total as u64, "runs", options.quiet);
    let say = |line: String, failure: bool| match &bar {
        Some(b) => b.println(line),
        None if failure => eprintln!("{line}"),
        None if !options.quiet => println!("{line}"),
        None => {}
    };
    if workers.len() > 1 {
        say(
            format!(
                "{} workers: {}",
                workers.len(),
                workers
                    .iter()
                    .enumerate()
                    .map(|(w, d)| format!("{w} on device {d}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            false,
        );
    }
    let mut slots: Vec<Option<RunRecord>> = vec![None; total];
    let mut done = 0;
    let mut opened = 0;
    let mut write_error = None;
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel::<Message>();
        let count = workers.len();
        for (w, &device) in workers.iter().enumerate() {
            let tx = tx.clone();
            let plan = &plan;
            scope.spawn(move || {
                let mut gpu = SharedGpu::new(options.backend, device);
                // Round-robin: worker w runs the plan's runs w, w + W, w + 2W, ...
                for i in (w..plan.runs.len()).step_by(count) {
                    if crate::interrupt::requested() {
                        break;
                    }
                    let (record, redo) = run_one(&plan.runs[i], options, &mut gpu);
                    let note = gpu.note.take();
                    let stop = tx
                        .send(Message::Run {
                            i,
                            record: Box::new(record),
                            redo,
                            note,
                        })
                        .is_err();
                    if stop {
                        break;
                    }
                }
                let _ = tx.send(Message::Opened(gpu.opened));
            });
        }
        drop(tx);
        for message in rx {
            let (i, record, redo, note) = match message {
                Message::Opened(n) => {
                    opened += n;
                    continue;
                }
                Message::Run {
                    i,
                    record,
                    redo,
                    note,
                } => (i, record, redo, note),
            };
            let spec = &plan.runs[i];
            if let Some(why) = redo {
                say(format!("note: {}: redone: {why}", spec.name), false);
            }
            if let Some(note) = note {
                say(note, false);
            }
            let failure = record.status != RunStatus::Ok;
            done += 1;
            say(
                format!("[{done}/{total}] {}: {}", spec.name, describe(&record)),
                failure,
            );
            if let Some(b) = &bar {
                b.set_message(spec.name.clone());
            }
            slots[i] = Some(*record);
            // The table lists the runs done so far, in plan order.
            let so_far: Vec<RunRecord> = slots.iter().flatten().cloned().collect();
            if let Err(e) = write_runs_csv(&runs_csv, &plan, &so_far) {
                // Dropping the receiver stops the workers after their run under way.
                write_error = Some(e);
                break;
            }
            if let Some(b) = &bar {
                b.inc(1);
            }
        }
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if let Some(e) = write_error {
        return Err(e.into());
    }
    let records: Vec<RunRecord> = slots.into_iter().flatten().collect();
    // A stop request ends the runs under way (recorded `interrupted`) and the batch; a
    // rerun redoes those runs and runs the rest.
    if crate::interrupt::requested() {
        return Err(BatchError::Interrupted {
            done: records.len(),
            total,
            csv: runs_csv,
        });
    }
    Ok(BatchReport {
        records,
        devices_opened: opened,
        runs_csv,
    })
}

/// What a worker tells the thread that keeps the table.
enum Message {
    Run {
        i: usize,
        record: Box<RunRecord>,
        redo: Option<String>,
        note: Option<String>,
    },
    /// The worker is done; it opened this many devices.
    Opened(usize),
}

/// The device index of each worker: one worker on device 0 unless `--devices` asks for
/// more. The CPU backend has one worker; `auto` without a hardware adapter too (it runs
/// every run on the CPU).
fn worker_devices(options: &BatchOptions) -> Result<Vec<usize>, BatchError> {
    if options.devices == Devices::One || options.backend == BackendArg::Cpu {
        return Ok(vec![0]);
    }
    let auto = options.backend == BackendArg::Auto;
    let found = match device_adapters(&HeadlessOptions {
        allow_software: !auto,
    }) {
        Ok(found) => found.len(),
        Err(GpuError::NoAdapter(_)) if auto => return Ok(vec![0]),
        Err(e) => return Err(BatchError::Devices(e.to_string())),
    };
    let workers = match options.devices {
        Devices::All => found,
        Devices::Count(n) => n,
        Devices::One => 1,
    };
    Ok((0..workers.max(1)).map(|w| w % found.max(1)).collect())
}

/// One line for the run's outcome.
fn describe(r: &RunRecord) -> String {
    let earlier = if r.skipped {
        " (complete from an earlier batch, not redone)"
    } else {
        ""
    };
    match (&r.status, &r.summary) {
        (RunStatus::Failed(why), _) => format!("failed: {why}"),
        (status, Some(s)) => format!(
            "{}{earlier}: {} of {} steps on {} in {:.3} s",
            status.label(),
            s.steps,
            s.steps_requested,
            s.backend,
            s.wall_seconds
        ),
        (status, None) => format!("{}{earlier}", status.label()),
    }
}

/// An error as one line: its message and causes, joined by `: `.
pub(super) fn reason(e: &(dyn std::error::Error + 'static)) -> String {
    render(e)
        .trim_start_matches("error: ")
        .replace("\n  caused by: ", ": ")
}

fn failed(spec: &RunSpec, why: String) -> RunRecord {
    RunRecord {
        name: spec.name.clone(),
        columns: spec.columns.clone(),
        status: RunStatus::Failed(why),
        summary: None,
        skipped: false,
    }
}

pub(super) fn from_summary(spec: &RunSpec, summary: SummaryRecord, skipped: bool) -> RunRecord {
    RunRecord {
        name: spec.name.clone(),
        columns: spec.columns.clone(),
        status: if summary.interrupted {
            RunStatus::Interrupted
        } else if summary.finite {
            RunStatus::Ok
        } else {
            RunStatus::Diverged
        },
        summary: Some(summary),
        skipped,
    }
}

/// Loads every run's scene as [`run_one`] will, before anything runs.
pub fn check_plan(plan: &Plan, steps: Option<u64>) -> Result<(), BatchError> {
    for spec in &plan.runs {
        scene_args::load(&scene_args_of(spec), steps).map_err(|e| BatchError::Plan {
            run: spec.name.clone(),
            source: Box::new(e),
        })?;
    }
    Ok(())
}

pub(super) fn scene_args_of(spec: &RunSpec) -> SceneArgs {
    SceneArgs {
        scene: spec.scene.clone(),
        set: spec.set.clone(),
    }
}

/// Runs one planned run, or reads it back when an earlier batch completed it. Also
/// returns why an earlier run in its folder was not trusted, when there was one.
fn run_one(
    spec: &RunSpec,
    options: &BatchOptions,
    gpu: &mut SharedGpu,
) -> (RunRecord, Option<String>) {
    let dir = options.out.join(&spec.name);
    // Checked before the batch started; a file may have changed since.
    let scene = match scene_args::load(&scene_args_of(spec), options.steps) {
        Ok(s) => s,
        Err(e) => return (failed(spec, reason(&e)), None),
    };
    let redo = match completed(&dir, &scene, options.backend) {
        Ok(done) => return (from_summary(spec, done, true), None),
        Err(why) => why,
    };
    if let Err(e) = clear(&dir) {
        return (failed(spec, reason(&e)), redo);
    }
    (run_fresh(spec, &scene, &dir, gpu), redo)
}

fn run_fresh(spec: &RunSpec, scene: &LoadedScene, dir: &Path, gpu: &mut SharedGpu) -> RunRecord {
    // A panic inside a backend (wgpu reports some device errors by panicking) must not
    // end the batch: record it, and do not reuse a device that may be broken.
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_scene(scene, dir, false, |system, config| {
            gpu.start(system, config)
        })
    }));
    match ran {
        Ok(Ok(outcome)) => match SummaryRecord::from_summary(&outcome.summary) {
            Some(s) => from_summary(spec, s, false),
            None => failed(spec, "the run's summary could not be read back".into()),
        },
        Ok(Err(e)) => {
            if is_device_loss(&e) {
                gpu.device = None;
            }
            failed(spec, reason(&e))
        }
        Err(panic) => {
            gpu.device = None;
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            failed(spec, format!("internal error (panic): {what}"))
        }
    }
}

/// The earlier run in `dir`, when its `summary.json` vouches that it is complete and ran
/// exactly this scene:
/// - the summary parses (one from before sizes and hashes were recorded does not), and
///   the run finished: not interrupted, and all its steps done unless it diverged (a
///   diverged run is complete: rerunning it would diverge again);
/// - with `--backend cpu` or `gpu`, it ran on that backend;
/// - the scene name, the resolved scene's hash and every input file's size and hash are
///   those of `scene` now;
/// - it lists `energy.csv`, `scene.toml` and as many frames as it wrote, and each listed
///   file exists with its recorded size and hash.
///
/// Otherwise `Err` says why, or is `None` when there was no earlier run in `dir`.
pub(super) fn completed(
    dir: &Path,
    scene: &LoadedScene,
    backend: BackendArg,
) -> Result<SummaryRecord, Option<String>> {
    if !dir.exists() {
        return Err(None);
    }
    let why = |s: &str| Err(Some(s.to_string()));
    let summary_path = dir.join(SUMMARY_FILE);
    if !summary_path.is_file() {
        return why("no summary.json (the earlier run did not finish)");
    }
    let Some(s) = SummaryRecord::read(&summary_path) else {
        return why("summary.json is unreadable or from an older msc");
    };
    if s.interrupted {
        return why("the earlier run was interrupted");
    }
    if s.finite && s.steps != s.steps_requested {
        return why("the earlier run did not do all its steps");
    }
    let same_backend = match backend {
        BackendArg::Cpu => s.backend == "cpu",
        BackendArg::Gpu => s.backend != "cpu",
        BackendArg::Auto => true,
    };
    if !same_backend {
        return Err(Some(format!(
            "the earlier run used the backend {}",
            s.backend
        )));
    }
    if s.scene != scene.name || s.scene_sha256 != sha256_hex(scene.resolved_toml.as_bytes()) {
        return why("the resolved scene changed");
    }
    if s.inputs != scene.inputs {
        let changed = scene
            .inputs
            .iter()
            .find(|d| !s.inputs.contains(d))
            .or_else(|| s.inputs.iter().find(|d| !scene.inputs.contains(d)))
            .map_or("an input", |d| d.path.as_str());
        return Err(Some(format!("{changed} changed since the earlier run")));
    }
    let listed = |name: &str| s.outputs.iter().find(|d| d.path == name);
    let frames = s
        .outputs
        .iter()
        .filter(|d| d.path.starts_with(&format!("{FRAMES_DIR}/")))
        .count();
    let scene_copy_ok = listed(SCENE_FILE).is_some_and(|d| d.sha256 == s.scene_sha256);
    if listed(ENERGY_FILE).is_none() || !scene_copy_ok || frames as u64 != s.frames {
        return why("summary.json does not vouch for every output");
    }
    check_outputs(dir, &s.outputs).map_err(Some)?;
    Ok(s)
}

/// Removes an incomplete run's folder, so nothing of it is mistaken for the new run's.
fn clear(dir: &Path) -> Result<(), OutputError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(OutputError::Write {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

fn is_device_loss(e: &CliError) -> bool {
    matches!(
        e,
        CliError::Gpu(GpuError::DeviceLost(_))
            | CliError::Sim {
                source: SimError::Gpu(GpuError::DeviceLost(_)),
                ..
            }
    )
}

/// The backend of a batch's runs: one GPU device, opened at the first GPU run and shared by
/// every later one; `auto` falls back to the CPU as `msc run` does.
struct SharedGpu {
    choice: BackendArg,
    /// Which of [`device_adapters`] to open.
    adapter: usize,
    device: Option<HeadlessDevice>,
    opened: usize,
    /// `auto` found no hardware adapter: every run uses the CPU.
    cpu_only: bool,
    /// A note to print once.
    note: Option<String>,
}

impl SharedGpu {
    fn new(choice: BackendArg, adapter: usize) -> Self {
        Self {
            choice,
            adapter,
            device: None,
            opened: 0,
            cpu_only: choice == BackendArg::Cpu,
            note: None,
        }
    }

    fn start(&mut self, system: &System, config: &Config) -> Result<Backend, CliError> {
        let auto = self.choice == BackendArg::Auto;
        if self.cpu_only {
            return backend::start(BackendArg::Cpu, system, config);
        }
        if self.device.is_none() {
            let options = HeadlessOptions {
                allow_software: !auto,
            };
            match open_headless_device_on(&options, self.adapter) {
                Ok(d) => {
                    self.device = Some(d);
                    self.opened += 1;
                }
                Err(e @ GpuError::NoAdapter(_)) if auto => {
                    self.cpu_only = true;
                    self.note = Some(format!(
                        "note: {e}; running the CPU reference for every run \
                         (--backend gpu also accepts software adapters)"
                    ));
                    return backend::start(BackendArg::Cpu, system, config);
                }
                Err(e) => return Err(CliError::Gpu(e)),
            }
        }
        let d = self.device.as_ref().expect("opened above");
        match GpuSolver::new(&d.device, &d.queue, system, config) {
            Ok(solver) => {
                let adapter = solver.adapter().cloned();
                Ok(Backend {
                    sim: Box::new(solver),
                    adapter,
                    fallback_note: None,
                })
            }
            // As `msc run --backend auto`: what the GPU solver lacks, the CPU can do.
            Err(e @ GpuError::Unsupported(_)) if auto => {
                self.note = Some(format!("note: {e}; running this one on the CPU reference"));
                backend::start(BackendArg::Cpu, system, config)
            }
            Err(e) => Err(CliError::Gpu(e)),
        }
    }
}
