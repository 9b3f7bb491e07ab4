//! Batching a plan's runs on the GPU: which runs step together (the same [`BatchKey`],
//! chunked to what the adapter's limits and memory fit, at most [`MAX_CHUNK_WORLDS`]), and a
//! chunk run as one batch of worlds into the same folders, with the same files and values,
//! as one run after another would write.

use super::exec::{failed, from_summary, load, run_fresh, BatchOptions};
use super::gpu::SharedGpu;
use super::plan::Plan;
use super::record::{RunRecord, SummaryRecord};
use super::resume::{clear, completed};
use crate::gpu::{BatchKey, GpuWorlds, HeadlessOptions};
use crate::run::error::one_line;
use crate::run::{check_folder, drive_worlds, finish_folder, open_folder, BackendArg, RanOn};
use crate::scene::LoadedScene;
use crate::simulator::{GpuBatch, Worlds};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

/// The most runs `msc batch` steps as one batch of worlds, whatever the adapter would fit
/// (one `GpuWorlds` holds up to `gpu::MAX_BATCH_WORLDS`).
pub const MAX_CHUNK_WORLDS: usize = 256;

/// What a worker runs at once: one run, or a chunk of runs stepped as one batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Unit {
    One(usize),
    Batch(Vec<usize>),
}

/// One run done: its index in the plan, its record, why an earlier run in its folder was
/// not trusted, and a note to print.
pub(super) struct Done {
    pub i: usize,
    pub record: RunRecord,
    pub redo: Option<String>,
    pub note: Option<String>,
}

/// The units of `plan`: without batching (`--no-batch`, the CPU backend, `auto` without
/// a hardware adapter), one per run. With it, the runs to do are grouped by [`BatchKey`]
/// in plan order and each group chunked by what one batch fits on the adapter the batch
/// opens (a worker splits further if its own device fits fewer); a run that loads with
/// an error, is complete from an earlier batch, or has no key (DDEF) is a unit alone.
/// Units come in the order of their first run.
pub(super) fn units(plan: &Plan, options: &BatchOptions) -> Vec<Unit> {
    let alone = || (0..plan.runs.len()).map(Unit::One).collect();
    let allow_software = match options.backend {
        _ if options.no_batch => return alone(),
        BackendArg::Cpu => return alone(),
        BackendArg::Gpu => true,
        BackendArg::Auto => false,
    };
    let Ok((_, limits)) = crate::gpu::headless_adapter_limits(&HeadlessOptions { allow_software })
    else {
        return alone();
    };
    // (first run, unit) so units keep plan order; a group's open chunk with its scenes.
    let mut out: Vec<(usize, Unit)> = vec![];
    let mut open: HashMap<BatchKey, Vec<(usize, LoadedScene)>> = HashMap::new();
    let close = |chunk: Vec<(usize, LoadedScene)>, out: &mut Vec<(usize, Unit)>| {
        let ids: Vec<usize> = chunk.into_iter().map(|(i, _)| i).collect();
        match ids.as_slice() {
            [] => {}
            [i] => out.push((*i, Unit::One(*i))),
            _ => out.push((ids[0], Unit::Batch(ids))),
        }
    };
    for (i, spec) in plan.runs.iter().enumerate() {
        let dir = options.out.join(&spec.name);
        let key = load(spec, options.steps).ok().and_then(|scene| {
            let todo = completed(&dir, &scene, options.backend).is_err();
            let key = BatchKey::of(&scene.config).ok()?;
            todo.then_some((key, scene))
        });
        let Some((key, scene)) = key else {
            out.push((i, Unit::One(i)));
            continue;
        };
        let chunk = open.entry(key).or_default();
        chunk.push((i, scene));
        let worlds: Vec<_> = chunk.iter().map(|(_, s)| (&s.system, &s.config)).collect();
        let fit = GpuWorlds::fitting(&limits, &worlds).min(MAX_CHUNK_WORLDS);
        if fit < chunk.len() && chunk.len() > 1 {
            // The new run does not fit with the others: they are a chunk (a worker
            // splits it further if its device fits fewer).
            let mut full = std::mem::take(chunk);
            let last = full.split_off(full.len() - 1);
            close(full, &mut out);
            *chunk = last;
        }
        if chunk.len() >= MAX_CHUNK_WORLDS {
            close(std::mem::take(chunk), &mut out);
        }
    }
    for (_, chunk) in open {
        close(chunk, &mut out);
    }
    out.sort_by_key(|(first, _)| *first);
    out.into_iter().map(|(_, u)| u).collect()
}

/// A run about to start: loaded, its folder cleared.
struct Ready {
    i: usize,
    scene: LoadedScene,
    dir: PathBuf,
    redo: Option<String>,
}

