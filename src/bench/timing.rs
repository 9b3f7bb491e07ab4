//! Timing one size honestly: a warm-up that lasts a minimum wall time (clocks and caches
//! settle by time, not by step count), the timed steps repeated as several samples with
//! the host's recording and submission time told apart from the wait for the GPU, kernels
//! profiled one step per sample, and the median and spread of each set of samples.

use super::record::{KernelRecord, Record};
use crate::gpu::{GpuError, GpuSolver, KernelTime};
use crate::simulator::{SimError, Simulator};
use std::time::Instant;

/// Median, smallest and largest of a set of samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// `None` for no samples; the median of an even count is the mean of the middle two.
    pub(super) fn of(samples: &[f64]) -> Option<Self> {
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let (first, last) = (*s.first()?, *s.last()?);
        let mid = s.len() / 2;
        let median = if s.len() % 2 == 1 {
            s[mid]
        } else {
            0.5 * (s[mid - 1] + s[mid])
        };
        Some(Self {
            median,
            min: first,
            max: last,
        })
    }
}

/// What a warm-up did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct WarmUp {
    pub steps: u64,
    pub seconds: f64,
}

/// Runs `min_steps` steps, then more until at least `min_seconds` of wall time have passed
/// since the start. `run(k)` runs k steps and returns once they are finished. Batches grow
/// with the steps done (at most doubling them) and are sized from the time per step so
/// far, so a slow size stops soon after the minimum and a fast one takes many steps.
pub(super) fn warm_up<E>(
    min_steps: u64,
    min_seconds: f64,
    mut run: impl FnMut(u64) -> Result<(), E>,
) -> Result<WarmUp, E> {
    let start = Instant::now();
    let mut steps = 0;
    if min_steps > 0 {
        run(min_steps)?;
        steps = min_steps;
    }
    loop {
        let elapsed = start.elapsed().as_secs_f64();
        if elapsed >= min_seconds {
            return Ok(WarmUp {
                steps,
                seconds: elapsed,
            });
        }
        let batch = if steps == 0 {
            1
        } else {
            let per_step = elapsed / steps as f64;
            let wanted = ((min_seconds - elapsed) / per_step.max(1e-9)).ceil();
            (wanted.min(steps as f64) as u64).max(1)
        };
        run(batch)?;
        steps += batch;
    }
}

/// One timed block of k steps: the wall time until everything finished and, where it can
/// be told apart, the host's time recording and submitting them (seconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Sample {
    pub total: f64,
    pub host: Option<f64>,
}

/// Waits until the GPU has finished everything submitted.
pub(super) fn wait(solver: &GpuSolver) -> Result<(), GpuError> {
    solver
        .device()
        .poll(wgpu::PollType::wait_indefinitely())
        .map(|_| ())
        .map_err(|e| GpuError::DeviceLost(format!("waiting for the GPU failed: {e}")))
}

/// `repeats` blocks of `steps` steps on the GPU solver. Each block: the time until
/// `step(k)` returns, less what it spent blocked on an earlier batch
/// ([`GpuSolver::batch_wait_seconds`]), is the host's; then a wait for the GPU to finish
/// everything ends the block.
pub(super) fn time_gpu(
    solver: &mut GpuSolver,
    steps: u64,
    repeats: u32,
) -> Result<Vec<Sample>, SimError> {
    let mut samples = Vec::with_capacity(repeats as usize);
    for _ in 0..repeats {
        let waited = solver.batch_wait_seconds();
        let start = Instant::now();
        solver.step(steps)?;
        let returned = start.elapsed().as_secs_f64();
        let blocked = solver.batch_wait_seconds() - waited;
        wait(solver)?;
        let total = start.elapsed().as_secs_f64();
        samples.push(Sample {
            total,
            host: Some((returned - blocked).max(0.0)),
        });
    }
    Ok(samples)
}

/// `repeats` blocks of `steps` steps on any simulator that computes while it is called
/// (the CPU reference): wall time only.
pub(super) fn time_blocking(
    sim: &mut dyn Simulator,
    steps: u64,
    repeats: u32,
) -> Result<Vec<Sample>, SimError> {
    let mut samples = Vec::with_capacity(repeats as usize);
    for _ in 0..repeats {
        let start = Instant::now();
        sim.step(steps)?;
        samples.push(Sample {
            total: start.elapsed().as_secs_f64(),
            host: None,
        });
    }
    Ok(samples)
}

/// Fills the record's timing fields from the repeats' samples of `steps` steps each.
pub(super) fn fill(rec: &mut Record, samples: &[Sample], steps: u64) {
    let k = steps as f64;
    let ms: Vec<f64> = samples.iter().map(|s| s.total * 1e3 / k).collect();
    rec.timed_seconds = Some(samples.iter().map(|s| s.total).sum());
    if let Some(t) = Spread::of(&ms) {
        rec.ms_per_step = Some(t.median);
        rec.ms_per_step_min = Some(t.min);
        rec.ms_per_step_max = Some(t.max);
    }
    rec.ms_per_step_samples = ms;
    let host: Option<Vec<f64>> = samples.iter().map(|s| s.host).collect();
    let wait: Option<Vec<f64>> = samples
        .iter()
        .map(|s| s.host.map(|h| (s.total - h) * 1e3 / k))
        .collect();
    if let (Some(h), Some(w)) = (
        host.and_then(|h| Spread::of(&h)),
        wait.and_then(|w| Spread::of(&w)),
    ) {
        rec.host_ms_per_step = Some(h.median * 1e3 / k);
        rec.host_ms_per_step_min = Some(h.min * 1e3 / k);
        rec.host_ms_per_step_max = Some(h.max * 1e3 / k);
        rec.wait_ms_per_step = Some(w.median);
    }
}

