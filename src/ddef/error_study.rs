//! The paper's DDEF error protocol (Section 4.1.1, Figure 3 b-d, Table 1): relative error
//! of the approximate field against the exact all-pairs field, with the far field
//! interpolated or ignored, for random charges at random test sites, mesh charges at
//! random test sites and mesh charges at the charges.

use super::field::{exact_fields_at, Ddef, Evaluation, Grid};
use super::lattice_field::LatticeDdef;
use super::plan::LatticePlan;
use super::{DdefError, DdefGrid, DdefVariant};
use glam::DVec3;
use std::time::Instant;

/// Summary of per-target relative errors |E_approx - E_exact| / |E_exact|. With no target
/// measured (`count` 0) every statistic is NaN (`null` in JSON), never a zero error.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct ErrorStats {
    /// Targets measured.
    pub count: usize,
    pub mean: f64,
    /// Population standard deviation.
    pub std: f64,
    pub median: f64,
    pub max: f64,
    /// mean |E_approx - E_exact| / rms |E_exact|: not inflated where the exact field
    /// nearly cancels (inside a charged shell, at a symmetry centre).
    pub abs_over_rms: f64,
    /// Targets left out of the relative statistics: exact field non-finite, or below
    /// [`ErrorStats::CANCELLED`] times the rms (cancelled to rounding, direction noise).
    pub skipped: usize,
}

impl ErrorStats {
    /// Exact fields below this fraction of the rms are rounding noise of a cancellation.
    pub const CANCELLED: f64 = 1e-9;

    /// Relative errors of `approx` against `exact`, target by target.
    pub fn of(approx: &[DVec3], exact: &[DVec3]) -> Self {
        let finite: Vec<(DVec3, DVec3)> = approx
            .iter()
            .zip(exact)
            .filter(|(_, e)| e.is_finite())
            .map(|(a, e)| (*a, *e))
            .collect();
        let rms = (finite.iter().map(|(_, e)| e.length_squared()).sum::<f64>()
            / finite.len().max(1) as f64)
            .sqrt();
        let mut errs = Vec::with_capacity(finite.len());
        let mut abs_sum = 0.0;
        for (a, e) in &finite {
            let d = (*a - *e).length();
            abs_sum += d;
            let n = e.length();
            if n > Self::CANCELLED * rms {
                errs.push(d / n);
            }
        }
        let skipped = exact.len() - errs.len();
        let count = errs.len();
        if count == 0 {
            return Self {
                count,
                mean: f64::NAN,
                std: f64::NAN,
                median: f64::NAN,
                max: f64::NAN,
                abs_over_rms: f64::NAN,
                skipped,
            };
        }
        let mean = errs.iter().sum::<f64>() / count as f64;
        let var = errs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / count as f64;
        errs.sort_unstable_by(f64::total_cmp);
        Self {
            count,
            mean,
            std: var.sqrt(),
            median: errs[count / 2],
            max: errs[count - 1],
            abs_over_rms: if rms > 0.0 {
                abs_sum / finite.len() as f64 / rms
            } else {
                0.0
            },
            skipped,
        }
    }
}

/// Where the field is tested.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Targets {
    /// Random points in the charges' bounding box (no charge there: no self term).
    RandomSites,
    /// At the charges themselves, each without its own field (the force protocol).
    Charges,
}

/// The schemes compared: Algorithm 1 as printed, DDEF corrected, Section 3.3.3's near
/// set, far field ignored.
pub const SCHEMES: [(&str, Evaluation); 4] = [
    ("paper", Evaluation::Ddef(DdefVariant::Paper)),
    ("corrected", Evaluation::Ddef(DdefVariant::Corrected)),
    ("paper_text", Evaluation::TextNearSet),
    ("near_only", Evaluation::NearOnly),
];

