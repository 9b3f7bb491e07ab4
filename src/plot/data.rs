//! Reading runs' `energy.csv`, and the derived curves: relative error against a
//! reference run (interpolated in time) and relative drift.

use super::PlotError;
use crate::output::energy::HEADER;
use std::path::{Path, PathBuf};

/// An energy term, a column of `energy.csv`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Term {
    Kinetic,
    Elastic,
    Coulomb,
    Gravity,
    External,
    #[default]
    Total,
}

impl Term {
    pub const ALL: [Term; 6] = [
        Term::Kinetic,
        Term::Elastic,
        Term::Coulomb,
        Term::Gravity,
        Term::External,
        Term::Total,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Term::Kinetic => "kinetic",
            Term::Elastic => "elastic",
            Term::Coulomb => "coulomb",
            Term::Gravity => "gravity",
            Term::External => "external",
            Term::Total => "total",
        }
    }
    fn index(self) -> usize {
        self as usize
    }
}

/// One run's `energy.csv`.
#[derive(Clone, Debug)]
pub struct EnergyTable {
    /// The file read.
    pub path: PathBuf,
    pub steps: Vec<u64>,
    /// Seconds.
    pub times: Vec<f64>,
    /// Per row, the six terms in [`Term::ALL`] order (J; may be non-finite after a
    /// divergence).
    pub rows: Vec<[f64; 6]>,
}

impl EnergyTable {
    /// Reads `RUN/energy.csv`, or the file itself when `run` is a file.
    pub fn read(run: &Path) -> Result<Self, PlotError> {
        let path = if run.is_dir() {
            run.join(crate::output::run_dir::ENERGY_FILE)
        } else {
            run.to_path_buf()
        };
        let text = crate::files::read_to_string(&path).map_err(|source| PlotError::Read {
            path: path.clone(),
            source,
        })?;
        Self::parse(&text, &path)
    }

    fn parse(text: &str, path: &Path) -> Result<Self, PlotError> {
        let bad = |line: usize, message: String| PlotError::Parse {
            path: path.to_path_buf(),
            line,
            message,
        };
        let mut lines = text.lines();
        let header = lines.next().unwrap_or_default().trim();
        if header != HEADER {
            return Err(bad(1, format!("expected the header '{HEADER}'")));
        }
        let mut table = Self {
            path: path.to_path_buf(),
            steps: vec![],
            times: vec![],
            rows: vec![],
        };
        for (i, line) in lines.enumerate() {
            let n = i + 2;
            if line.trim().is_empty() {
                continue;
            }
            let cols: Vec<&str> = line.split(',').map(str::trim).collect();
            if cols.len() != 8 {
                return Err(bad(n, format!("expected 8 columns, found {}", cols.len())));
            }
            let step = cols[0]
                .parse::<u64>()
                .map_err(|_| bad(n, format!("step '{}' is not an integer", cols[0])))?;
            let num = |s: &str| {
                s.parse::<f64>()
                    .map_err(|_| bad(n, format!("'{s}' is not a number")))
            };
            let time = num(cols[1])?;
            if let Some(&prev) = table.times.last() {
                // Also rejects NaN times.
                if time.partial_cmp(&prev) != Some(std::cmp::Ordering::Greater) {
                    return Err(bad(n, format!("time {time} does not increase")));
                }
            }
            let mut row = [0.0; 6];
            for (k, v) in row.iter_mut().enumerate() {
                *v = num(cols[k + 2])?;
            }
            table.steps.push(step);
            table.times.push(time);
            table.rows.push(row);
        }
        if table.rows.is_empty() {
            return Err(bad(2, "no energy rows".into()));
        }
        Ok(table)
    }

    /// The column of one term.
    pub fn column(&self, term: Term) -> Vec<f64> {
        self.rows.iter().map(|r| r[term.index()]).collect()
    }

    /// The time step, from the rows (time / step); `None` with only step 0.
    pub fn dt(&self) -> Option<f64> {
        self.steps
            .iter()
            .zip(&self.times)
            .rev()
            .find(|(s, _)| **s > 0)
            .map(|(s, t)| t / *s as f64)
    }

    /// The term at time `t`, linearly interpolated between rows; `None` outside the
    /// table's time span.
    pub fn at(&self, term: Term, t: f64) -> Option<f64> {
        let ts = &self.times;
        let (first, last) = (*ts.first()?, *ts.last()?);
        // Rounding of time = step * dt: accept a hair beyond the ends.
        let slack = 1e-9 * (last - first).abs().max(1.0);
        if t < first - slack || t > last + slack {
            return None;
        }
        let k = ts.partition_point(|&x| x < t);
        let col = term.index();
        if k == 0 {
            return Some(self.rows[0][col]);
        }
        if k == ts.len() {
            return Some(self.rows[k - 1][col]);
        }
        let (t0, t1) = (ts[k - 1], ts[k]);
        let (e0, e1) = (self.rows[k - 1][col], self.rows[k][col]);
        let w = (t - t0) / (t1 - t0);
        Some(e0 + w * (e1 - e0))
    }

    /// The scale a relative error divides by: |E(0)|, or the largest |E| when E(0) = 0
    /// (a kinetic energy released from rest). `None` when the term is zero throughout.
    pub fn scale(&self, term: Term) -> Option<f64> {
        let col = self.column(term);
        let first = col[0].abs();
        if first.is_finite() && first > 0.0 {
            return Some(first);
        }
        let max = col
            .iter()
            .filter(|v| v.is_finite())
            .fold(0.0f64, |m, v| m.max(v.abs()));
        (max > 0.0).then_some(max)
    }

