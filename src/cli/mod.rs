//! The `msc` command line: `run`, `scenes`, `info`, `validate`, `bench`, `fit`,
//! `ddef-error`, `render`, `sweep`, `batch`, `merge`, `plot`.
//!
//! [`main`] parses the arguments, runs one command and returns the exit code: 0 on
//! success, 2 for usage and input errors, 1 for run failures, 130 for a run stopped by
//! SIGINT/SIGTERM (see [`CliError::exit_code`]).
//! Each command's `execute` is public so it can be driven in-process.

pub mod batch;
pub mod bench;
mod bench_adjoint;
pub mod bench_args;
pub mod ddef_error;
pub mod error;
pub mod fit;
mod fit_args;
pub mod info;
pub mod merge;
pub mod plot;
pub mod process;
pub mod render;
pub mod run;
pub mod scale;
pub mod scene_args;
pub mod scenes;
pub mod sweep;
pub mod validate;

pub use crate::run::BackendArg;
pub use batch::BatchArgs;
pub use bench_args::BenchArgs;
pub use error::CliError;
pub use fit::FitArgs;
pub use plot::PlotArgs;
pub use render::{RenderArgs, RenderStyle};
pub use run::RunArgs;
pub use scene_args::SceneArgs;
pub use sweep::SweepArgs;
pub use validate::ValidateArgs;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::ffi::OsString;

/// Charged mass-spring systems on the GPU: implicit springs, all-pairs Coulomb (IMEX).
#[derive(Debug, Parser)]
#[command(
    name = "msc",
    version,
    propagate_version = true,
    after_help = "Exit codes: 0 success; 1 run failure (a diverged run, a GPU or write error, \
                  validate beyond its tolerance); 2 usage or input error (bad option, scene or --set); \
                  130 stopped by Ctrl-C or SIGTERM after writing every output so far; \
                  137 ended at once by a second signal."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Simulate a scene; writes energy.csv, frames/*.ply, summary.json and scene.toml
    Run(RunArgs),
    /// List the built-in scenes
    Scenes,
    /// List the GPU adapters wgpu finds, with the limits that bound a run's size
    Info,
    /// Run a scene on the GPU (software adapters allowed) and on the CPU reference and
    /// compare positions, velocities and energies; exit 1 beyond the tolerance
    Validate(ValidateArgs),
    /// Draw a run folder's frames to PNG images (RUN_DIR/render/) and optionally a GIF
    Render(RenderArgs),
    /// Measure the DDEF far-field approximation's error against the exact all-pairs
    /// field (the paper's Table 1 protocol), for random charges and a scene's charges
    DdefError(ddef_error::DdefErrorArgs),
    /// Measure the GPU solver or the CPU reference (--backend) on the standard workloads
    /// (cloth, all-pairs Coulomb, DDEF) from 1K to 1M particles: one JSON line per size on
    /// stdout, a table on stderr
    Bench(BenchArgs),
    /// Estimate parameters (charge, stiffness, ...) that make the scene match target frames;
    /// gradients through the simulation, writes fit.json
    Fit(FitArgs),
    /// Run a scene once for every combination of --vary values, each into its own folder
    /// under --out, with runs.csv; one GPU device serves every run; resumes when re-run
    Sweep(SweepArgs),
    /// Run the scenes listed in a manifest file, each into its own folder under --out,
    /// with runs.csv; resumes when re-run
    Batch(BatchArgs),
    /// Join the shards of a sharded sweep or batch (--shard, Slurm array tasks) into one
    /// runs.csv; lists each missing or failed run with the command that reruns it
    Merge(merge::MergeArgs),
    /// Plot runs' energy logs as PNG: one run's terms, several runs overlaid, their drift,
    /// or their relative error against a reference run
    Plot(PlotArgs),
}

/// Runs one parsed command.
pub fn dispatch(command: &Command) -> Result<(), CliError> {
    match command {
        Command::Run(args) => run::execute(args).map(|_| ()),
        Command::Scenes => {
            scenes::execute();
            Ok(())
        }
        Command::Info => {
            info::execute();
            Ok(())
        }
        Command::Validate(args) => validate::execute(args).map(|_| ()),
        Command::Render(args) => render::execute(args).map(|_| ()),
        Command::DdefError(args) => ddef_error::execute(args).map(|_| ()),
        Command::Bench(args) => match args.unread_option() {
            Some(e) => Err(e),
            None if args.workload == bench_args::WorkloadArg::Adjoint => {
                bench_adjoint::execute(args)
            }
            None => bench::execute(args).map(|_| ()),
        },
        Command::Fit(args) => fit::execute(args).map(|_| ()),
        Command::Sweep(args) => sweep::execute(args).map(|_| ()),
        Command::Batch(args) => batch::execute(args).map(|_| ()),
        Command::Merge(args) => merge::execute(args).map(|_| ()),
        Command::Plot(args) => plot::execute(args).map(|_| ()),
    }
}

/// The command definition, every option that takes a value accepting a negative number
/// as its value: `--steps -1` is then refused by the option's own check, naming the
/// option, rather than as an unknown argument `-1`.
pub fn command() -> clap::Command {
    Cli::command().mut_subcommands(|s| {
        s.mut_args(|a| {
            if a.get_action().takes_values() {
                a.allow_negative_numbers(true)
            } else {
                a
            }
        })
    })
}

/// Parses `args` (program name first), runs the command and returns the exit code.
pub fn main_with_args<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let parsed = command()
        .try_get_matches_from(args)
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints `error: ...` with a usage hint; help and version exit 0.
            let _ = e.print();
            return e.exit_code();
        }
    };
    process::install_stop_handlers(&cli.command);
    match dispatch(&cli.command) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{}", error::render(&e));
            e.exit_code()
        }
    }
}

/// The `msc` binary's entry point.
pub fn main() -> i32 {
    process::ensure_runtime_dir();
    main_with_args(std::env::args_os())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_definition_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn bad_usage_exits_2() {
        assert_eq!(main_with_args(["msc", "run"]), 2);
        assert_eq!(main_with_args(["msc", "run", "x", "--backend", "tpu"]), 2);
        assert_eq!(main_with_args(["msc", "run", "x", "--set", "novalue"]), 2);
        assert_eq!(
            main_with_args(["msc", "validate", "x", "--tolerance", "-1"]),
            2
        );
        assert_eq!(main_with_args(["msc", "nosuchcommand"]), 2);
        assert_eq!(main_with_args(["msc", "bench", "--sweeps", "0"]), 2);
        assert_eq!(main_with_args(["msc", "sweep", "torus", "--out", "x"]), 2);
        assert_eq!(
            main_with_args(["msc", "plot", "a", "--relative-error", "--out", "x.png"]),
            2
        );
    }
}
