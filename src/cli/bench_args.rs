//! `msc bench`'s arguments: parsed and checked once (typed sizes, sample counts, shapes)
//! and turned into the library's [`BenchOptions`].

use super::error::CliError;
use crate::bench::{self, Backend, BenchOptions, Cloud, Workload};
use crate::config::{DdefSamples, DdefVariant};
use crate::model::System;
use std::path::PathBuf;

/// `--workload`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkloadArg {
    /// Cloth grid: structural + shear springs, IMEX with a fixed count of Jacobi sweeps
    Cloth,
    /// Random charges in a cube, no springs: all-pairs Coulomb with symplectic Euler
    Coulomb,
    /// The same cloud with the DDEF far field: one row per size and --samples m, with its
    /// force error against exact all-pairs
    Ddef,
    /// W worlds (the built-in torus, then a 144-particle cloth) with parameters varied per
    /// world, stepped as one GPU batch and one after another: world-steps per second of
    /// both and their ratio, one row per world scene and --worlds W
    Worlds,
    /// A mesh file (--mesh FILE) with the cloth's material and solver settings, unpinned:
    /// one row, with the seconds the file took to load
    Mesh,
    /// Reverse-mode gradients on the cloth: one gradient's time over one forward run's,
    /// the states kept and their memory, for 1, 1000 and every spring stiffness
    /// (`--horizon` steps; see `grad::cost`); a charged cloth (--charged-fraction) adds
    /// the charge scale under all-pairs Coulomb and under DDEF at each --samples m
    Adjoint,
    /// Cloth, then Coulomb (DDEF, worlds, mesh and adjoint only when asked for)
    All,
}

/// `--backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchBackendArg {
    /// The wgpu solver on any adapter wgpu finds, software ones (lavapipe) included
    Gpu,
    /// The f64 CPU reference, for comparison (use small sizes)
    Cpu,
}

