//! Options shared by the commands that load a scene.

use super::CliError;
use crate::scene::{self, LoadedScene};

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

/// Loads the scene, then applies `--steps` directly to the configuration (a scene may give
/// a `duration` instead of `steps`, so `--set integrator.steps` could conflict with it).
pub fn load(args: &SceneArgs, steps: Option<u64>) -> Result<LoadedScene, CliError> {
    let mut scene = scene::load(&args.scene, &args.set).map_err(|source| CliError::Scene {
        scene: args.scene.clone(),
        source,
    })?;
    if let Some(n) = steps {
        scene.config.steps = n;
        scene.config.validate().map_err(|source| CliError::Option {
            option: "--steps",
            source,
        })?;
        scene.resolved_toml = with_steps(&scene.resolved_toml, n);
    }
    Ok(scene)
}

/// The resolved scene with `integrator.steps = n` (and no `duration`), so the copy in the
/// run folder reproduces a run that used `--steps`.
pub fn with_steps(toml_text: &str, n: u64) -> String {
    let patched = (|| {
        let mut table: toml::Table = toml_text.parse().ok()?;
        let integrator = table
            .entry("integrator")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()?;
        integrator.remove("duration");
        integrator.insert("steps".into(), toml::Value::Integer(i64::try_from(n).ok()?));
        toml::to_string(&table).ok()
    })();
    patched.unwrap_or_else(|| {
        format!(
            "# msc: the run used --steps {n}, which overrides the step count below\n{toml_text}"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_steps_replaces_duration() {
        let text = "name = \"t\"\n[integrator]\ndt = 0.01\nduration = 2.0\n";
        let out: toml::Table = with_steps(text, 7).parse().unwrap();
        let integ = out["integrator"].as_table().unwrap();
        assert_eq!(integ["steps"].as_integer(), Some(7));
        assert!(!integ.contains_key("duration"));
        assert_eq!(integ["dt"].as_float(), Some(0.01));
        assert_eq!(out["name"].as_str(), Some("t"));
    }

    #[test]
    fn set_values_need_a_key() {
        assert!(parse_set("a.b=1").is_ok());
        assert!(parse_set("a.b").is_err());
        assert!(parse_set("=1").is_err());
    }
}
