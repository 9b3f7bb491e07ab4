//! `energy.csv`: one row per output step, every energy term in J.
//!
//! Numbers are written with Rust's `{:e}`, the shortest decimal that parses back to the
//! same f64, so no precision is lost. Non-finite values appear as `NaN`, `inf`, `-inf`.
//! The file is streamed into a temporary file during the run and renamed into place by
//! [`EnergyLog::finish`]. A log dropped unfinished (a write error such as a full disk, a
//! failed step) still appears, holding every row flushed before: rows once written are
//! never lost.

use super::atomic::AtomicFile;
use super::OutputError;
use crate::digest::FileDigest;
use crate::measures::Energies;
use std::io::Write;
use std::path::Path;

/// The CSV header (also the column order).
pub const HEADER: &str = "step,time,kinetic,elastic,coulomb,gravity,external,total";

/// Steps at which a run records a row (and a frame): 0, every, 2 every, ... and the last.
pub fn output_steps(steps: u64, every: u64) -> impl Iterator<Item = u64> {
    let every = every.max(1);
    let regular = (0..=steps / every).map(move |k| k * every);
    let last = (!steps.is_multiple_of(every)).then_some(steps);
    regular.chain(last)
}

/// Number of rows [`output_steps`] yields.
pub fn output_count(steps: u64, every: u64) -> u64 {
    let every = every.max(1);
    steps / every + 1 + u64::from(!steps.is_multiple_of(every))
}

/// A streaming writer for `energy.csv`.
#[derive(Debug)]
pub struct EnergyLog {
    /// `None` once finished.
    file: Option<AtomicFile>,
    rows: u64,
    /// Bytes handed to the file so far, and of those the ones a flush put on disk.
    written: u64,
    flushed: u64,
}

impl EnergyLog {
    /// Starts the file (under a temporary name) and writes the header.
    pub fn create(path: &Path) -> Result<Self, OutputError> {
        let mut log = Self {
            file: Some(AtomicFile::create(path)?),
            rows: 0,
            written: 0,
            flushed: 0,
        };
        log.write(format!("{HEADER}\n").as_bytes())?;
        // The header counts as flushed: a run that fails before its first row (say, its
        // first frame cannot be written) still leaves a log with its header, not 0 bytes.
        log.flush()?;
        Ok(log)
    }

    fn file(&mut self) -> &mut AtomicFile {
        self.file.as_mut().expect("open until finished")
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), OutputError> {
        self.file().write_bytes(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Appends the row for `step` at time `time`.
    pub fn row(&mut self, step: u64, time: f64, e: &Energies) -> Result<(), OutputError> {
        let mut line = format!("{step},{time:e}");
        for (_, v) in e.terms() {
            line.push_str(&format!(",{v:e}"));
        }
        line.push('\n');
        self.write(line.as_bytes())?;
        self.rows += 1;
        Ok(())
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Flushes the rows so far to the temporary file (for a reader following the run).
    pub fn flush(&mut self) -> Result<(), OutputError> {
        let file = self.file();
        let target = file.target().to_path_buf();
        file.flush()
            .map_err(|source| OutputError::write(&target, source))?;
        self.flushed = self.written;
        Ok(())
    }

    /// Makes the file appear under its final name; returns the size and SHA-256 of what
    /// was written, under the file's name.
    pub fn finish(mut self) -> Result<FileDigest, OutputError> {
        let file = self.file.take().expect("open until finished");
        let name = file
            .target()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        file.commit_digest(&name)
    }
}

impl Drop for EnergyLog {
    /// Unfinished (an error ended the run): the flushed rows still appear, whole rows only.
    fn drop(&mut self) {
        if let Some(file) = self.file.take() {
            let _ = file.commit_prefix(self.flushed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_steps_include_zero_every_multiple_and_the_last() {
        assert_eq!(output_steps(10, 5).collect::<Vec<_>>(), vec![0, 5, 10]);
        assert_eq!(output_steps(12, 5).collect::<Vec<_>>(), vec![0, 5, 10, 12]);
        assert_eq!(output_steps(3, 5).collect::<Vec<_>>(), vec![0, 3]);
        assert_eq!(output_steps(1, 1).collect::<Vec<_>>(), vec![0, 1]);
        for (s, e) in [(10, 5), (12, 5), (3, 5), (1, 1), (1000, 7)] {
            assert_eq!(output_steps(s, e).count() as u64, output_count(s, e));
        }
    }

    #[test]
    fn a_log_dropped_unfinished_keeps_its_flushed_rows() {
        let dir = std::env::temp_dir().join(format!("msc-energy-drop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("energy.csv");
        let e = Energies::new(1.0, 2.0, 3.0, 4.0, 5.0);
        {
            let mut log = EnergyLog::create(&path).unwrap();
            log.row(0, 0.0, &e).unwrap();
            log.row(1, 0.5, &e).unwrap();
            log.flush().unwrap();
            // Written but never flushed when the run fails: not vouched for, dropped.
            log.row(2, 1.0, &e).unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let steps: Vec<&str> = text.lines().skip(1).map(|l| &l[..1]).collect();
        assert_eq!(steps, ["0", "1"], "{text}");
        assert!(text.ends_with('\n'));
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_log_dropped_before_its_first_flush_keeps_its_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("energy.csv");
        {
            let mut log = EnergyLog::create(&path).unwrap();
            // Step 0's row is written, then its frame fails: the row was never flushed.
            log.row(0, 0.0, &Energies::new(1.0, 2.0, 3.0, 4.0, 5.0))
                .unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{HEADER}\n")
        );
    }

    #[test]
    fn rows_round_trip_at_full_precision() {
        let dir = std::env::temp_dir().join(format!("msc-energy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("energy.csv");
        let e = Energies::new(0.1, 1.0 / 3.0, -2.5e-300, 1e300, f64::NAN);
        let mut log = EnergyLog::create(&path).unwrap();
        log.row(7, 0.105, &e).unwrap();
        assert!(!path.exists(), "the file appears only when finished");
        log.finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(HEADER));
        let cols: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert_eq!(cols[0], "7");
        assert_eq!(cols[1].parse::<f64>().unwrap(), 0.105);
        assert_eq!(cols[3].parse::<f64>().unwrap(), 1.0 / 3.0);
        assert_eq!(cols[4].parse::<f64>().unwrap(), -2.5e-300);
        assert_eq!(cols[5].parse::<f64>().unwrap(), 1e300);
        assert!(cols[6].parse::<f64>().unwrap().is_nan());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