#[derive(Clone, Debug, clap::Args)]
pub struct BenchArgs {
    /// Which workloads to run
    #[arg(long, value_enum, default_value_t = WorkloadArg::All)]
    pub workload: WorkloadArg,
    /// Sizes: particles (cloth) or charges (coulomb), comma-separated, run in increasing
    /// order; suffixes K = 1024 and M = 1048576 [default: 1K,4K,16K,64K,256K,1M on the GPU,
    /// 1K,4K on the CPU]
    #[arg(
        long,
        value_name = "N,N,...",
        value_delimiter = ',',
        value_parser = parse_size,
        long_help = "Sizes: particles (cloth) or charges (coulomb), comma-separated, run in \
            increasing order; suffixes K = 1024 and M = 1048576 accepted (e.g. 1K,64K,1M). \
            A cloth is the grid closest to square with exactly N vertices when N has \
            such a factorisation no more elongated than 4:1, else the nearest one (the \
            record's n says what was built) [default: 1K,4K,16K,64K,256K,1M on the GPU, \
            1K,4K on the CPU]"
    )]
    pub sizes: Vec<usize>,
    /// Jacobi sweeps per cloth step (a fixed count, no convergence test)
    #[arg(long, value_name = "N", default_value_t = bench::DEFAULT_SWEEPS, value_parser = parse_count)]
    pub sweeps: u32,
    /// Timed steps per repeat, after the warm-up
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = parse_steps)]
    pub steps: u64,
    /// Timed blocks of --steps steps per size: ms_per_step is their median, with the
    /// smallest and largest beside it
    #[arg(long, value_name = "R", default_value_t = bench::DEFAULT_REPEATS, value_parser = parse_count)]
    pub repeats: u32,
    /// Untimed steps before timing, at least (first dispatches compile and page in)
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub warmup: u64,
    /// The warm-up goes on until this many milliseconds of wall time have passed (GPU
    /// clocks and caches settle by time, not by step count); 0: --warmup steps only
    #[arg(long, value_name = "MS", default_value_t = bench::DEFAULT_WARMUP_MS, value_parser = parse_milliseconds, allow_negative_numbers = true)]
    pub warmup_ms: f64,
    /// Steps profiled one at a time per kernel with timestamp queries after timing (GPU
    /// only; 0: none): each kernel's median, smallest and largest time over them
    #[arg(long, value_name = "N", default_value_t = bench::DEFAULT_PROFILE_STEPS)]
    pub profile_steps: u32,
    /// Fraction of the cloth's particles that carry a charge (evenly spread), 0 to 1
    #[arg(long, value_name = "F", default_value_t = 0.0, value_parser = parse_fraction, allow_negative_numbers = true)]
    pub charged_fraction: f64,
    /// FP32 peak of the device in TFLOP/s, for percent_of_fp32_peak [default: from the
    /// adapter name for H100 SXM, H100 PCIe, H200]
    #[arg(long, value_name = "X", value_parser = parse_positive, allow_negative_numbers = true)]
    pub peak_tflops: Option<f64>,
    /// Memory bandwidth of the device in GB/s, for percent_of_bandwidth [default: from the
    /// adapter name for H100 SXM, H100 PCIe, H200]
    #[arg(long, value_name = "X", value_parser = parse_positive, allow_negative_numbers = true)]
    pub bandwidth_gbs: Option<f64>,
    /// Which solver is measured
    #[arg(long, value_enum, default_value_t = BenchBackendArg::Gpu)]
    pub backend: BenchBackendArg,
    /// Stop growing the sizes of a workload once one size takes longer than this many
    /// seconds (setup included); the larger sizes are recorded as skipped
    #[arg(long, value_name = "S", default_value_t = 60.0, value_parser = parse_positive, allow_negative_numbers = true)]
    pub max_seconds: f64,
    /// DDEF workload (and the adjoint workload's DDEF rows): the sample counts m,
    /// comma-separated; `auto` is the scenes' default rule (m = 5.7 sqrt(n)), resolved at
    /// each size
    #[arg(long, value_name = "M,M,...", value_delimiter = ',', value_parser = parse_samples, default_value = "1000,10000")]
    pub samples: Vec<DdefSamples>,
    /// DDEF workload: evaluations between tetrahedralizations (1: every step, as in the
    /// paper's Algorithm 1)
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = parse_count)]
    pub rebuild_every: u32,
    /// DDEF workload: the variant, corrected (the default) or paper (Algorithm 1 as
    /// printed, without the `corrected` sums: their cost is the difference)
    #[arg(long, value_name = "VARIANT", default_value = "corrected", value_parser = parse_variant)]
    pub ddef_variant: DdefVariant,
    /// Coulomb and DDEF workloads: where the charges lie, uniform in a 1 m cube or crowded
    /// onto a surface in it (sphere, torus, or a wavy sheet as a cloth), with the same
    /// signs
    #[arg(long, value_name = "SHAPE", default_value = "cube", value_parser = parse_cloud)]
    pub cloud: Cloud,
    /// DDEF workload on a GPU: the near gather's shape, auto (by how crowded the cells
    /// are at set-up: cell/128/unrolled or cell/256/unrolled), cell/N, cell/N/unrolled or
    /// packed/N with N = 64, 128 or 256 invocations per workgroup, or cell/N/dual (two
    /// targets per invocation) with N = 64 or 128 (the same results; for measuring them)
    #[arg(long, value_name = "SHAPE", default_value = "auto")]
    pub ddef_gather: crate::gpu::GatherChoice,
    /// DDEF workload on a GPU: the far field's shape, staged or direct/N with N = 1, 2 or
    /// 4 sites per invocation (the same results; for measuring them)
    #[arg(long, value_name = "SHAPE", default_value = "staged")]
    pub ddef_far: crate::gpu::DdefFar,
    /// Worlds workload: the world counts W, comma-separated, run in increasing order
    #[arg(
        long,
        value_name = "W,W,...",
        value_delimiter = ',',
        value_parser = parse_worlds,
        default_value = "1,16,64,256,1024",
        long_help = "Worlds workload: the world counts W, comma-separated, run in increasing \
            order. Each row steps W worlds of one kind (the built-in torus scene, 145 charged \
            particles with 50 Jacobi sweeps; or a 12 x 12 cloth with --sweeps sweeps and \
            --charged-fraction charged), world w with its charge and stiffness scaled by a \
            factor in [1/2, 2] and its time step by one in [1/sqrt 2, sqrt 2], spread evenly \
            and fixed by w (world 0 is the scene itself). The W worlds run as one GPU batch \
            (several when one would exceed the device's limits) and, block by block in \
            turn, one after another, each on its own solver on the same device"
    )]
    pub worlds: Vec<usize>,
    /// Mesh workload: the mesh file (.obj, .ply, .stl, or tetrahedra: .msh, .vtk, .vtu,
    /// .node/.ele, .mesh); given alone it runs the mesh workload, given with --workload W
    /// it adds a mesh row after W's
    #[arg(long, value_name = "FILE", required_if_eq("workload", "mesh"))]
    pub mesh: Option<PathBuf>,
    /// Adjoint workload: the steps T of the run differentiated
    #[arg(long, value_name = "T", default_value_t = 100, value_parser = parse_steps)]
    pub horizon: u64,
    /// Adjoint workload, CPU: the relative residual the adjoint's CG solves stop at
    #[arg(long = "adjoint-tolerance", value_name = "TOL", default_value_t = 1e-12, value_parser = parse_positive)]
    pub adjoint_tolerance: f64,
    /// Adjoint workload, CPU: exact (CG to --adjoint-tolerance) or scene (the scene's
    /// solver and sweeps, as the GPU adjoint)
    #[arg(long = "adjoint-solve", value_enum, default_value_t = super::fit::AdjointSolveArg::Exact)]
    pub adjoint_solve: super::fit::AdjointSolveArg,
    /// Adjoint workload: its checkpointing (auto, all, two-level, two-level:C, binomial:S;
    /// each refused when the states its plan keeps exceed --checkpoint-memory)
    #[arg(long, value_name = "POLICY", default_value = "auto")]
    pub checkpoint: crate::grad::Checkpointing,
    /// Adjoint workload: memory its kept states may take, in MiB, as `msc fit`'s (auto
    /// chooses its policy by it; a policy whose plan keeps more is refused)
    #[arg(long = "checkpoint-memory", value_name = "MIB", default_value_t = crate::grad::checkpoint::DEFAULT_MEMORY_BUDGET >> 20)]
    pub checkpoint_memory: u64,
    /// Also write the JSON lines to FILE (replaced atomically after each row, so a
    /// stopped benchmark leaves its finished rows)
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// No table or progress on stderr (the JSON lines still go to stdout)
    #[arg(long, short)]
    pub quiet: bool,
}

