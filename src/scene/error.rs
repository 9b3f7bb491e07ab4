//! What loading a scene can fail with: every error names the dotted key and where it was
//! set (the file and line, or the `--set` argument).

use super::{SceneSize, Shortfall};
use crate::model::{MeshError, ModelError};
use std::fmt;
use std::path::PathBuf;

/// Where in the input an error is: the file (or built-in), the line when the text sets the
/// key, and the `--set` argument when an override set it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub origin: String,
    pub line: Option<usize>,
    pub set_by: Option<String>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(arg) = &self.set_by {
            write!(f, " (--set {arg})")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SceneError {
    /// The scene file could not be read.
    #[error("cannot read scene file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Neither a file nor a built-in scene.
    #[error(
        "'{name}' is neither a scene file nor a built-in scene (built-in scenes: {})",
        builtins.join(", ")
    )]
    UnknownScene { name: String, builtins: Vec<String> },
    /// The text is not valid TOML.
    #[error("{at}: malformed TOML{}: {message}", key.as_ref().map(|k| format!(" at {k}")).unwrap_or_default())]
    Syntax {
        at: Location,
        key: Option<String>,
        message: String,
    },
    /// Valid TOML that does not fit the schema: unknown key, wrong type, missing key,
    /// unknown name (mesh kind, integrator...).
    #[error("{at}: {key}: {message}")]
    Schema {
        at: Location,
        key: String,
        message: String,
    },
    /// A value out of its range, or keys that conflict.
    #[error("{at}: {key}: {message}")]
    Invalid {
        at: Location,
        key: String,
        message: String,
    },
    /// The mesh could not be built (bad parameter, unreadable OBJ).
    #[error("{at}: {key}: {}", mesh_message(source))]
    Mesh {
        at: Location,
        key: String,
        /// Boxed to keep `SceneError` small.
        source: Box<MeshError>,
    },
    /// The particles and springs failed [`System::new`](crate::model::System::new)'s checks.
    #[error("{at}: {key}: {source}")]
    Model {
        at: Location,
        key: String,
        /// Boxed to keep `SceneError` small.
        source: Box<ModelError>,
    },
    /// A malformed `--set` argument.
    #[error("--set {arg}: {message}")]
    Override { arg: String, message: String },
    /// The scene is too large for this machine: the estimate, made before the mesh is
    /// built, exceeds the available host memory or a GPU buffer limit.
    #[error(
        "{at}: {key}: the {} mesh has {} particles and {} springs: {shortfall}",
        size.mesh, size.particles, size.springs
    )]
    TooLarge {
        at: Location,
        key: String,
        /// Boxed to keep `SceneError` small.
        size: Box<SceneSize>,
        shortfall: Box<Shortfall>,
    },
}

impl SceneError {
    /// The dotted key the error is about, when it has one.
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Syntax { key, .. } => key.as_deref(),
            Self::Schema { key, .. }
            | Self::Invalid { key, .. }
            | Self::Mesh { key, .. }
            | Self::Model { key, .. }
            | Self::TooLarge { key, .. } => Some(key),
            _ => None,
        }
    }
    /// The line in the scene text, when known.
    pub fn line(&self) -> Option<usize> {
        match self {
            Self::Syntax { at, .. }
            | Self::Schema { at, .. }
            | Self::Invalid { at, .. }
            | Self::Mesh { at, .. }
            | Self::Model { at, .. }
            | Self::TooLarge { at, .. } => at.line,
            _ => None,
        }
    }
}

fn mesh_message(e: &MeshError) -> String {
    match e {
        // The key already names the parameter.
        MeshError::BadParameter { message, .. } => message.clone(),
        other => other.to_string(),
    }
}
