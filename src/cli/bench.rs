//! `msc bench`: the standard workloads, one JSON line per size and workload on stdout
//! (and in `--out FILE`), a readable table on stderr. See `BENCHMARKS.md`.

pub use super::bench_args::BenchArgs;
use super::CliError;
use crate::bench::{self, BenchError, Event, Record, Status, Workload};
use crate::output::{LinesFile, OutputError};
use crate::run::RunError;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

fn stdout_error(source: std::io::Error) -> OutputError {
    OutputError::Write {
        path: PathBuf::from("<stdout>"),
        source,
    }
}

/// Runs the benchmark; returns its records. The adjoint workload is `bench_adjoint`'s
/// (its rows are `grad::cost` records): the command dispatches it there.
pub fn execute(args: &BenchArgs) -> Result<Vec<Record>, CliError> {
    let opts = args.options();
    let mut file = match &args.out {
        Some(p) => Some(LinesFile::create(p)?),
        None => None,
    };
    let show = !args.quiet;
    let bar = (show && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new_spinner();
        b.enable_steady_tick(std::time::Duration::from_millis(200));
        b
    });
    let say = |line: &str| match &bar {
        Some(b) => b.println(line),
        None => eprintln!("{line}"),
    };
    if show {
        say(&table_header());
    }
    let mut on = |event: Event<'_>| -> Result<(), OutputError> {
        match event {
            Event::Stage { workload, n, stage } => {
                if let Some(b) = &bar {
                    let size = if workload == Workload::Worlds {
                        "W"
                    } else {
                        "n"
                    };
                    b.set_message(format!("{} {size} = {n}: {stage}", workload.name()));
                }
            }
            Event::Note(text) => {
                if show {
                    say(&format!("note: {text}"));
                }
            }
            Event::Record(r) => {
                let line = serde_json::to_string(r).map_err(|source| OutputError::Json {
                    path: PathBuf::from("<stdout>"),
                    source,
                })?;
                let mut out = std::io::stdout().lock();
                writeln!(out, "{line}")
                    .and_then(|_| out.flush())
                    .map_err(stdout_error)?;
                if let Some(f) = file.as_mut() {
                    f.push(&line)?;
                }
                if show {
                    say(&table_row(r));
                }
            }
        }
        Ok(())
    };
    let result = bench::run(&opts, &mut on);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let records = result.map_err(|e| match e {
        BenchError::Gpu(g) => CliError::from(RunError::Gpu(g)),
        BenchError::Output(o) => CliError::from(o),
        // A size this machine cannot hold: an input error, as `bench_adjoint`'s.
        BenchError::Workload(w) => CliError::from(RunError::Option {
            option: "--sizes",
            source: crate::config::ConfigError::new("--sizes", w.to_string()),
        }),
    })?;
    if show {
        footer(&records, args.out.as_deref());
    }
    Ok(records)
}

fn table_header() -> String {
    format!(
        "{:<11} {:>8} {:>8} {:>8} {:>10} {:>6} {:>9} {:>9} {:>7} {:>9} {:>9} {:>6} {:>7} {:>5} {:>6}  {}",
        "workload",
        "n",
        "springs",
        "charged",
        "ms/step",
        "+-%",
        "host ms",
        "Gint/s",
        "%peak",
        "sweep ms",
        "sweepGB/s",
        "%bw",
        "err%",
        "disp",
        "subm",
        "status"
    )
}

fn opt(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(x) => format!("{x:.digits$}"),
        None => "-".into(),
    }
}

/// Half the range of the repeats' ms per step, as a percentage of their median.
fn spread_percent(r: &Record) -> Option<f64> {
    match (r.ms_per_step, r.ms_per_step_min, r.ms_per_step_max) {
        (Some(m), Some(lo), Some(hi)) if m > 0.0 => Some(50.0 * (hi - lo) / m),
        _ => None,
    }
}

