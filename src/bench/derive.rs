//! The figures derived from a measured size: Coulomb interactions per second and the
//! fraction of the FP32 peak, Jacobi sweep bytes per second and the fraction of memory
//! bandwidth, each null with a note saying why when it cannot be had.

use super::record::{KernelRecord, Record, Status};
use super::{device, Backend, BenchOptions, Workload, FLOPS_PER_INTERACTION};

/// Seconds per evaluation summed over `kernels`, with the evaluation count taken from
/// the first kernel's dispatches.
fn seconds_per_dispatch(times: &[KernelRecord], kernels: &[&str]) -> Option<f64> {
    let first = times.iter().find(|t| t.kernel == kernels[0])?;
    if first.dispatches_per_step <= 0.0 {
        return None;
    }
    let ms: f64 = times
        .iter()
        .filter(|t| kernels.contains(&t.kernel))
        .map(|t| t.ms_per_step)
        .sum();
    Some(ms * 1e-3 / first.dispatches_per_step)
}

/// The adapter's known-device entry, if any.
fn known(rec: &Record) -> Option<device::KnownDevice> {
    rec.adapter
        .as_ref()
        .and_then(|a| device::known_device(&a.name))
}

/// Fills the derived rates and fractions, with a note for every one left null.
pub(super) fn derive(rec: &mut Record, opts: &BenchOptions) {
    if rec.status != Status::Ok {
        return;
    }
    if rec.workload == Workload::Worlds {
        worlds(rec);
        return;
    }
    let device = known(rec);
    let unknown_device = match &rec.adapter {
        Some(a) => format!("'{}' is not in the known-device table", a.name),
        None => "no GPU adapter".to_string(),
    };

    // Coulomb.
    if rec.workload == Workload::Ddef {
        // One DDEF evaluation per symplectic Euler step: the CPU stage, the transfers and
        // the kernels, which is what a user's step pays.
        rec.coulomb_ms_per_eval = rec.ms_per_step;
        rec.coulomb_time_source = rec.ms_per_step.map(|_| "whole_step");
        rec.note(
            "interactions_per_second",
            "DDEF is not a pair sum; compare coulomb_ms_per_eval with the coulomb rows",
        );
    } else if rec.charged == 0 {
        rec.note(
            "interactions_per_second",
            "no charged particles (see --charged-fraction)",
        );
    } else {
        let timed = rec
            .kernel_times
            .as_deref()
            .and_then(|t| seconds_per_dispatch(t, &["coulomb_tiled", "coulomb_sources"]));
        let (seconds, source) = match (timed, rec.workload, rec.ms_per_step) {
            (Some(s), _, _) => (Some(s), Some("timestamps")),
            // One Coulomb evaluation per symplectic Euler step.
            (None, Workload::Coulomb, Some(ms)) => (Some(ms * 1e-3), Some("whole_step")),
            _ => (None, None),
        };
        match seconds {
            Some(s) if s > 0.0 => {
                rec.coulomb_ms_per_eval = Some(s * 1e3);
                rec.coulomb_time_source = source;
                let ips = rec.coulomb_interactions_per_eval as f64 / s;
                rec.interactions_per_second = Some(ips);
                let tflops = ips * FLOPS_PER_INTERACTION * 1e-12;
                rec.tflops = Some(tflops);
                match ceiling(
                    opts.peak_tflops,
                    "--peak-tflops",
                    device.map(|d| (d.fp32_tflops, d.name)),
                ) {
                    Ok((p, source)) => {
                        rec.peak_tflops = Some(p);
                        rec.peak_source = Some(source);
                        rec.percent_of_fp32_peak = Some(100.0 * tflops / p);
                    }
                    Err(flag) => {
                        let why = format!("{unknown_device}; give {flag}");
                        rec.note("percent_of_fp32_peak", why);
                    }
                }
            }
            _ => rec.note(
                "interactions_per_second",
                "the Coulomb kernels' time needs per-kernel timestamps (a cloth step also \
                 holds the spring solve)",
            ),
        }
    }

    // Jacobi sweep bandwidth.
    if matches!(rec.workload, Workload::Coulomb | Workload::Ddef) {
        rec.note(
            "jacobi_sweep_gb_per_s",
            "the Coulomb and DDEF workloads have no springs",
        );
    } else {
        if opts.backend == Backend::Cpu {
            rec.note(
                "jacobi_sweep_gb_per_s",
                "bytes are counted for the GPU kernel's buffers; the CPU reference's differ",
            );
            return;
        }
        let sweep = rec
            .kernel_times
            .as_deref()
            .and_then(|t| seconds_per_dispatch(t, &["jacobi_sweep"]));
        match (sweep, rec.jacobi_sweep_bytes) {
            (Some(s), Some(b)) if s > 0.0 => {
                rec.jacobi_sweep_ms = Some(s * 1e3);
                let gbs = b as f64 / s * 1e-9;
                rec.jacobi_sweep_gb_per_s = Some(gbs);
                let known = device.map(|d| (d.bandwidth_gbs, d.name));
                match ceiling(opts.bandwidth_gbs, "--bandwidth-gbs", known) {
                    Ok((bw, source)) => {
                        rec.bandwidth_gbs = Some(bw);
                        rec.bandwidth_source = Some(source);
                        rec.percent_of_bandwidth = Some(100.0 * gbs / bw);
                    }
                    Err(flag) => {
                        let why = format!("{unknown_device}; give {flag}");
                        rec.note("percent_of_bandwidth", why);
                    }
                }
            }
            _ => rec.note(
                "jacobi_sweep_gb_per_s",
                "the sweep's time needs per-kernel timestamps",
            ),
        }
    }
}

