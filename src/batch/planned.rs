//! A batch planned once, before anything runs: every run's scene loaded as `msc run`
//! loads it, whether an earlier batch completed it (its outputs hashed once), and the key
//! of the batch of worlds it may join ([`Planned`]); then the units the workers run (one
//! run, or a chunk of runs stepped together), fitted to the adapter once ([`units`]).
//! The records are handed down to the workers, which load, hash and fit nothing again.

use super::options::BatchOptions;
use super::plan::{Plan, RunSpec};
use super::record::SummaryRecord;
use super::resume::{completed, foreign_entries};
use super::BatchError;
use crate::gpu::{BatchKey, GpuWorlds, HeadlessOptions};
use crate::output::OutputError;
use crate::run::{self, BackendArg, RunError};
use crate::scene::LoadedScene;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The most runs `msc batch` steps as one batch of worlds, whatever the adapter would fit
/// (one `GpuWorlds` holds up to `gpu::MAX_BATCH_WORLDS`).
pub const MAX_CHUNK_WORLDS: usize = 256;

/// One run of the plan, resolved once.
pub(super) struct Planned {
    /// Its index in the plan the batch runs (a shard's own runs).
    pub(super) i: usize,
    pub(super) dir: PathBuf,
    pub(super) scene: LoadedScene,
    /// What an earlier batch left in its folder: a complete run (its summary; not
    /// redone), or why the folder is not trusted (`None`: there was no earlier run).
    pub(super) verdict: Result<SummaryRecord, Option<String>>,
    /// The batch of worlds it may join; `None`: it runs alone (DDEF).
    pub(super) key: Option<BatchKey>,
}

/// A planned run's scene, loaded as `msc run` loads it, and its configuration checked
/// against its system as every backend checks it before the first step
/// ([`crate::Config::validate_for`]: the load leaves out the drag's stability, which
/// needs the masses), so that a run the backend would refuse stops the plan instead.
pub(super) fn load(spec: &RunSpec, steps: Option<u64>) -> Result<LoadedScene, RunError> {
    let scene = run::load::load(&spec.scene, &spec.set, steps)?;
    // The error the run itself would stop with.
    (scene.config.validate_for(&scene.system)).map_err(RunError::Config)?;
    Ok(scene)
}

/// Loads every run's scene as the batch will, before anything runs (for a plan checked
/// without running it, e.g. before a Slurm submission).
pub fn check_plan(plan: &Plan, steps: Option<u64>, out: &Path) -> Result<(), BatchError> {
    for spec in &plan.runs {
        let scene = load(spec, steps).map_err(|e| not_loaded(spec, e))?;
        check_inputs(plan, out, &scene)?;
    }
    Ok(())
}

/// No output of the batch in `out` may replace a file `scene` reads.
fn check_inputs(plan: &Plan, out: &Path, scene: &LoadedScene) -> Result<(), BatchError> {
    for (input, what) in crate::output::inputs::of_scene(scene) {
        check_input(plan, out, input, what)?;
    }
    Ok(())
}

/// [`OutputError::WouldOverwriteInput`] when the batch in `out` would replace or clear
/// `input`: a file inside a planned run's folder (cleared before the run), or the
/// batch's own files (`runs.csv`, a shard's table, `plan.json`, the Slurm script).
pub fn check_input(
    plan: &Plan,
    out: &Path,
    input: &Path,
    what: &'static str,
) -> Result<(), BatchError> {
    use crate::output::inputs::{inside, same_file};
    let refused = || {
        Err(BatchError::Output(OutputError::WouldOverwriteInput {
            path: input.to_path_buf(),
            what,
            option: "--out",
        }))
    };
    if plan.runs.iter().any(|r| inside(input, &out.join(&r.name))) {
        return refused();
    }
    let batch_files = [
        super::RUNS_CSV,
        super::planfile::PLAN_FILE,
        super::slurm::SCRIPT_FILE,
    ];
    if batch_files.iter().any(|f| same_file(&out.join(f), input)) {
        return refused();
    }
    let is_shard_table = input
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("runs.shard-"));
    if is_shard_table && input.parent().is_some_and(|p| same_file(p, out)) {
        return refused();
    }
    Ok(())
}

/// A planned run whose scene does not load: nothing is run or written.
fn not_loaded(spec: &RunSpec, e: RunError) -> BatchError {
    BatchError::Plan {
        run: spec.name.clone(),
        source: Box::new(e),
    }
}