impl BenchArgs {
    /// The workloads this command runs, in order: `all` is the cloth and Coulomb ones, or
    /// with `--mesh FILE` the mesh's alone; a mesh file given with another workload adds
    /// its row after that workload's.
    fn runs(&self) -> Vec<WorkloadArg> {
        use WorkloadArg as W;
        let mut runs = match self.workload {
            W::All if self.mesh.is_some() => vec![],
            W::All => vec![W::Cloth, W::Coulomb],
            w => vec![w],
        };
        if self.mesh.is_some() && !runs.contains(&W::Mesh) {
            runs.push(W::Mesh);
        }
        runs
    }

    /// Every option at its default (`msc bench` with no arguments).
    fn defaults() -> Self {
        use clap::{Args, FromArgMatches};
        let command = Self::augment_args(clap::Command::new("bench"));
        let matches = command
            .try_get_matches_from(["bench"])
            .expect("no option is required");
        Self::from_arg_matches(&matches).expect("the defaults parse")
    }

    /// The first option set away from its default that no workload run here reads (or,
    /// for the kernel shapes, that the CPU backend does not), as a usage error: not a
    /// value silently ignored (`msc bench --workload cloth --cloud sphere`).
    pub fn unread_option(&self) -> Option<CliError> {
        use WorkloadArg as W;
        const CLOTHS: &[WorkloadArg] = &[W::Cloth, W::Worlds, W::Mesh, W::Adjoint];
        const CLOTHS_W: &str = "the cloth, worlds, mesh and adjoint workloads";
        const DDEF_W: &str = "the ddef workload";
        const ADJ_W: &str = "the adjoint workload";
        const GPU_W: &str = "the ddef workload on the GPU backend";
        let d = Self::defaults();
        // The adjoint workload has DDEF rows only for a charged cloth.
        let samples_read_by: &[W] = if self.charged_fraction > 0.0 {
            &[W::Ddef, W::Adjoint]
        } else {
            &[W::Ddef]
        };
        // (option, set away from its default, the workloads that read it, in words)
        #[rustfmt::skip]
        let checks: [(&'static str, bool, &[W], &'static str); 14] = [
            ("--sweeps", self.sweeps != d.sweeps, CLOTHS, CLOTHS_W),
            ("--charged-fraction", self.charged_fraction != d.charged_fraction, CLOTHS, CLOTHS_W),
            ("--samples", self.samples != d.samples, samples_read_by, "the ddef workload and a charged adjoint workload"),
            ("--rebuild-every", self.rebuild_every != d.rebuild_every, &[W::Ddef], DDEF_W),
            ("--ddef-variant", self.ddef_variant != d.ddef_variant, &[W::Ddef], DDEF_W),
            ("--cloud", self.cloud != d.cloud, &[W::Coulomb, W::Ddef], "the coulomb and ddef workloads"),
            ("--ddef-gather", self.ddef_gather != d.ddef_gather, &[W::Ddef], GPU_W),
            ("--ddef-far", self.ddef_far != d.ddef_far, &[W::Ddef], GPU_W),
            ("--worlds", self.worlds != d.worlds, &[W::Worlds], "the worlds workload"),
            ("--horizon", self.horizon != d.horizon, &[W::Adjoint], ADJ_W),
            ("--adjoint-tolerance", self.adjoint_tolerance != d.adjoint_tolerance, &[W::Adjoint], ADJ_W),
            ("--adjoint-solve", self.adjoint_solve != d.adjoint_solve, &[W::Adjoint], ADJ_W),
            ("--checkpoint", self.checkpoint != d.checkpoint, &[W::Adjoint], ADJ_W),
            ("--checkpoint-memory", self.checkpoint_memory != d.checkpoint_memory, &[W::Adjoint], ADJ_W),
        ];
        let runs = self.runs();
        let names: Vec<String> = runs
            .iter()
            .filter_map(clap::ValueEnum::to_possible_value)
            .map(|v| v.get_name().to_string())
            .collect();
        let plural = if names.len() > 1 { "s" } else { "" };
        let cpu = self.backend == BenchBackendArg::Cpu;
        checks
            .into_iter()
            .find_map(|(option, set, readers, words)| {
                let workload = runs.iter().any(|w| readers.contains(w));
                let gpu_only = matches!(option, "--ddef-gather" | "--ddef-far");
                let read = workload && !(gpu_only && cpu);
                (set && !read).then(|| CliError::UnreadOption {
                    option,
                    readers: words,
                    runs: if workload {
                        "it on the CPU backend".to_string()
                    } else {
                        format!("the {} workload{plural}", names.join(" and "))
                    },
                })
            })
    }
}