    /// Why [`Self::scale`] is `None`, in words: the term is zero throughout, or it has no
    /// finite non-zero value (an infinite or NaN energy is not a zero one).
    pub fn why_no_scale(&self, term: Term) -> String {
        let col = self.column(term);
        match col.iter().find(|v| !v.is_finite()) {
            Some(v) => format!(
                "has no finite non-zero {} energy (it is {v} where it is not zero)",
                term.name()
            ),
            None => format!("has a zero {} energy throughout", term.name()),
        }
    }
}

/// (t, |E(t) - E_ref(t)| / scale) at the run's times inside the reference's span, where
/// `scale` is [`EnergyTable::scale`] of the reference. Non-finite values are kept (they
/// break the curve where the run diverged).
pub fn relative_error(
    run: &EnergyTable,
    reference: &EnergyTable,
    term: Term,
) -> Result<Vec<(f64, f64)>, PlotError> {
    let scale = reference.scale(term).ok_or_else(|| PlotError::NoData {
        what: format!(
            "the reference {} {}; a relative error needs a finite non-zero scale",
            reference.path.display(),
            reference.why_no_scale(term)
        ),
    })?;
    let col = run.column(term);
    Ok(run
        .times
        .iter()
        .zip(col)
        .filter_map(|(&t, e)| reference.at(term, t).map(|r| (t, (e - r).abs() / scale)))
        .collect())
}

/// (t, |E(t) - E(0)| / scale) with the run's own [`EnergyTable::scale`].
pub fn drift(run: &EnergyTable, term: Term) -> Result<Vec<(f64, f64)>, PlotError> {
    let scale = run.scale(term).ok_or_else(|| PlotError::NoData {
        what: format!(
            "{} {}; a relative drift needs a finite non-zero scale",
            run.path.display(),
            run.why_no_scale(term)
        ),
    })?;
    let col = run.column(term);
    let e0 = col[0];
    Ok(run
        .times
        .iter()
        .zip(col)
        .map(|(&t, e)| (t, (e - e0).abs() / scale))
        .collect())
}

/// Mean and standard deviation of the values at t >= `from`; `None` when there are none,
/// or when one is non-finite (the run diverged in the window).
pub fn window_stats(points: &[(f64, f64)], from: f64) -> Option<(f64, f64)> {
    let vals: Vec<f64> = points
        .iter()
        .filter(|(t, _)| *t >= from)
        .map(|&(_, v)| v)
        .collect();
    if vals.is_empty() || vals.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let n = vals.len() as f64;
    let mean = vals.iter().sum::<f64>() / n;
    let var = vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    Some((mean, var.sqrt()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(rows: &[(u64, f64, f64)]) -> EnergyTable {
        let mut text = format!("{HEADER}\n");
        for (s, t, total) in rows {
            text.push_str(&format!("{s},{t},0,0,0,0,0,{total}\n"));
        }
        EnergyTable::parse(&text, Path::new("e.csv")).unwrap()
    }

    #[test]
    fn the_reference_is_interpolated_at_the_runs_times() {
        // Reference: E = 10 + t at a fine step; run: E = 10 + 2t at a coarse one.
        let reference = table(&[
            (0, 0.0, 10.0),
            (1, 0.5, 10.5),
            (2, 1.0, 11.0),
            (3, 1.5, 11.5),
        ]);
        let run = table(&[
            (0, 0.0, 10.0),
            (1, 0.75, 11.5),
            (2, 1.5, 13.0),
            (3, 2.25, 14.5),
        ]);
        let err = relative_error(&run, &reference, Term::Total).unwrap();
        // t = 2.25 lies beyond the reference and is left out.
        assert_eq!(err.len(), 3);
        let expect = [(0.0, 0.0), (0.75, 0.75 / 10.0), (1.5, 1.5 / 10.0)];
        for ((t, e), (te, ee)) in err.iter().zip(expect) {
            assert_eq!(*t, te);
            assert!((e - ee).abs() < 1e-12, "{e} vs {ee}");
        }
        assert_eq!(run.dt(), Some(0.75));
    }

    #[test]
    fn drift_and_window_statistics() {
        let run = table(&[(0, 0.0, -4.0), (1, 1.0, -3.0), (2, 2.0, -5.0)]);
        let d = drift(&run, Term::Total).unwrap();
        assert_eq!(d, vec![(0.0, 0.0), (1.0, 0.25), (2.0, 0.25)]);
        assert_eq!(window_stats(&d, 1.0), Some((0.25, 0.0)));
        assert_eq!(window_stats(&d, 5.0), None);
        // A kinetic energy starting at 0 is scaled by its largest value.
        assert!(drift(&run, Term::Kinetic).is_err());
    }

    #[test]
    fn malformed_tables_name_the_line() {
        for (text, needle) in [
            ("a,b\n", "header"),
            (&format!("{HEADER}\n0,0,1,2\n") as &str, "line 2"),
            (&format!("{HEADER}\n0,0,0,0,0,0,0,x\n"), "'x'"),
            (
                &format!("{HEADER}\n0,1,0,0,0,0,0,0\n1,1,0,0,0,0,0,0\n"),
                "increase",
            ),
            (&format!("{HEADER}\n"), "no energy rows"),
        ] {
            let e = EnergyTable::parse(text, Path::new("e.csv")).unwrap_err();
            assert!(e.to_string().contains(needle), "{text:?}: {e}");
        }
        // Non-finite values, as a diverged run writes them, are read.
        let t = EnergyTable::parse(
            &format!("{HEADER}\n0,0,0,0,0,0,0,1\n5,1,NaN,inf,-inf,0,0,NaN\n"),
            Path::new("e.csv"),
        )
        .unwrap();
        assert!(t.rows[1][0].is_nan() && t.rows[1][1] == f64::INFINITY);
    }
}
