//! Outputs never replace inputs: every command checks the files it will write against the
//! files it reads before it writes anything ([`OutputError::WouldOverwriteInput`]).
//!
//! Two paths are the same file when they resolve to the same absolute path (symbolic
//! links and `..` followed; an output that does not exist yet is resolved through its
//! folder) or, both existing, when they are one file under two names (a hard link: the
//! same device and inode).

use super::OutputError;
use std::path::{Path, PathBuf};

/// `path` made absolute with symbolic links resolved: the whole path when it exists, else
/// its folder (resolved the same way) joined with its name; `None` when neither resolves.
fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = path.canonicalize() {
        return Some(p);
    }
    let name = path.file_name()?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Some(resolved(parent)?.join(name))
}

/// Whether writing `output` would replace the file `input`.
pub fn same_file(output: &Path, input: &Path) -> bool {
    if let (Some(a), Some(b)) = (resolved(output), resolved(input)) {
        if a == b {
            return true;
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(a), Ok(b)) = (std::fs::metadata(output), std::fs::metadata(input)) {
            return a.dev() == b.dev() && a.ino() == b.ino();
        }
    }
    false
}

/// Whether `input` lies inside the folder `dir` (at any depth), which a command is about
/// to clear or fill.
pub fn inside(input: &Path, dir: &Path) -> bool {
    match (resolved(input), dir.canonicalize()) {
        (Some(i), Ok(d)) => i.starts_with(d),
        _ => false,
    }
}

/// Every file `scene` reads (the scene file itself, an OBJ mesh), for the checks below.
pub fn of_scene(scene: &crate::scene::LoadedScene) -> Vec<(&Path, &'static str)> {
    let mut inputs: Vec<(&Path, &'static str)> = Vec::new();
    if let Some(src) = &scene.source {
        inputs.push((src.as_path(), "scene file"));
    }
    let read = scene.inputs.iter().map(|d| Path::new(d.path.as_str()));
    inputs.extend(read.map(|p| (p, "file the scene reads")));
    inputs
}

/// [`OutputError::WouldOverwriteInput`] for the first of `inputs` ((path, what it is))
/// that `output`, named by the option `option`, would replace.
pub fn refuse_overwrite(
    output: &Path,
    option: &'static str,
    inputs: &[(&Path, &'static str)],
) -> Result<(), OutputError> {
    match inputs.iter().find(|(input, _)| same_file(output, input)) {
        Some(&(input, what)) => Err(OutputError::WouldOverwriteInput {
            path: input.to_path_buf(),
            what,
            option,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_file_is_found_under_every_name() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::create_dir(d.join("run")).unwrap();
        let input = d.join("run/energy.csv");
        std::fs::write(&input, "x").unwrap();
        // The same path spelled another way, through `..` and `.`.
        assert!(same_file(&d.join("run/../run/./energy.csv"), &input));
        // A symbolic link to the folder.
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(d.join("run"), d.join("link")).unwrap();
            assert!(same_file(&d.join("link/energy.csv"), &input));
            // A hard link: another name, the same file.
            std::fs::hard_link(&input, d.join("hard.csv")).unwrap();
            assert!(same_file(&d.join("hard.csv"), &input));
        }
        // Another file, existing or not, and a file that does not exist yet.
        std::fs::write(d.join("run/other.csv"), "x").unwrap();
        assert!(!same_file(&d.join("run/other.csv"), &input));
        assert!(!same_file(&d.join("run/new.png"), &input));
        assert!(inside(&input, &d.join("run")));
        assert!(!inside(&input, &d.join("elsewhere")));
        let out = d.join("run/../run/energy.csv");
        match refuse_overwrite(&out, "--out", &[(&input, "energy log")]) {
            Err(OutputError::WouldOverwriteInput { what, .. }) => assert_eq!(what, "energy log"),
            other => panic!("{other:?}"),
        }
    }
}