/// The worlds workload: world-steps per second batched and sequential, and their ratio.
fn worlds(rec: &mut Record) {
    let w = rec.worlds.unwrap_or(0) as f64;
    let rate = |ms: Option<f64>| ms.filter(|&m| m > 0.0).map(|m| w * 1e3 / m);
    rec.world_steps_per_second = rate(rec.ms_per_step);
    rec.sequential_world_steps_per_second = rate(rec.sequential_ms_per_step);
    if let (Some(b), Some(s)) = (
        rec.world_steps_per_second,
        rec.sequential_world_steps_per_second,
    ) {
        rec.batch_speedup = Some(b / s);
    }
    let why = "the worlds workload measures world-steps per second, not kernels";
    rec.note("interactions_per_second", why);
    rec.note("jacobi_sweep_gb_per_s", why);
}

/// A hardware ceiling and where it came from: the command-line `flag` wins over the known
/// device's datasheet value; with neither, the flag to give.
fn ceiling(
    given: Option<f64>,
    flag: &'static str,
    known: Option<(f64, &'static str)>,
) -> Result<(f64, String), &'static str> {
    match (given, known) {
        (Some(v), _) => Ok((v, flag.to_string())),
        (None, Some((v, name))) => Ok((v, name.to_string())),
        (None, None) => Err(flag),
    }
}

#[cfg(test)]
mod tests {
    use super::super::timing::kernel_records;
    use super::*;
    use crate::gpu::{AdapterSummary, KernelTime};

    fn ok_record(workload: Workload, charged: usize) -> Record {
        let opts = BenchOptions::default();
        let mut r = Record::new(workload, 1000, None, &opts);
        r.charged = charged;
        r.coulomb_interactions_per_eval = (charged as u64).pow(2);
        r.ms_per_step = Some(10.0);
        r
    }

