//! `msc ddef-error`: the DDEF approximation against the exact all-pairs field, with the
//! paper's protocol (Section 4.1.1, Figure 3 b-d, Table 1): random charges at random test
//! sites, mesh charges at random test sites, mesh charges at the charges; for each grid
//! size m, Algorithm 1 as printed (`paper`), the `corrected` variant, Section 3.3.3's
//! near set (`paper_text`) and the far field ignored (`near_only`); on the paper's
//! Halton + Delaunay grid, the regular lattice grid, or both (`--grid`).

use super::CliError;
use crate::ddef::error_study::{charge_bounds, random_points, study_on, StudyRow, Targets};
use crate::ddef::DdefGrid;
use crate::run::RunError;
use crate::scene;
use glam::DVec3;
use std::io::Write;
use std::path::PathBuf;

/// Charge per random particle (the paper's 8 uC; relative errors do not depend on it).
pub const RANDOM_CHARGE: f64 = 8e-6;

/// `--grid`: which DDEF grid(s) to measure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum GridChoice {
    /// Halton samples + Delaunay (the paper's)
    Delaunay,
    /// Regular lattice of Kuhn-split cubes
    Lattice,
    /// Both, one after the other
    #[default]
    Both,
}

impl GridChoice {
    pub fn grids(self) -> &'static [DdefGrid] {
        match self {
            Self::Delaunay => &[DdefGrid::Delaunay],
            Self::Lattice => &[DdefGrid::Lattice],
            Self::Both => &[DdefGrid::Delaunay, DdefGrid::Lattice],
        }
    }
}

/// A number in [0, 1] (`--thickness`).
fn unit_interval(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("must be in [0, 1], got {s}"))
    }
}

/// `--shape`: where the random charges lie.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Shape {
    /// Uniform in the unit cube
    #[default]
    Cube,
    /// Nearly coplanar: z within `--thickness` of 1/2
    Plane,
    /// Nearly collinear: y and z within `--thickness` of 1/2
    Line,
}

impl Shape {
    /// Moves `p` (uniform in the unit cube) onto the shape, thin axes `thickness` wide.
    pub fn place(self, p: DVec3, thickness: f64) -> DVec3 {
        let thin = |v: f64| 0.5 + (v - 0.5) * thickness;
        match self {
            Self::Cube => p,
            Self::Plane => DVec3::new(p.x, p.y, thin(p.z)),
            Self::Line => DVec3::new(p.x, thin(p.y), thin(p.z)),
        }
    }
}

