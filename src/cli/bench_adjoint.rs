//! `msc bench --workload adjoint`: the cloth workload's scene at each `--sizes` particle
//! count, differentiated over `--horizon` steps with respect to 1, 1000 and every
//! spring stiffness (`grad::cost`); with charges (`--charged-fraction`), also to the
//! charge scale, under all-pairs Coulomb and then under DDEF at each `--samples` m: one
//! JSON line per row on stdout (and `--out`), a table on stderr.

use super::bench_args::{BenchArgs, BenchBackendArg};
use super::CliError;
use crate::bench::workload;
use crate::config::{Config, CoulombMethod, DdefConfig};
use crate::grad::checkpoint::CheckpointOptions;
use crate::grad::cost::{measure, CostOptions, CostRecord};
use crate::grad::{GradBackend, GradError, Param, TangentSolve};
use crate::output::{LinesFile, OutputError};
use crate::run::RunError;
use std::io::Write;
use std::path::PathBuf;

/// The cloth size when `--sizes` is not given.
const DEFAULT_SIZE: usize = 4096;

fn grad_error(e: GradError) -> CliError {
    CliError::Fit(Box::new(e))
}

fn header() -> String {
    format!(
        "{:<8} {:>7} {:>7} {:>5} {:<12} {:<24} {:>7} {:<10} {:>7} {:>10} {:>10} {:>6} {:>6} {:>6} {:>10} {:>9}",
        "backend",
        "n",
        "springs",
        "T",
        "coulomb",
        "params",
        "P",
        "policy",
        "tol",
        "forward s",
        "gradient s",
        "ratio",
        "states",
        "bound",
        "kept MB",
        "rss MB"
    )
}

fn row(r: &CostRecord) -> String {
    format!(
        "{:<8} {:>7} {:>7} {:>5} {:<12} {:<24} {:>7} {:<10} {:>7} {:>10.4} {:>10.4} {:>6.2} {:>6} {:>6.1} {:>10.2} {:>9}",
        r.backend,
        r.particles,
        r.springs,
        r.steps,
        r.coulomb,
        r.params,
        r.components,
        r.policy,
        match (r.adjoint_solve, r.adjoint_tolerance) {
            (Some("scene"), _) => "scene".into(),
            (_, t) => t.map_or_else(|| "-".into(), |t| format!("{t:.0e}")),
        },
        r.forward_seconds[0],
        r.gradient_seconds[0],
        r.ratio,
        r.peak_states,
        r.state_bound,
        r.kept_bytes as f64 / 1e6,
        r.peak_rss_bytes
            .map_or_else(|| "-".into(), |b| format!("{:.0}", b as f64 / 1e6)),
    )
}

pub(super) fn execute(args: &BenchArgs) -> Result<(), CliError> {
    let backend = match args.backend {
        BenchBackendArg::Gpu => GradBackend::Gpu {
            allow_software: true,
        },
        BenchBackendArg::Cpu => GradBackend::Cpu,
    };
    let options = CostOptions {
        backend,
        checkpoint: CheckpointOptions {
            policy: args.checkpoint,
            memory_budget: args.checkpoint_memory.saturating_mul(1 << 20),
        },
        repeats: args.repeats,
        frames: 10,
        tangent_solve: TangentSolve {
            tolerance: args.adjoint_tolerance,
            ..TangentSolve::default()
        },
        adjoint_solve: args.adjoint_solve.mode(),
    };
    let mut file = match &args.out {
        Some(p) => Some(LinesFile::create(p)?),
        None => None,
    };
    if !args.quiet {
        eprintln!("{}", header());
    }
    // `auto` (the scene's rule at its charge count) first, then the counts.
    let mut samples = args.samples.clone();
    samples.sort_unstable_by_key(|s| s.count());
    samples.dedup();
    let sizes = if args.sizes.is_empty() {
        vec![DEFAULT_SIZE]
    } else {
        args.sizes.clone()
    };
    for &n in &sizes {
        let built = workload::cloth(n, args.sweeps, args.charged_fraction).map_err(|e| {
            CliError::from(RunError::Option {
                option: "--sizes",
                source: crate::config::ConfigError::new("--sizes", e.to_string()),
            })
        })?;
        let ns = built.system.springs().len();
        let mut sets = vec![vec![Param::StiffnessScale]];
        if ns > 1000 {
            sets.push(vec![Param::StiffnessBlocks { count: 1000 }]);
        }
        sets.push(vec![Param::Stiffnesses]);
        let charged = built.system.charged_count() > 0;
        if charged {
            sets.push(vec![Param::ChargeScale]);
        }
        let mut write = |r: &CostRecord| -> Result<(), OutputError> {
            let line = serde_json::to_string(r).map_err(|source| OutputError::Json {
                path: PathBuf::from("<stdout>"),
                source,
            })?;
            println!("{line}");
            let _ = std::io::stdout().flush();
            if let Some(f) = file.as_mut() {
                f.push(&line)?;
            }
            if !args.quiet {
                eprintln!("{}", row(r));
            }
            Ok(())
        };
        let mut run = |config: &Config, sets: &[Vec<Param>]| -> Result<(), CliError> {
            let mut failed = None;
            measure(&built.system, config, args.horizon, sets, &options, |r| {
                if let Err(e) = write(r) {
                    failed.get_or_insert(e);
                }
            })
            .map_err(grad_error)?;
            failed.map_or(Ok(()), |e| Err(e.into()))
        };
        run(&built.config, &sets)?;
        // The same charged cloth under DDEF, one row per m: the adjoint through the far
        // field and its transpose.
        for &m in samples.iter().filter(|_| charged) {
            let mut config = built.config.clone();
            config.coulomb.method = CoulombMethod::Ddef(DdefConfig {
                samples: m,
                ..Default::default()
            });
            run(&config, &[vec![Param::ChargeScale]])?;
        }
    }
    Ok(())
}