    #[test]
    fn coulomb_rate_from_timestamps_and_peak_from_the_known_device() {
        let mut r = ok_record(Workload::Cloth, 1000);
        r.adapter = Some(AdapterSummary {
            name: "NVIDIA H100 PCIe".into(),
            backend: "vulkan".into(),
            device_type: "DiscreteGpu".into(),
            driver: String::new(),
            driver_info: String::new(),
            max_storage_buffer_binding_size: 0,
            max_buffer_size: 0,
            max_compute_workgroup_storage_size: 0,
            max_compute_invocations_per_workgroup: 0,
            max_storage_buffers_per_shader_stage: 0,
            timestamp_queries: true,
        });
        r.jacobi_sweep_bytes = Some(2_000_000);
        // 2 steps: Coulomb 1.5 ms + 0.5 ms per evaluation, 20 sweeps of 0.1 ms each.
        let step = |sweep_ms: f64| {
            vec![
                KernelTime {
                    kernel: "coulomb_sources",
                    dispatches: 1,
                    seconds: 0.5e-3,
                },
                KernelTime {
                    kernel: "coulomb_tiled",
                    dispatches: 1,
                    seconds: 1.5e-3,
                },
                KernelTime {
                    kernel: "jacobi_sweep",
                    dispatches: 20,
                    seconds: sweep_ms * 1e-3,
                },
            ]
        };
        r.kernel_times = Some(kernel_records(&[step(1.5), step(2.5)]));
        derive(&mut r, &BenchOptions::default());
        // 1e6 interactions in 2 ms.
        let ips = r.interactions_per_second.unwrap();
        assert!((ips - 5e8).abs() < 1.0, "{ips}");
        assert_eq!(r.coulomb_time_source, Some("timestamps"));
        assert_eq!(r.peak_source.as_deref(), Some("H100 PCIe"));
        let pct = r.percent_of_fp32_peak.unwrap();
        // 5e8 x 20 = 1e10 flop/s of 51e12.
        assert!((pct - 100.0 * 1e10 / 51e12).abs() < 1e-9, "{pct}");
        // 2e6 B in 0.1 ms = 20 GB/s of 2000.
        let gbs = r.jacobi_sweep_gb_per_s.unwrap();
        assert!((gbs - 20.0).abs() < 1e-9, "{gbs}");
        assert!((r.percent_of_bandwidth.unwrap() - 1.0).abs() < 1e-9);
        assert!(r.notes.is_empty(), "{:?}", r.notes);
    }

    #[test]
    fn without_timestamps_only_the_coulomb_workload_gets_a_rate_and_nulls_say_why() {
        let opts = BenchOptions {
            peak_tflops: Some(10.0),
            ..Default::default()
        };
        let mut c = ok_record(Workload::Coulomb, 1000);
        derive(&mut c, &opts);
        // 1e6 interactions per 10 ms step.
        assert_eq!(c.coulomb_time_source, Some("whole_step"));
        assert!((c.interactions_per_second.unwrap() - 1e8).abs() < 1e-3);
        assert_eq!(c.peak_source.as_deref(), Some("--peak-tflops"));
        assert!((c.percent_of_fp32_peak.unwrap() - 100.0 * 2e9 / 1e13).abs() < 1e-12);

        let mut cloth = ok_record(Workload::Cloth, 1000);
        cloth.jacobi_sweep_bytes = Some(1000);
        derive(&mut cloth, &opts);
        assert_eq!(cloth.interactions_per_second, None);
        assert_eq!(cloth.jacobi_sweep_gb_per_s, None);
        let notes = cloth.notes.join("\n");
        assert!(notes.contains("interactions_per_second:"), "{notes}");
        assert!(notes.contains("jacobi_sweep_gb_per_s:"), "{notes}");
    }

    #[test]
    fn ceilings_prefer_the_flag_then_the_known_device() {
        let h100 = Some((66.9, "H100 SXM"));
        assert_eq!(
            ceiling(Some(50.0), "--peak-tflops", h100),
            Ok((50.0, "--peak-tflops".into()))
        );
        assert_eq!(
            ceiling(None, "--peak-tflops", h100),
            Ok((66.9, "H100 SXM".into()))
        );
        assert_eq!(ceiling(None, "--peak-tflops", None), Err("--peak-tflops"));
    }
}
