//! A file of lines (the JSON records of `msc bench`) that holds every line so far after
//! each one: rewritten atomically per line, so a benchmark stopped at any point, even
//! killed, leaves its finished rows, never a truncated one.

use super::{write_atomic, AtomicFile, OutputError};
use std::path::{Path, PathBuf};

/// The lines written so far and where they go.
#[derive(Debug)]
pub struct LinesFile {
    target: PathBuf,
    text: String,
}

impl LinesFile {
    /// Checks that `target` can be written (a file name in a writable folder) before any
    /// work, leaving the file as it is until the first line.
    pub fn create(target: &Path) -> Result<Self, OutputError> {
        drop(AtomicFile::create(target)?);
        Ok(Self {
            target: target.to_path_buf(),
            text: String::new(),
        })
    }

    /// Appends `line` (and a newline) and replaces the file with every line so far.
    pub fn push(&mut self, line: &str) -> Result<(), OutputError> {
        self.text.push_str(line);
        self.text.push('\n');
        write_atomic(&self.target, self.text.as_bytes())
    }

    /// The path written.
    pub fn target(&self) -> &Path {
        &self.target
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_line_leaves_the_whole_file_so_far() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.jsonl");
        std::fs::write(&path, "old\n").unwrap();
        let mut f = LinesFile::create(&path).unwrap();
        // Untouched until the first line.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
        f.push("{\"a\":1}").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n");
        f.push("{\"a\":2}").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"a\":1}\n{\"a\":2}\n"
        );
        // No temporary file is left beside it.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn an_unwritable_target_is_refused_before_any_line() {
        let dir = tempfile::tempdir().unwrap();
        let e = LinesFile::create(&dir.path().join("missing/rows.jsonl")).unwrap_err();
        assert!(e.to_string().contains("missing/rows.jsonl"), "{e}");
    }
}
