//! Finding a scene: a file path, else a built-in scene's name; its text, where errors say
//! it came from, the folder its relative paths start from and its default name.

use super::{builtin, SceneError};
use std::path::{Path, PathBuf};

pub(super) struct Source {
    pub text: String,
    pub origin: String,
    pub path: Option<PathBuf>,
    pub base_dir: PathBuf,
    pub default_name: String,
}

pub(super) fn resolve(scene: &str) -> Result<Source, SceneError> {
    let path = Path::new(scene);
    let read = |path: &Path| -> Result<Source, SceneError> {
        let text = crate::files::read_to_string(path).map_err(|source| SceneError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Source {
            text,
            origin: path.display().to_string(),
            path: Some(path.to_path_buf()),
            base_dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
            default_name: path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| scene.to_string()),
        })
    };
    // `builtin:NAME` is the built-in scene whatever files the current folder holds: a
    // batch's plan names its built-in scenes so, as its runs may load them from elsewhere.
    let explicit = scene.strip_prefix(super::BUILTIN_PREFIX);
    if explicit.is_none() && path.is_file() {
        return read(path);
    }
    if let Some(b) = builtin::find(explicit.unwrap_or(scene)) {
        return Ok(Source {
            text: b.text.to_string(),
            origin: format!("built-in scene '{}'", b.name),
            path: None,
            base_dir: PathBuf::new(),
            default_name: b.name.to_string(),
        });
    }
    let looks_like_path = explicit.is_none()
        && (scene.ends_with(".toml")
            || scene.contains('/')
            || scene.contains(std::path::MAIN_SEPARATOR)
            || path.exists());
    if looks_like_path {
        return read(path);
    }
    Err(SceneError::UnknownScene {
        name: scene.to_string(),
        builtins: builtin::BUILTINS
            .iter()
            .map(|b| b.name.to_string())
            .collect(),
    })
}