/// One readable row per record; `-` where the JSON has null.
pub fn table_row(r: &Record) -> String {
    let status = match r.status {
        Status::Ok => {
            let ok = match r.finite {
                Some(false) => "ok (non-finite energies)".to_string(),
                _ => "ok".to_string(),
            };
            match (r.worlds, r.world_steps_per_second) {
                (Some(w), Some(b)) => format!(
                    "{ok}; W {w}: world-steps/s batched {b:.4e}, sequential {}, ratio {}",
                    r.sequential_world_steps_per_second
                        .map_or_else(|| "-".into(), |s| format!("{s:.4e}")),
                    opt(r.batch_speedup, 2)
                ),
                _ => match (r.ddef_structure_bytes, r.ddef_largest_binding_bytes) {
                    (Some(t), Some(l)) => format!(
                        "{ok}; DDEF structures {:.1} MB, largest binding {:.1} MB",
                        t as f64 * 1e-6,
                        l as f64 * 1e-6
                    ),
                    _ => ok,
                },
            }
        }
        Status::Skipped => format!("skipped: {}", r.reason.as_deref().unwrap_or("")),
        Status::Failed => format!("failed: {}", r.reason.as_deref().unwrap_or("")),
    };
    format!(
        "{:<11} {:>8} {:>8} {:>8} {:>10} {:>6} {:>9} {:>9} {:>7} {:>9} {:>9} {:>6} {:>7} {:>5} {:>6}  {}",
        match (r.ddef_samples, r.world_scene) {
            (Some(m), _) => format!("{} m={m}", r.workload.name()),
            (_, Some(s)) => format!("{} {}", r.workload.name(), s.name()),
            _ => r.workload.name().to_string(),
        },
        r.n,
        r.springs,
        r.charged,
        opt(r.ms_per_step, 3),
        opt(spread_percent(r), 1),
        opt(r.host_ms_per_step, 3),
        opt(r.interactions_per_second.map(|x| x * 1e-9), 3),
        opt(r.percent_of_fp32_peak, 1),
        // Beside the bandwidth share: that share counts the current layout's bytes as
        // compulsory, so only the time shows a layout gain.
        opt(r.jacobi_sweep_ms, 3),
        opt(r.jacobi_sweep_gb_per_s, 2),
        opt(r.percent_of_bandwidth, 1),
        opt(r.force_error_mean.map(|e| e * 100.0), 2),
        r.dispatches_per_step
            .map_or_else(|| "-".into(), |d| d.to_string()),
        opt(r.submissions_per_step, 3),
        status
    )
}

fn footer(records: &[Record], out: Option<&Path>) {
    if let Some(a) = records.iter().find_map(|r| r.adapter.as_ref()) {
        let driver = [a.driver.as_str(), a.driver_info.as_str()]
            .iter()
            .filter(|t| !t.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        eprintln!(
            "adapter: {} ({}, {}){}",
            a.name,
            a.backend,
            a.device_type,
            if driver.is_empty() {
                String::new()
            } else {
                format!(", driver {driver}")
            }
        );
    }
    if let Some(t) = records.iter().find_map(|r| r.threads) {
        let sweeps: Vec<String> = records
            .iter()
            .filter_map(|r| r.jacobi_sweep_ms.map(|ms| format!("n {} {ms:.3} ms", r.n)))
            .collect();
        eprintln!(
            "CPU backend: {t} rayon threads (RAYON_NUM_THREADS); Jacobi sweep: {}",
            if sweeps.is_empty() {
                "-".to_string()
            } else {
                sweeps.join(", ")
            }
        );
    }
    let clocks: Vec<String> = records
        .iter()
        .filter_map(|r| match (r.sm_clock_mhz_before, r.sm_clock_mhz_after) {
            (Some(b), Some(a)) => Some(format!("n {} {b:.0}->{a:.0}", r.n)),
            _ => None,
        })
        .collect();
    if let Some(max) = records.iter().find_map(|r| r.sm_clock_max_mhz) {
        eprintln!(
            "SM clock (MHz, before -> after timing; max {max:.0}): {}",
            clocks.join(", ")
        );
    }
    eprintln!(
        "ms/step: median of --repeats timed blocks, +-% half their range; host ms: recording \
         and submission per step (the rest is waiting on the GPU); \
         Gint/s: Coulomb interactions per second / 1e9; %peak at 20 flop per interaction; \
         sweep ms: one Jacobi sweep's kernel time; sweepGB/s: compulsory bytes of one Jacobi \
         sweep / that time; disp, subm: \
         dispatches and queue submissions per step; err%: DDEF's mean relative force error \
         against exact all-pairs; worlds rows: n is one world's particles, ms/step the \
         batched step of all W worlds, and the status gives world-steps per second batched \
         and sequential (each world on its own solver, in turn) and their ratio. Null fields are explained in each \
         JSON line's notes."
    );
    if let Some(p) = out {
        eprintln!("records written to {}", p.display());
    }
}