/// `1024`, `4K`, `1M`: at least 4, at most the particle limit.
fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (digits, scale) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1usize << 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 1usize << 20),
        _ => (t, 1),
    };
    let n = digits
        .parse::<usize>()
        .ok()
        .and_then(|d| d.checked_mul(scale))
        .ok_or_else(|| format!("expected a size such as 4096, 4K or 1M, got '{s}'"))?;
    if n < 4 {
        return Err(format!("a size must be at least 4, got '{s}'"));
    }
    if n > System::MAX_PARTICLES {
        return Err(format!(
            "'{s}' exceeds the particle limit of {}",
            System::MAX_PARTICLES
        ));
    }
    Ok(n)
}

/// A world count: 1 to 65536.
fn parse_worlds(s: &str) -> Result<usize, String> {
    const MOST: usize = 1 << 16;
    match s.trim().parse::<usize>() {
        Ok(w) if (1..=MOST).contains(&w) => Ok(w),
        _ => Err(format!(
            "expected a world count from 1 to {MOST}, got '{s}'"
        )),
    }
}

/// The choice named `s` among `names`, or an error listing them.
fn named<T>(s: &str, names: &[&str], from_name: fn(&str) -> Option<T>) -> Result<T, String> {
    from_name(s.trim()).ok_or_else(|| format!("expected one of {}, got '{s}'", names.join(", ")))
}

fn parse_cloud(s: &str) -> Result<Cloud, String> {
    named(s, &Cloud::ALL.map(Cloud::name), Cloud::from_name)
}

fn parse_variant(s: &str) -> Result<DdefVariant, String> {
    named(s, &DdefVariant::NAMES, DdefVariant::from_name)
}

