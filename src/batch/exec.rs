//! Running a plan: one run after another into `OUT/<run name>/`, or on the GPU chunks of
//! runs stepped together as batches of worlds (or one worker per device, runs or chunks
//! dealt round-robin), with `runs.csv` (or the shard's table) rewritten atomically after
//! each run, one GPU device shared by all GPU runs of a worker, and resumption of an
//! interrupted batch.

use super::batched::{run_chunk, Done};
use super::gpu::{run_fresh, worker_devices, SharedGpu};
use super::options::BatchOptions;
use super::plan::Plan;
use super::planned::{plan_runs, units, Planned, Unit};
use super::record::{write_runs_csv, RunRecord, RunStatus};
use super::resume::clear;
use super::shard::Shard;
use super::{BatchError, PlanFile, RUNS_CSV};
use crate::output::lock::{shard_lock_path, FolderLock, LockKind};
use crate::output::OutputError;
use crate::run::error::one_line;
use std::path::{Path, PathBuf};

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
/// First the batch is planned once (`planned`): every run's scene is loaded with its
/// overrides, as the run would load it (one that does not load, an unknown key, a bad
/// value, a missing file, is [`BatchError::Plan`], and nothing is run or written), its
/// earlier folder judged, and the runs that can step together chunked; the workers run
/// those records.
///
/// With a shard, only the runs `i` with `i mod N = K` run, into the same folder, with
/// the table `runs.shard-K-of-N.csv`, after `plan.json` is written or found equal. With
/// several devices, worker `w` of `W` runs the runs `w, w + W, ...` on its own device;
/// the table is written by this thread, in plan order.
///
/// Resumption: a run whose folder holds a summary that vouches for it (the same scene,
/// every input and output unchanged: see `completed`) is not redone; its record is read
/// back. Any other folder of a planned run is cleared of what a run wrote there and the
/// run starts over; one holding anything else stops the batch before anything runs
/// ([`BatchError::ForeignFolder`]).
pub fn run_batch(plan: &Plan, options: &BatchOptions) -> Result<BatchReport, BatchError> {
    let owns = |i: usize| options.shard.as_ref().is_none_or(|s| s.shard.owns(i));
    let planned = plan_runs(plan, owns, options)?;
    let workers = worker_devices(options)?;
    std::fs::create_dir_all(&options.out).map_err(|source| OutputError::CreateDir {
        path: options.out.clone(),
        source,
    })?;
    let _locks = lock_batch(&options.out, options.shard.as_ref().map(|s| s.shard))?;
    let (plan, runs_csv) = match &options.shard {
        Some(s) => {
            if s.shard.count > plan.runs.len() {
                return Err(BatchError::Shard {
                    arg: s.shard.arg(),
                    message: format!(
                        "N must be at most the plan's {} runs (a shard beyond them would \
                         run nothing)",
                        plan.runs.len()
                    ),
                });
            }
            s.plan_file.write_or_check(&options.out)?;
            let mine = Plan {
                columns: plan.columns.clone(),
                runs: (plan.runs.iter().enumerate())
                    .filter(|(i, _)| owns(*i))
                    .map(|(_, r)| r.clone())
                    .collect(),
            };
            (mine, options.out.join(s.shard.table_name()))
        }
        None => {
            PlanFile::check_unsharded(&options.out, plan, options.steps)?;
            (plan.clone(), options.out.join(RUNS_CSV))
        }
    };
    let total = plan.runs.len();
    let (units, planned_for) = units(planned, options);
    // A worker beyond the units would have nothing to run.
    let workers = &workers[..workers.len().min(units.len().max(1))];
    // Round-robin: worker w runs the units w, w + W, w + 2W, ...
    let mut dealt: Vec<Vec<Unit>> = (0..workers.len()).map(|_| Vec::new()).collect();
    for (u, unit) in units.into_iter().enumerate() {
        dealt[u % workers.len()].push(unit);
    }
    let bar = crate::progress::bar(total as u64, "runs", options.quiet);
    let say = |line: String, failure: bool| match &bar {
        Some(b) => b.println(line),
        None if failure => eprintln!("{line}"),
        None if !options.quiet => println!("{line}"),
        None => {}
    };
    if workers.len() > 1 {
        say(workers_line(workers), false);
    }
    let mut slots: Vec<Option<RunRecord>> = vec![None; total];
    let mut done = 0;
    let mut opened = 0;
    let mut write_error = None;
    // The workers stop with the caller's own stop scope (a Python call's), not another's.
    let within = crate::interrupt::current();
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel::<Message>();
        let mut handles = Vec::with_capacity(workers.len());
        for (&device, mine) in workers.iter().zip(dealt) {
            let tx = tx.clone();
            let (plan, planned_for, within) = (&plan, planned_for.as_ref(), within.clone());
            handles.push(scope.spawn(move || {
                let _scope = within.as_ref().map(crate::interrupt::Scope::enter);
                let mut gpu = SharedGpu::new(options.backend, device);
                for unit in mine {
                    if crate::interrupt::requested() {
                        break;
                    }
                    let done = match unit {
                        Unit::One(run) => {
                            let i = run.i;
                            let (record, redo) = run_one(*run, plan, &mut gpu);
                            vec![Done {
                                i,
                                record,
                                redo,
                                note: gpu.note.take(),
                            }]
                        }
                        Unit::Batch(chunk) => run_chunk(chunk, plan, planned_for, &mut gpu),
                    };
                    let stop = done.into_iter().any(|d| {
                        tx.send(Message::Run {
                            i: d.i,
                            record: Box::new(d.record),
                            redo: d.redo,
                            note: d.note,
                        })
                        .is_err()
                    });
                    if stop {
                        break;
                    }
                }
                let _ = tx.send(Message::Opened(gpu.opened));
            }));
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
        // Join every worker to the end of its OS thread, not only of its closure (all
        // the scope itself waits for). A worker that opened a GPU device holds the EGL
        // library's per-thread state (wgpu probes the GL backend on that thread), which
        // the thread frees as it exits; had the process already gone on to exit(), EGL's
        // own teardown freed the same state: "double free or corruption (fasttop)" after
        // every output was written, about one GPU sweep in a thousand.
        for h in handles {
            if let Err(panic) = h.join() {
                std::panic::resume_unwind(panic);
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
            interrupted: records
                .iter()
                .filter(|r| r.status == RunStatus::Interrupted)
                .count(),
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

/// The batch folder's locks: the whole folder for a whole batch; for a shard, the folder
/// shared with the other shards and the shard itself alone (two processes running the
/// same shard would write the same runs).
fn lock_batch(out: &Path, shard: Option<Shard>) -> Result<Vec<FolderLock>, OutputError> {
    match shard {
        None => Ok(vec![FolderLock::folder(out, LockKind::Exclusive)?]),
        Some(shard) => {
            let folder = FolderLock::folder(out, LockKind::Shared)?;
            let table = shard.table_name();
            let own = FolderLock::file(out, &shard_lock_path(out, &table), LockKind::Exclusive)?;
            Ok(vec![folder, own])
        }
    }
}

/// `W workers: W0 on device 0, W1 on device 1`: how many workers share each device.
fn workers_line(workers: &[usize]) -> String {
    let devices = workers.iter().max().map_or(0, |d| d + 1);
    let per_device: Vec<String> = (0..devices)
        .map(|d| {
            let n = workers.iter().filter(|&&w| w == d).count();
            format!("{n} on device {d}")
        })
        .collect();
    format!("{} workers: {}", workers.len(), per_device.join(", "))
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

/// Runs one planned run, or reads it back when an earlier batch completed it. Also
/// returns why an earlier run in its folder was not trusted, when there was one.
fn run_one(run: Planned, plan: &Plan, gpu: &mut SharedGpu) -> (RunRecord, Option<String>) {
    let spec = &plan.runs[run.i];
    let redo = match run.verdict {
        Ok(done) => return (RunRecord::from_summary(spec, done, true), None),
        Err(why) => why,
    };
    if let Err(e) = clear(&run.dir) {
        return (RunRecord::failed(spec, one_line(&e)), redo);
    }
    (run_fresh(spec, &run.scene, &run.dir, gpu), redo)
}
