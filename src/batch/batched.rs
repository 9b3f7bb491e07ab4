//! Running a chunk of planned runs on the GPU as batches of worlds, into the same folders,
//! with the same files and values, as one run after another would write.

use super::gpu::{panic_text, run_fresh, SharedGpu};
use super::plan::Plan;
use super::planned::{fitting, Planned, MAX_CHUNK_WORLDS};
use super::record::{RunRecord, SummaryRecord};
use super::resume::clear;
use crate::gpu::GpuWorlds;
use crate::run::error::{one_line, RunError};
use crate::run::{check_folder, drive_worlds, finish_folder, open_folder, RanOn};
use crate::simulator::{GpuBatch, SimError, Worlds};
use std::time::Instant;

/// One run done: its index in the plan, its record, why an earlier run in its folder was
/// not trusted, and a note to print.
pub(super) struct Done {
    pub i: usize,
    pub record: RunRecord,
    pub redo: Option<String>,
    pub note: Option<String>,
}

/// A run about to start: planned, its folder cleared.
struct Ready {
    run: Planned,
    redo: Option<String>,
}

/// Runs a chunk of planned runs, none complete: their folders cleared, they step together
/// as batches of what the worker's device fits (the chunk as planned when the device has
/// the limits it was fitted to), or one at a time where no GPU serves them or the batch
/// cannot be built (with a note).
pub(super) fn run_chunk(
    chunk: Vec<Planned>,
    plan: &Plan,
    planned_for: Option<&wgpu::Limits>,
    gpu: &mut SharedGpu,
) -> Vec<Done> {
    let mut done = vec![];
    let mut ready = vec![];
    for run in chunk {
        let redo = run.verdict.as_ref().err().cloned().flatten();
        if let Err(e) = clear(&run.dir) {
            done.push(Done {
                i: run.i,
                record: RunRecord::failed(&plan.runs[run.i], one_line(&e)),
                redo,
                note: None,
            });
            continue;
        }
        ready.push(Ready { run, redo });
    }
    let limits = match gpu.open() {
        Ok(Some(d)) => Some(d.device.limits()),
        _ => None,
    };
    let mut rest = ready.as_slice();
    while !rest.is_empty() {
        let n = match &limits {
            // Fitted when the batch was planned, on a device with these limits.
            Some(l) if Some(l) == planned_for => rest.len().min(MAX_CHUNK_WORLDS),
            Some(l) => fitting(l, rest.iter().map(|r| &r.run)),
            None => 1,
        };
        let (now, later) = rest.split_at(n.min(rest.len()));
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
    let record = run_fresh(&plan.runs[r.run.i], &r.run.scene, &r.run.dir, gpu);
    Done {
        i: r.run.i,
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
        let opened = check_folder(&r.run.scene, &r.run.dir)
            .and_then(|()| open_folder(&r.run.scene, &r.run.dir));
        match opened {
            Ok(d) => started.push((r, d)),
            Err(e) => done.push(Done {
                i: r.run.i,
                record: RunRecord::failed(&plan.runs[r.run.i], one_line(&e)),
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
            .map(|(r, _)| (&r.run.scene.system, &r.run.scene.config))
            .collect();
        // A world's error names its run: the chunk's world index alone means nothing to
        // the user.
        let names: Vec<_> = (started.iter())
            .map(|(r, _)| Some(format!("run '{}'", plan.runs[r.run.i].name)))
            .collect();
        let gpu_worlds = GpuWorlds::new_named(&device.0, &device.1, &worlds, &names)?;
        let setup_seconds = setup.elapsed().as_secs_f64();
        let mut worlds = GpuBatch::new(gpu_worlds);
        let on = RanOn {
            backend: worlds.backend_name(),
            adapter: worlds.worlds().adapter().cloned(),
            setup_seconds,
            ddef: None,
        };
        let runs = (started.iter_mut())
            .map(|(r, d)| (&r.run.scene, d))
            .collect();
        let driven = drive_worlds(&mut worlds, runs, None);
        Ok::<_, crate::gpu::GpuError>(
            started
                .iter()
                .zip(driven)
                .enumerate()
                .map(|(w, ((r, d), driven))| {
                    // A failed read fails the run: read as "no DDEF" its summary would lie.
                    let ddef = worlds.worlds().ddef_counts(w).map_err(|e| RunError::Sim {
                        step: r.run.scene.config.steps,
                        source: SimError::Gpu(e),
                    });
                    driven.and_then(|driven| {
                        let on = RanOn {
                            ddef: ddef?,
                            ..on.clone()
                        };
                        finish_folder(&r.run.scene, d, driven, on)
                    })
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
            // Each run alone opens its folder again: the batch's hold on it is released
            // first (held, it refused every run as written by another msc process).
            let runs: Vec<&Ready> = started.into_iter().map(|(r, _)| r).collect();
            let mut alone: Vec<Done> = runs.into_iter().map(|r| alone(r, plan, gpu)).collect();
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
            let what = panic_text(&*panic);
            let failures = started.iter().map(|(r, _)| Done {
                i: r.run.i,
                record: RunRecord::failed(
                    &plan.runs[r.run.i],
                    format!("internal error (panic): {what}"),
                ),
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
        let spec = &plan.runs[r.run.i];
        let record = match outcome {
            Ok(o) => match SummaryRecord::from_summary(&o.summary) {
                Some(s) => RunRecord::from_summary(spec, s, false),
                None => RunRecord::failed(spec, "the run's summary could not be read back".into()),
            },
            Err(e) => {
                if e.is_device_loss() {
                    gpu.device = None;
                }
                RunRecord::failed(spec, one_line(&e))
            }
        };
        done.push(Done {
            i: r.run.i,
            record,
            redo: r.redo.clone(),
            note: note.take(),
        });
    }
    done
}