/// Loads the scene of every run of `plan` (one that does not load is
/// [`BatchError::Plan`], and nothing is run or written) and plans the runs `keep` owns:
/// their verdict and batch key, in plan order, numbered from 0.
pub(super) fn plan_runs(
    plan: &Plan,
    keep: impl Fn(usize) -> bool,
    options: &BatchOptions,
) -> Result<Vec<Planned>, BatchError> {
    let mut planned = Vec::new();
    for (i, spec) in plan.runs.iter().enumerate() {
        let scene = load(spec, options.steps).map_err(|e| not_loaded(spec, e))?;
        check_inputs(plan, &options.out, &scene)?;
        if !keep(i) {
            continue;
        }
        let dir = options.out.join(&spec.name);
        let verdict = completed(&dir, &scene, options.backend);
        if let Err(Some(_)) = &verdict {
            // An untrusted folder is cleared before the run: only if msc wrote it all. (A
            // file in its place, or a folder that cannot be listed, fails the run alone.)
            let found = foreign_entries(&dir).unwrap_or_default();
            if !found.is_empty() {
                return Err(BatchError::ForeignFolder {
                    run: spec.name.clone(),
                    path: dir,
                    found: shown(&found),
                });
            }
        }
        let key = BatchKey::of(&scene.config).ok();
        planned.push(Planned {
            i: planned.len(),
            dir,
            scene,
            verdict,
            key,
        });
    }
    Ok(planned)
}

/// A few entry names, for a message.
fn shown(names: &[String]) -> String {
    crate::display::first_of(names, 5, ", ")
}

/// What a worker runs at once: one run, or a chunk of runs stepped as one batch.
pub(super) enum Unit {
    /// Boxed: a `Planned` holds a whole resolved scene, many times a `Vec`'s size.
    One(Box<Planned>),
    Batch(Vec<Planned>),
}

/// The units of `planned`, in the order of their first run, and the adapter limits the
/// chunks were fitted to. Without batching (`--no-batch`, the CPU backend, `auto` without
/// a hardware adapter), one per run. With it, the runs to do are grouped by
/// [`BatchKey`] in plan order and each group cut into the longest chunks one batch fits
/// on the adapter a batch opens (at most [`MAX_CHUNK_WORLDS`]; a worker whose device has
/// other limits cuts further); a run that is complete or has no key is a unit alone.
pub(super) fn units(
    planned: Vec<Planned>,
    options: &BatchOptions,
) -> (Vec<Unit>, Option<wgpu::Limits>) {
    let alone = |planned: Vec<Planned>| {
        planned
            .into_iter()
            .map(|p| Unit::One(Box::new(p)))
            .collect()
    };
    let allow_software = match options.backend {
        _ if options.no_batch => return (alone(planned), None),
        BackendArg::Cpu => return (alone(planned), None),
        BackendArg::Gpu => true,
        BackendArg::Auto => false,
    };
    let Ok((_, limits)) = crate::gpu::headless_adapter_limits(&HeadlessOptions { allow_software })
    else {
        return (alone(planned), None);
    };
    // (first run, unit) so units keep plan order.
    let mut out: Vec<(usize, Unit)> = vec![];
    let mut groups: Vec<(BatchKey, Vec<Planned>)> = vec![];
    let mut group_of: HashMap<BatchKey, usize> = HashMap::new();
    for p in planned {
        match (p.key, &p.verdict) {
            (Some(key), Err(_)) => {
                let g = *group_of.entry(key).or_insert_with(|| {
                    groups.push((key, vec![]));
                    groups.len() - 1
                });
                groups[g].1.push(p);
            }
            _ => out.push((p.i, Unit::One(Box::new(p)))),
        }
    }
    for (_, mut rest) in groups {
        while !rest.is_empty() {
            let n = fitting(&limits, &rest);
            let later = rest.split_off(n);
            let chunk = std::mem::replace(&mut rest, later);
            let first = chunk[0].i;
            let unit = if chunk.len() == 1 {
                Unit::One(Box::new(chunk.into_iter().next().expect("one run")))
            } else {
                Unit::Batch(chunk)
            };
            out.push((first, unit));
        }
    }
    out.sort_by_key(|(first, _)| *first);
    (out.into_iter().map(|(_, u)| u).collect(), Some(limits))
}

/// How many of `runs` (from the first, at most [`MAX_CHUNK_WORLDS`]) one batch fits on a
/// device with `limits`; at least 1.
pub(super) fn fitting<'a>(
    limits: &wgpu::Limits,
    runs: impl IntoIterator<Item = &'a Planned>,
) -> usize {
    let worlds: Vec<_> = (runs.into_iter().take(MAX_CHUNK_WORLDS))
        .map(|r| (&r.scene.system, &r.scene.config))
        .collect();
    GpuWorlds::fitting(limits, &worlds).clamp(1, worlds.len())
}