/// Profiles `steps` steps one at a time (each step's kernel times are a sample) into the
/// record's `kernel_times` and `kernel_ms_per_step`.
pub(super) fn profile(
    rec: &mut Record,
    solver: &mut GpuSolver,
    steps: u32,
) -> Result<(), GpuError> {
    let times = (0..steps)
        .map(|_| solver.profile(1))
        .collect::<Result<Vec<_>, _>>()?;
    let sums: Vec<f64> = times
        .iter()
        .map(|s| s.iter().map(|t| t.seconds * 1e3).sum())
        .collect();
    if let Some(t) = Spread::of(&sums) {
        rec.kernel_ms_per_step = Some(t.median);
        rec.kernel_ms_per_step_min = Some(t.min);
        rec.kernel_ms_per_step_max = Some(t.max);
    }
    rec.profile_steps = steps;
    rec.kernel_times = Some(kernel_records(&times));
    Ok(())
}

/// Per kernel, in the order the kernels first run: the spread over `steps` (one list of
/// kernel times per profiled step) of its time in a step; a kernel absent from a step
/// counts 0 ms there.
pub(super) fn kernel_records(steps: &[Vec<KernelTime>]) -> Vec<KernelRecord> {
    let mut names: Vec<&'static str> = Vec::new();
    for t in steps.iter().flatten() {
        if !names.contains(&t.kernel) {
            names.push(t.kernel);
        }
    }
    let count = steps.len().max(1) as f64;
    names
        .into_iter()
        .map(|kernel| {
            let of = |step: &Vec<KernelTime>| step.iter().find(|t| t.kernel == kernel).cloned();
            let ms: Vec<f64> = steps
                .iter()
                .map(|s| of(s).map_or(0.0, |t| t.seconds * 1e3))
                .collect();
            let dispatches: u64 = steps.iter().filter_map(of).map(|t| t.dispatches).sum();
            let dispatches_per_step = dispatches as f64 / count;
            let spread = Spread::of(&ms).unwrap_or(Spread {
                median: 0.0,
                min: 0.0,
                max: 0.0,
            });
            KernelRecord {
                kernel,
                dispatches_per_step,
                ms_per_step: spread.median,
                ms_per_step_min: spread.min,
                ms_per_step_max: spread.max,
                us_per_dispatch: if dispatches_per_step > 0.0 {
                    spread.median * 1e3 / dispatches_per_step
                } else {
                    0.0
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_orders_and_takes_the_middle() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.min, s.median, s.max), (1.0, 2.0, 3.0));
        let s = Spread::of(&[4.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((s.min, s.median, s.max), (1.0, 3.0, 10.0));
        assert_eq!(Spread::of(&[]), None);
    }

    #[test]
    fn warm_up_runs_the_minimum_steps_then_until_the_time_has_passed() {
        // Each step sleeps 2 ms: 30 ms need about 15 steps, in growing batches.
        let mut batches = Vec::new();
        let w = warm_up(2, 0.03, |k| -> Result<(), ()> {
            batches.push(k);
            std::thread::sleep(std::time::Duration::from_millis(2 * k));
            Ok(())
        })
        .unwrap();
        assert!(w.seconds >= 0.03, "{w:?}");
        assert_eq!(w.steps, batches.iter().sum::<u64>());
        assert_eq!(batches[0], 2, "the minimum steps first");
        // No batch more than doubles the steps done before it.
        let mut done = 0;
        for &b in &batches {
            assert!(b >= 1 && (done == 0 || b <= done), "{batches:?}");
            done += b;
        }
        // A zero minimum on both counts runs nothing.
        let w = warm_up(0, 0.0, |_| -> Result<(), ()> { panic!("no step") }).unwrap();
        assert_eq!(w.steps, 0);
    }

    #[test]
    fn warm_up_takes_at_least_one_step_when_time_is_asked_for() {
        // A step far longer than the asked time: exactly one step.
        let mut count = 0;
        let w = warm_up(0, 1e-6, |k| -> Result<(), ()> {
            count += k;
            std::thread::sleep(std::time::Duration::from_millis(5));
            Ok(())
        })
        .unwrap();
        assert_eq!((w.steps, count), (1, 1));
    }

    fn kt(kernel: &'static str, dispatches: u64, ms: f64) -> KernelTime {
        KernelTime {
            kernel,
            dispatches,
            seconds: ms * 1e-3,
        }
    }

    #[test]
    fn kernel_records_take_the_spread_over_profiled_steps() {
        // Three steps; `prologue` runs in the first only, so it counts 0 ms in the others.
        let steps = [
            vec![kt("prologue", 1, 4.0), kt("sweep", 20, 2.0)],
            vec![kt("sweep", 20, 6.0)],
            vec![kt("sweep", 20, 3.0)],
        ];
        let r = kernel_records(&steps);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].kernel, "prologue", "first run first");
        assert_eq!(
            (r[0].ms_per_step_min, r[0].ms_per_step, r[0].ms_per_step_max),
            (0.0, 0.0, 4.0)
        );
        assert!((r[0].dispatches_per_step - 1.0 / 3.0).abs() < 1e-15);
        let s = &r[1];
        assert_eq!(s.dispatches_per_step, 20.0);
        assert!((s.ms_per_step - 3.0).abs() < 1e-12, "median, not mean");
        assert!((s.ms_per_step_min - 2.0).abs() < 1e-12);
        assert!((s.ms_per_step_max - 6.0).abs() < 1e-12);
        // 3 ms over 20 dispatches.
        assert!((s.us_per_dispatch - 150.0).abs() < 1e-9);
        assert!(kernel_records(&[]).is_empty());
    }
}