/// One line of the study.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct StudyRow {
    /// "random" or the scene's name.
    pub charges: String,
    pub targets: Targets,
    /// Charged particles.
    pub n: usize,
    /// Halton samples (the grid has m + 8 sites; the lattice about as many).
    pub m: usize,
    /// "delaunay" or "lattice".
    pub grid: &'static str,
    /// Sites of the grid.
    pub sites: usize,
    pub scheme: &'static str,
    #[serde(flatten)]
    pub stats: ErrorStats,
    /// Mean size of the exactly summed near set S(x) over the charges.
    pub mean_near: f64,
    /// Grid, location, N/M lists and far field, ms.
    pub build_ms: f64,
    /// The grid alone (sites and tetrahedralization), ms: part of `build_ms`.
    pub grid_ms: f64,
    /// Evaluation at the targets, ms.
    pub eval_ms: f64,
}

/// Runs every scheme for the charged particles of (x, q) with `m` samples, tested at
/// `targets` (random `sites` or the charges). `label` names the charge set.
pub fn study(
    label: &str,
    x: &[DVec3],
    q: &[f64],
    softening: f64,
    m: usize,
    targets: Targets,
    sites: &[DVec3],
) -> Result<Vec<StudyRow>, DdefError> {
    study_on(
        label,
        x,
        q,
        softening,
        m,
        DdefGrid::Delaunay,
        targets,
        sites,
    )
}

/// [`study`] on a grid of the given kind.
#[allow(clippy::too_many_arguments)]
pub fn study_on(
    label: &str,
    x: &[DVec3],
    q: &[f64],
    softening: f64,
    m: usize,
    grid: DdefGrid,
    targets: Targets,
    sites: &[DVec3],
) -> Result<Vec<StudyRow>, DdefError> {
    let t0 = Instant::now();
    let eval = DdefEval::build(x, q, softening, m, grid)?;
    let grid_ms = eval.grid_ms;
    let build_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mean_near = eval.mean_near_count();
    let sources = eval.source_particles();
    let exact = match targets {
        Targets::RandomSites => exact_fields_at(sites, None, x, q, softening),
        Targets::Charges => {
            let idx: Vec<usize> = sources.iter().map(|&i| i as usize).collect();
            let pts: Vec<DVec3> = idx.iter().map(|&i| x[i]).collect();
            exact_fields_at(&pts, Some(&idx), x, q, softening)
        }
    };
    let mut rows = Vec::with_capacity(SCHEMES.len());
    for (scheme, scheme_eval) in SCHEMES {
        let t1 = Instant::now();
        let approx = match targets {
            Targets::RandomSites => eval.fields_at(sites, scheme_eval)?,
            Targets::Charges => eval.fields_at_sources(scheme_eval),
        };
        let eval_ms = t1.elapsed().as_secs_f64() * 1e3;
        rows.push(StudyRow {
            charges: label.to_string(),
            targets,
            n: sources.len(),
            m,
            grid: grid.name(),
            sites: eval.sites(),
            scheme,
            stats: ErrorStats::of(&approx, &exact),
            mean_near,
            build_ms,
            grid_ms,
            eval_ms,
        });
    }
    Ok(rows)
}

/// One evaluation on either grid, timed: the lattice under the solver's plan for these
/// charges, or the paper's Delaunay grid around them.
struct DdefEval {
    lattice: Option<LatticeDdef>,
    delaunay: Option<Ddef>,
    grid_ms: f64,
}

