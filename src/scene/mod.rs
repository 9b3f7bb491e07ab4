//! Scene files: TOML in, a validated [`System`] and [`Config`] out.

use crate::config::Config;
use crate::model::System;
use std::path::PathBuf;

/// What `[output]` asks a run to write.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputConfig {
    /// Steps between frames and energy rows.
    pub every: u64,
    pub frames: FrameFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameFormat {
    Ply,
    None,
}

/// A scene loaded, overridden and validated.
#[derive(Clone, Debug)]
pub struct LoadedScene {
    pub name: String,
    pub system: System,
    pub config: Config,
    pub output: OutputConfig,
    /// The file it came from (`None` for a built-in scene).
    pub source: Option<PathBuf>,
    /// The scene as TOML after `--set` overrides, for reproducing the run.
    pub resolved_toml: String,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SceneError {
    #[error("{0}")]
    Placeholder(String),
}

/// Loads a scene from a path or a built-in name, applying `key=value` overrides.
pub fn load(scene: &str, overrides: &[String]) -> Result<LoadedScene, SceneError> {
    let _ = (scene, overrides);
    todo!("scene helper")
}

/// Built-in scenes: (name, one-line description).
pub fn builtin_names() -> Vec<(&'static str, &'static str)> {
    todo!("scene helper")
}