/// Runs a chunk: each run is loaded and checked for completion as [`super::exec`] does
/// one run; the runs to do step together as batches of what the worker's device fits,
/// or one at a time where no GPU serves them or the batch cannot be built (with a note).
pub(super) fn run_chunk(
    ids: &[usize],
    plan: &Plan,
    options: &BatchOptions,
    gpu: &mut SharedGpu,
) -> Vec<Done> {
    let mut done = vec![];
    let mut ready = vec![];
    for &i in ids {
        let spec = &plan.runs[i];
        let dir = options.out.join(&spec.name);
        let mut finished = |record, redo| {
            done.push(Done {
                i,
                record,
                redo,
                note: None,
            })
        };
        let scene = match load(spec, options.steps) {
            Ok(s) => s,
            Err(e) => {
                finished(failed(spec, one_line(&e)), None);
                continue;
            }
        };
        let redo = match completed(&dir, &scene, options.backend) {
            Ok(s) => {
                finished(from_summary(spec, s, true), None);
                continue;
            }
            Err(why) => why,
        };
        if let Err(e) = clear(&dir) {
            finished(failed(spec, one_line(&e)), redo);
            continue;
        }
        ready.push(Ready {
            i,
            scene,
            dir,
            redo,
        });
    }
    let limits = match gpu.open() {
        Ok(Some(d)) => Some(d.device.limits()),
        _ => None,
    };
    let mut rest = ready.as_slice();
    while !rest.is_empty() {
        let n = match &limits {
            Some(limits) => {
                let worlds: Vec<_> = (rest.iter().take(MAX_CHUNK_WORLDS))
                    .map(|r| (&r.scene.system, &r.scene.config))
                    .collect();
                GpuWorlds::fitting(limits, &worlds).clamp(1, worlds.len())
            }
            None => 1,
        };
        let (now, later) = rest.split_at(n.min(MAX_CHUNK_WORLDS));
        if now.len() == 1 {
            done.extend(now.iter().map(|r| alone(r, plan, gpu)));
        } else {
            done.extend(batch(now, plan, gpu));
        }
        rest = later;
    }
    done
}

/// One run on its own, as `msc sweep --no-batch` runs it.
fn alone(r: &Ready, plan: &Plan, gpu: &mut SharedGpu) -> Done {
    let record = run_fresh(&plan.runs[r.i], &r.scene, &r.dir, gpu);
    Done {
        i: r.i,
        record,
        redo: r.redo.clone(),
        note: gpu.note.take(),
    }
}

/// Runs `now` as one batch of worlds on the worker's device: each run's folder and scene
/// copy, the worlds driven together, then each run's summary, as a run alone writes
/// them. A batch that cannot be built runs one at a time, with a note.
fn batch(now: &[Ready], plan: &Plan, gpu: &mut SharedGpu) -> Vec<Done> {
    let mut done: Vec<Done> = vec![];
    let Some(device) = gpu
        .device
        .as_ref()
        .map(|d| (d.device.clone(), d.queue.clone()))
    else {
        return now.iter().map(|r| alone(r, plan, gpu)).collect();
    };
    let mut started = vec![];
    for r in now {
        let opened = check_folder(&r.scene, &r.dir).and_then(|()| open_folder(&r.scene, &r.dir));
        match opened {
            Ok(d) => started.push((r, d)),
            Err(e) => done.push(Done {
                i: r.i,
                record: failed(&plan.runs[r.i], one_line(&e)),
                redo: r.redo.clone(),
                note: None,
            }),
        }
    }
    // A panic inside the backend (wgpu reports some device errors by panicking) fails
    // the batch's runs, not the whole plan; the device is not reused.
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let setup = Instant::now();
        let worlds: Vec<_> = (started.iter())
            .map(|(r, _)| (&r.scene.system, &r.scene.config))
            .collect();
        let gpu_worlds = GpuWorlds::new(&device.0, &device.1, &worlds)?;
        let setup_seconds = setup.elapsed().as_secs_f64();
        let mut worlds = GpuBatch::new(gpu_worlds);
        let on = RanOn {
            backend: worlds.backend_name(),
            adapter: worlds.worlds().adapter().cloned(),
            setup_seconds,
            ddef: None,
        };
        let runs = (started.iter_mut()).map(|(r, d)| (&r.scene, d)).collect();
        let driven = drive_worlds(&mut worlds, runs, None);
        Ok::<_, crate::gpu::GpuError>(
            started
                .iter()
                .zip(driven)
                .enumerate()
                .map(|(w, ((r, d), driven))| {
                    let on = RanOn {
                        ddef: worlds.worlds().ddef_counts(w),
                        ..on.clone()
                    };
                    driven.and_then(|driven| finish_folder(&r.scene, d, driven, on))
                })
                .collect::<Vec<_>>(),
        )
    }));
    let outcomes = match ran {
        Ok(Ok(outcomes)) => outcomes,
        Ok(Err(e)) => {
            let note = format!(
                "note: {} runs could not step as one batch ({e}); running them one at a time",
                started.len()
            );
            let mut alone: Vec<Done> = (started.iter()).map(|(r, _)| alone(r, plan, gpu)).collect();
            if let Some(first) = alone.first_mut() {
                first.note = Some(match first.note.take() {
                    Some(n) => format!("{note}\n{n}"),
                    None => note,
                });
            }
            done.extend(alone);
            return done;
        }
        Err(panic) => {
            gpu.device = None;
            let what = super::exec::panic_text(&*panic);
            let failures = started.iter().map(|(r, _)| Done {
                i: r.i,
                record: failed(&plan.runs[r.i], format!("internal error (panic): {what}")),
                redo: r.redo.clone(),
                note: None,
            });
            done.extend(failures);
            return done;
        }
    };
    let mut note = Some(format!(
        "note: {} runs stepped together as one batch of worlds",
        started.len()
    ));
    for ((r, _), outcome) in started.iter().zip(outcomes) {
        let spec = &plan.runs[r.i];
        let record = match outcome {
            Ok(o) => match SummaryRecord::from_summary(&o.summary) {
                Some(s) => from_summary(spec, s, false),
                None => failed(spec, "the run's summary could not be read back".into()),
            },
            Err(e) => {
                if e.is_device_loss() {
                    gpu.device = None;
                }
                failed(spec, one_line(&e))
            }
        };
        done.push(Done {
            i: r.i,
            record,
            redo: r.redo.clone(),
            note: note.take(),
        });
    }
    done
}