/// A DDEF sample count (1 to the configuration's limit) or `auto`.
fn parse_samples(s: &str) -> Result<DdefSamples, String> {
    let limit = crate::config::DdefConfig::MAX_SAMPLES;
    if s.trim() == "auto" {
        return Ok(DdefSamples::Auto);
    }
    match s.trim().parse::<u32>() {
        Ok(m) if (1..=limit).contains(&m) => Ok(DdefSamples::Count(m)),
        _ => Err(format!(
            "expected a sample count from 1 to {limit} or auto, got '{s}'"
        )),
    }
}

fn parse_count(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("expected a whole number of at least 1, got '{s}'")),
    }
}

fn parse_steps(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("expected a whole number of at least 1, got '{s}'")),
    }
}

fn parse_fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if (0.0..=1.0).contains(&f) => Ok(f),
        _ => Err(format!("expected a fraction from 0 to 1, got '{s}'")),
    }
}

/// A wall time in milliseconds: 0 up to a day.
fn parse_milliseconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=86_400_000.0).contains(&x) => Ok(x),
        _ => Err(format!(
            "expected milliseconds from 0 to 86400000, got '{s}'"
        )),
    }
}

fn parse_positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("expected a positive number, got '{s}'")),
    }
}

impl BenchArgs {
    /// The library's options for these arguments.
    pub fn options(&self) -> BenchOptions {
        let backend = match self.backend {
            BenchBackendArg::Gpu => Backend::Gpu,
            BenchBackendArg::Cpu => Backend::Cpu,
        };
        let sizes = if !self.sizes.is_empty() {
            self.sizes.clone()
        } else if backend == Backend::Gpu {
            bench::GPU_SIZES.to_vec()
        } else {
            bench::CPU_SIZES.to_vec()
        };
        let workloads = self
            .runs()
            .into_iter()
            .filter_map(|w| match w {
                WorkloadArg::Cloth => Some(Workload::Cloth),
                WorkloadArg::Coulomb => Some(Workload::Coulomb),
                WorkloadArg::Ddef => Some(Workload::Ddef),
                WorkloadArg::Worlds => Some(Workload::Worlds),
                WorkloadArg::Mesh => Some(Workload::Mesh),
                // Run by `bench_adjoint`, not `bench::run`; `runs` resolves `All`.
                WorkloadArg::Adjoint | WorkloadArg::All => None,
            })
            .collect();
        BenchOptions {
            workloads,
            sizes,
            sweeps: self.sweeps,
            steps: self.steps,
            repeats: self.repeats,
            warmup: self.warmup,
            warmup_ms: self.warmup_ms,
            profile_steps: self.profile_steps,
            charged_fraction: self.charged_fraction,
            peak_tflops: self.peak_tflops,
            bandwidth_gbs: self.bandwidth_gbs,
            backend,
            max_seconds: self.max_seconds,
            ddef_samples: self.samples.clone(),
            ddef_rebuild_every: self.rebuild_every,
            ddef_variant: self.ddef_variant,
            cloud: self.cloud,
            ddef_gather: self.ddef_gather,
            ddef_far: self.ddef_far,
            worlds: self.worlds.clone(),
            mesh: self.mesh.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_suffixes_and_reject_nonsense() {
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        for bad in ["", "K", "x", "-5", "3", "1.5K", "99999999999M"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn option_values_are_checked() {
        assert!(parse_fraction("0.5").is_ok());
        assert!(parse_fraction("1.5").is_err());
        assert!(parse_fraction("nan").is_err());
        assert!(parse_positive("0").is_err());
        assert!(parse_positive("inf").is_err());
        assert!(parse_count("0").is_err());
        assert!(parse_steps("0").is_err());
        assert_eq!(parse_worlds("64"), Ok(64));
        assert_eq!(parse_samples("auto"), Ok(DdefSamples::Auto));
        assert_eq!(parse_samples("2000"), Ok(DdefSamples::Count(2000)));
        for bad in ["0", "-1", "Auto", "10000001"] {
            assert!(parse_samples(bad).is_err(), "{bad}");
        }
        for bad in ["0", "-1", "x", "65537"] {
            assert!(parse_worlds(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_cloud("torus"), Ok(Cloud::Torus));
        assert!(parse_cloud("cone").is_err());
        assert_eq!(parse_milliseconds("0"), Ok(0.0));
        assert_eq!(parse_milliseconds("250.5"), Ok(250.5));
        for bad in ["-1", "nan", "inf", "1e12", "soon"] {
            assert!(parse_milliseconds(bad).is_err(), "{bad}");
        }
    }
}
