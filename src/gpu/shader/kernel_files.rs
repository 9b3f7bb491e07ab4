//! Kernel bodies read from files, to time variants of a kernel with one binary (the
//! `kernel-files` feature, off by default; `benches/gpu.sh --variants`). With
//! `MSC_KERNEL_FILES=DIR`, a kernel whose `DIR/<name>.wgsl` exists is compiled from that
//! body instead of its own: the same libraries, bindings and overrides, so a variant
//! changes one kernel's code and nothing the host does. Every bench record names the
//! folder and the kernels it replaced (`kernel_files`), so a variant's figures never pass
//! for the built-in kernels'. Without the feature nothing is read and [`label`] is `None`.

/// The environment variable naming the folder.
pub const VAR: &str = "MSC_KERNEL_FILES";

use crate::gpu::error::GpuError;

#[cfg(feature = "kernel-files")]
mod files {
    use super::VAR;
    use std::collections::BTreeMap;
    use std::sync::OnceLock;

    /// The folder and the bodies it holds, by kernel name.
    pub struct Files {
        pub dir: String,
        pub bodies: BTreeMap<String, &'static str>,
    }

    /// The folder's bodies, read once (`None` without the variable). A body lives as
    /// long as the pipelines compiled from it, so it is leaked once.
    /// An error is the message of `GpuError::KernelFiles`.
    pub fn files() -> &'static Result<Option<Files>, String> {
        static FILES: OnceLock<Result<Option<Files>, String>> = OnceLock::new();
        FILES.get_or_init(|| {
            let Some(dir) = std::env::var_os(VAR) else {
                return Ok(None);
            };
            let shown = dir.to_string_lossy().into_owned();
            let read = |what: std::io::Error| format!("{VAR}={shown}: {what}");
            let mut bodies = BTreeMap::new();
            for entry in std::fs::read_dir(&dir).map_err(read)? {
                let path = entry.map_err(read)?.path();
                if path.extension().is_none_or(|e| e != "wgsl") {
                    continue;
                }
                let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
                    continue;
                };
                let body = std::fs::read_to_string(&path)
                    .map_err(|e| format!("{VAR}={shown}: {}: {e}", path.display()))?;
                bodies.insert(name.to_string(), &*Box::leak(body.into_boxed_str()));
            }
            if bodies.is_empty() {
                return Err(format!("{VAR}={shown} holds no <kernel>.wgsl file"));
            }
            Ok(Some(Files { dir: shown, bodies }))
        })
    }
}

/// Checks the folder (when the feature is on and the variable set): readable, holding at
/// least one `.wgsl` file, each named after a kernel `known` accepts. Commands call it
/// before they build a solver, so a typo'd file name is an error, not a run of the
/// built-in kernel under the variant's label.
pub fn check(known: impl Fn(&str) -> bool) -> Result<(), GpuError> {
    #[cfg(feature = "kernel-files")]
    if let Some(f) = files::files()
        .as_ref()
        .map_err(|e| GpuError::KernelFiles(e.clone()))?
    {
        if let Some(file) = f.bodies.keys().find(|n| !known(n)) {
            return Err(GpuError::KernelFiles(format!(
                "{VAR}={}: {file}.wgsl names no kernel of msc",
                f.dir
            )));
        }
    }
    let _ = &known;
    Ok(())
}

/// The body kernel `name` is compiled from: its file's, under the feature with the
/// variable set, else `builtin`. A folder [`check`] would refuse panics here (a
/// development build; the commands check it first).
pub fn body(name: &str, builtin: &'static str) -> &'static str {
    #[cfg(feature = "kernel-files")]
    match files::files() {
        Ok(Some(f)) => {
            if let Some(b) = f.bodies.get(name) {
                return b;
            }
        }
        Ok(None) => {}
        Err(e) => panic!("{e}"),
    }
    let _ = name;
    builtin
}

/// `DIR: a, b` (the folder and the kernels it replaces) when bodies come from files.
pub fn label() -> Option<String> {
    #[cfg(feature = "kernel-files")]
    if let Ok(Some(f)) = files::files() {
        let names: Vec<&str> = f.bodies.keys().map(String::as_str).collect();
        return Some(format!("{}: {}", f.dir, names.join(", ")));
    }
    None
}
