//! Options shared by the commands that load a scene.

use crate::run::{self, RunError};
use crate::scene::LoadedScene;

/// `SCENE` and `--set`.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct SceneArgs {
    /// A scene file (TOML) or a built-in scene name (see `msc scenes`)
    #[arg(value_name = "SCENE")]
    pub scene: String,
    /// Override one scene value, e.g. `--set integrator.dt=0.01` or
    /// `--set integrator.solver.method=cg`; repeat for several. Keys are the scene file's
    /// dotted paths, values are TOML
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_set)]
    pub set: Vec<String>,
}

fn parse_set(s: &str) -> Result<String, String> {
    match s.split_once('=') {
        Some((k, _)) if !k.trim().is_empty() => Ok(s.to_string()),
        _ => Err(format!("expected KEY=VALUE, got '{s}'")),
    }
}

impl SceneArgs {
    /// Loads the scene with its overrides, then `--steps` (see [`run::load::load`]).
    pub fn load(&self, steps: Option<u64>) -> Result<LoadedScene, RunError> {
        run::load::load(&self.scene, &self.set, steps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_values_need_a_key() {
        assert!(parse_set("a.b=1").is_ok());
        assert!(parse_set("a.b").is_err());
        assert!(parse_set("=1").is_err());
    }
}