impl DdefEval {
    fn build(
        x: &[DVec3],
        q: &[f64],
        eps: f64,
        m: usize,
        grid: DdefGrid,
    ) -> Result<Self, DdefError> {
        let t0 = Instant::now();
        match grid {
            DdefGrid::Lattice => {
                let (lo, hi) = charge_bounds(x, q).ok_or(DdefError::NoCharges)?;
                let samples = u32::try_from(m).unwrap_or(u32::MAX);
                let plan = LatticePlan::new(lo, hi, samples)?;
                let grid_ms = t0.elapsed().as_secs_f64() * 1e3;
                let l = LatticeDdef::new(&plan, x, q, eps)?;
                // The far field is computed on first use; count it in the build.
                l.far_field();
                Ok(Self {
                    lattice: Some(l),
                    delaunay: None,
                    grid_ms,
                })
            }
            DdefGrid::Delaunay => {
                let charged: Vec<DVec3> = (0..x.len().min(q.len()))
                    .filter(|&i| q[i] != 0.0)
                    .map(|i| x[i])
                    .collect();
                let g = Grid::around_with(&charged, m, 0.0, grid)?;
                let grid_ms = t0.elapsed().as_secs_f64() * 1e3;
                let d = Ddef::on_grid(std::sync::Arc::new(g), x, q, eps, None)?;
                d.far_field();
                Ok(Self {
                    lattice: None,
                    delaunay: Some(d),
                    grid_ms,
                })
            }
        }
    }
    fn source_particles(&self) -> Vec<u32> {
        match (&self.lattice, &self.delaunay) {
            (Some(l), _) => l.source_particles().to_vec(),
            (_, Some(d)) => d.source_particles().to_vec(),
            _ => Vec::new(),
        }
    }
    fn sites(&self) -> usize {
        match (&self.lattice, &self.delaunay) {
            (Some(l), _) => l.frame().dims.iter().map(|&r| r as usize).product(),
            (_, Some(d)) => d.grid().sites().len(),
            _ => 0,
        }
    }
    fn mean_near_count(&self) -> f64 {
        match (&self.lattice, &self.delaunay) {
            (Some(l), _) => l.mean_near_count(),
            (_, Some(d)) => d.mean_near_count(),
            _ => 0.0,
        }
    }
    fn fields_at(&self, p: &[DVec3], e: Evaluation) -> Result<Vec<DVec3>, DdefError> {
        match (&self.lattice, &self.delaunay) {
            (Some(l), _) => l.fields_at(p, e),
            (_, Some(d)) => d.fields_at(p, e),
            _ => Ok(Vec::new()),
        }
    }
    fn fields_at_sources(&self, e: Evaluation) -> Vec<DVec3> {
        match (&self.lattice, &self.delaunay) {
            (Some(l), _) => l.fields_at_sources(e),
            (_, Some(d)) => d.fields_at_sources(e),
            _ => Vec::new(),
        }
    }
}

/// SplitMix64: a small seeded generator for reproducible random charges and sites.
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Uniform in the box [lo, hi).
    pub fn point_in(&mut self, lo: DVec3, hi: DVec3) -> DVec3 {
        lo + (hi - lo) * DVec3::new(self.unit(), self.unit(), self.unit())
    }
}

/// `count` uniform random points in [lo, hi].
pub fn random_points(lo: DVec3, hi: DVec3, count: usize, seed: u64) -> Vec<DVec3> {
    let mut rng = SplitMix64(seed);
    (0..count).map(|_| rng.point_in(lo, hi)).collect()
}

/// The bounding box of the charged particles of (x, q) (`None` without charges).
pub fn charge_bounds(x: &[DVec3], q: &[f64]) -> Option<(DVec3, DVec3)> {
    let mut it = x
        .iter()
        .zip(q)
        .filter(|(_, &qi)| qi != 0.0)
        .map(|(p, _)| *p);
    let first = it.next()?;
    Some(it.fold((first, first), |(lo, hi), p| (lo.min(p), hi.max(p))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_target_measured_is_no_statistic_not_a_zero_error() {
        // Every exact field cancelled (0) or non-finite: nothing to divide by.
        let s = ErrorStats::of(&[DVec3::X, DVec3::Y], &[DVec3::ZERO, DVec3::NAN]);
        assert_eq!((s.count, s.skipped), (0, 2));
        for v in [s.mean, s.std, s.median, s.max, s.abs_over_rms] {
            assert!(v.is_nan(), "{s:?}");
        }
        let json = serde_json::to_value(s).unwrap();
        assert!(json["mean"].is_null() && json["max"].is_null(), "{json}");
        // One target measured: its error.
        let s = ErrorStats::of(&[DVec3::X * 1.5], &[DVec3::X]);
        assert_eq!((s.count, s.mean, s.max), (1, 0.5, 0.5));
    }
}