#[derive(Clone, Debug, clap::Args)]
pub struct DdefErrorArgs {
    /// A scene file or built-in name whose charged particles are the mesh charges
    #[arg(value_name = "SCENE", required_unless_present = "random")]
    pub scene: Option<String>,
    /// Override one scene value (as for `msc run`); repeat for several
    #[arg(long = "set", value_name = "KEY=VALUE", requires = "scene")]
    pub set: Vec<String>,
    /// Random charges only, N of them uniform in the unit cube, instead of a SCENE (with a
    /// SCENE the random case has as many charges as the scene)
    #[arg(long, value_name = "N", conflicts_with = "scene",
          value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub random: Option<u64>,
    /// Shape of the random charges: uniform in the unit cube, on the plane z = 1/2 or on
    /// the line y = z = 1/2 (degenerate sets), each thin axis spread over `--thickness`
    #[arg(long, value_enum, default_value_t = Shape::Cube)]
    pub shape: Shape,
    /// Width of the thin axes of `--shape plane|line` (0: exactly coplanar or collinear)
    #[arg(long, value_name = "T", default_value_t = 0.0, value_parser = unit_interval)]
    pub thickness: f64,
    /// Grid sizes m (Halton samples), comma separated or repeated [default: 1000,2000,10000]
    #[arg(long, value_name = "M", value_delimiter = ',', num_args = 1..,
          value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub samples: Vec<u32>,
    /// Random test sites per case [default: as many as charges]
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub tests: Option<u64>,
    /// DDEF grid: the paper's Halton + Delaunay, the regular lattice, or both
    #[arg(long, value_enum, default_value_t = GridChoice::Both)]
    pub grid: GridChoice,
    /// Seed of the random charges and test sites
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also write one JSON object per row to this file ("-" for standard output, which
    /// then carries only the JSON lines)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// One charge set and where it is tested.
struct Case {
    label: String,
    x: Vec<DVec3>,
    q: Vec<f64>,
    /// Softening, m.
    eps: f64,
    targets: Vec<Targets>,
}

/// Runs the study and prints it; returns the rows.
pub fn execute(args: &DdefErrorArgs) -> Result<Vec<StudyRow>, CliError> {
    let samples: Vec<usize> = if args.samples.is_empty() {
        vec![1000, 2000, 10000]
    } else {
        args.samples.iter().map(|&m| m as usize).collect()
    };
    let mut cases: Vec<Case> = Vec::new();
    let n_random = match (&args.scene, args.random) {
        (Some(name), _) => {
            let sc = scene::load(name, &args.set).map_err(|source| RunError::Scene {
                scene: name.clone(),
                source: Box::new(source),
            })?;
            if let Some(json) = args.json.as_deref().filter(|p| p.as_os_str() != "-") {
                let inputs = crate::output::inputs::of_scene(&sc);
                crate::output::inputs::refuse_overwrite(json, "--json", &inputs)?;
            }
            let (x, q) = (sc.system.positions().to_vec(), sc.system.charges().to_vec());
            let n = q.iter().filter(|&&c| c != 0.0).count();
            if n == 0 {
                return Err(CliError::from(RunError::Config(
                    crate::config::ConfigError::new(
                        "material.charge",
                        format!(
                            "scene '{}' has no charged particle to test DDEF on",
                            sc.name
                        ),
                    ),
                )));
            }
            cases.push(Case {
                label: sc.name.clone(),
                x,
                q,
                eps: sc.config.coulomb.softening,
                targets: vec![Targets::RandomSites, Targets::Charges],
            });
            n
        }
        (None, Some(n)) => n as usize,
        // clap requires one of the two.
        (None, None) => return Ok(Vec::new()),
    };
    let x: Vec<DVec3> = random_points(DVec3::ZERO, DVec3::ONE, n_random, args.seed)
        .into_iter()
        .map(|p| args.shape.place(p, args.thickness))
        .collect();
    let q = vec![RANDOM_CHARGE; n_random];
    let random_targets = if args.scene.is_some() {
        vec![Targets::RandomSites]
    } else {
        vec![Targets::RandomSites, Targets::Charges]
    };
    cases.insert(
        0,
        Case {
            label: "random".into(),
            x,
            q,
            eps: 0.0,
            targets: random_targets,
        },
    );

    let json_only = args.json.as_deref().is_some_and(|p| p.as_os_str() == "-");
    // A file is written atomically (committed after the last row), so an interrupted study
    // never leaves a complete-looking partial file; `-` streams to stdout.
    let mut json_file = match &args.json {
        Some(p) if !json_only => Some(crate::output::AtomicFile::create(p)?),
        _ => None,
    };
    let mut json_stdout = json_only.then(std::io::stdout);
    if !json_only {
        println!(
            "DDEF field error vs exact all-pairs: |E_ddef - E| / |E| per target \
             (mean, std, median, max); rms: mean |dE| / rms |E|; near: mean exact-sum set size; \
             sites: grid sites; grid_ms: the grid alone; build_ms: grid + lists + far field; \
             eval_ms: at the targets"
        );
        println!(
            "{:<12} {:<8} {:>7} {:>7} {:<9} {:>7} {:<11} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>8} {:>9} {:>8}",
            "charges",
            "targets",
            "n",
            "m",
            "grid",
            "sites",
            "scheme",
            "mean",
            "std",
            "median",
            "max",
            "rms",
            "near",
            "grid_ms",
            "build_ms",
            "eval_ms"
        );
    }
    let mut all = Vec::new();
    for Case {
        label,
        x,
        q,
        eps,
        targets,
    } in &cases
    {
        let Some((lo, hi)) = charge_bounds(x, q) else {
            continue;
        };
        let k = args
            .tests
            .map_or_else(|| q.iter().filter(|&&c| c != 0.0).count(), |k| k as usize);
        let sites = random_points(lo, hi, k, args.seed.wrapping_add(1));
        for &m in &samples {
            for (&grid, &t) in args
                .grid
                .grids()
                .iter()
                .flat_map(|g| targets.iter().map(move |t| (g, t)))
            {
                let rows =
                    study_on(label, x, q, *eps, m, grid, t, &sites).map_err(CliError::Ddef)?;
                for r in rows {
                    if !json_only {
                        print_row(&r);
                    }
                    let w: Option<&mut dyn Write> = match (&mut json_file, &mut json_stdout) {
                        (Some(f), _) => Some(f),
                        (None, Some(s)) => Some(s),
                        (None, None) => None,
                    };
                    if let Some(w) = w {
                        let line = serde_json::to_string(&r).unwrap_or_default();
                        let path = args.json.clone().unwrap_or_default();
                        writeln!(w, "{line}").map_err(|source| {
                            CliError::from(crate::output::OutputError::Write { path, source })
                        })?;
                    }
                    all.push(r);
                }
            }
        }
    }
    if let Some(f) = json_file {
        f.commit()?;
    }
    Ok(all)
}

fn print_row(r: &StudyRow) {
    let t = match r.targets {
        Targets::RandomSites => "sites",
        Targets::Charges => "charges",
    };
    println!(
        "{:<12} {:<8} {:>7} {:>7} {:<9} {:>7} {:<11} {:>8.4} {:>8.4} {:>8.4} {:>8.3} {:>8.4} {:>7.1} {:>8.1} {:>9.1} {:>8.1}",
        r.charges,
        t,
        r.n,
        r.m,
        r.grid,
        r.sites,
        r.scheme,
        r.stats.mean,
        r.stats.std,
        r.stats.median,
        r.stats.max,
        r.stats.abs_over_rms,
        r.mean_near,
        r.grid_ms,
        r.build_ms,
        r.eval_ms
    );
    if r.stats.count == 0 {
        // The statistics are NaN (null in JSON): never read as a zero error.
        println!(
            "{:<12} (no target measured: all {} had a cancelled or non-finite exact field)",
            "", r.stats.skipped
        );
    } else if r.stats.skipped > 0 {
        println!(
            "{:<12} ({} targets with a cancelled exact field left out)",
            "", r.stats.skipped
        );
    }
}
