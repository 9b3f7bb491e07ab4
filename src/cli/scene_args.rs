//! Options shared by the commands that load a scene.

use super::CliError;
use crate::scene::{self, LoadedScene};
use std::path::{Path, PathBuf};

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
/// `resolved_toml` is made self-contained for the copy in the run folder: see [`portable`].
pub fn load(args: &SceneArgs, steps: Option<u64>) -> Result<LoadedScene, CliError> {
    load_checked(args, steps, |_, _| Ok(()))
}

/// [`load`] with a device check of the scene's size before its mesh is built (see
/// [`scene::load_checked`]).
pub fn load_checked(
    args: &SceneArgs,
    steps: Option<u64>,
    device: impl FnOnce(&scene::SceneSize, &crate::Config) -> Result<(), scene::Shortfall>,
) -> Result<LoadedScene, CliError> {
    let mut scene =
        scene::load_checked(&args.scene, &args.set, device).map_err(|source| CliError::Scene {
            scene: args.scene.clone(),
            source: Box::new(source),
        })?;
    if let Some(n) = steps {
        scene.config.steps = n;
        scene.config.validate().map_err(|source| CliError::Option {
            option: "--steps",
            source,
        })?;
    }
    let base = match scene.source.as_deref().and_then(Path::parent) {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    scene.resolved_toml = portable(&scene.resolved_toml, &scene.name, &base, steps);
    Ok(scene)
}

/// The resolved scene as it is copied into a run folder, so that `msc run DIR/scene.toml`
/// repeats the run from anywhere: the scene's `name` is written out (a file's default name
/// is its stem, which would be "scene"); a relative OBJ `mesh.path` is made absolute
/// (it is relative to the scene file, which the copy no longer sits beside); and with
/// `--steps`, `integrator.steps = n` replaces `steps` or `duration`.
pub fn portable(toml_text: &str, name: &str, base: &Path, steps: Option<u64>) -> String {
    let patched = (|| {
        let mut table: toml::Table = toml_text.parse().ok()?;
        table
            .entry("name")
            .or_insert_with(|| toml::Value::String(name.to_string()));
        if let Some(mesh) = table.get_mut("mesh").and_then(|m| m.as_table_mut()) {
            let is_obj = mesh.get("kind").and_then(|k| k.as_str()) == Some("obj");
            if let Some(toml::Value::String(p)) = mesh.get_mut("path") {
                if is_obj && Path::new(p.as_str()).is_relative() {
                    let joined = base.join(p.as_str());
                    let abs = std::path::absolute(&joined).unwrap_or(joined);
                    *p = abs.to_string_lossy().into_owned();
                }
            }
        }
        if let Some(n) = steps {
            let integrator = table
                .entry("integrator")
                .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                .as_table_mut()?;
            integrator.remove("duration");
            integrator.insert("steps".into(), toml::Value::Integer(i64::try_from(n).ok()?));
        }
        toml::to_string(&table).ok()
    })();
    patched.unwrap_or_else(|| match steps {
        Some(n) => format!(
            "# msc: the run used --steps {n}, which overrides the step count below\n{toml_text}"
        ),
        None => toml_text.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn portable_copy_is_self_contained() {
        let text = "[integrator]\ndt = 0.01\nduration = 2.0\n\
                    [mesh]\nkind = \"obj\"\npath = \"duck.obj\"\n";
        let base = Path::new("/data/scenes");
        let out: toml::Table = portable(text, "duck", base, Some(7)).parse().unwrap();
        let integ = out["integrator"].as_table().unwrap();
        assert_eq!(integ["steps"].as_integer(), Some(7));
        assert!(!integ.contains_key("duration"));
        assert_eq!(integ["dt"].as_float(), Some(0.01));
        assert_eq!(out["name"].as_str(), Some("duck"));
        assert_eq!(
            Path::new(out["mesh"]["path"].as_str().unwrap()),
            Path::new("/data/scenes/duck.obj")
        );
        // Without --steps the step settings are untouched, and a name given is kept.
        let text = "name = \"a\"\n[integrator]\nduration = 2.0\n";
        let out: toml::Table = portable(text, "b", base, None).parse().unwrap();
        assert_eq!(out["integrator"]["duration"].as_float(), Some(2.0));
        assert_eq!(out["name"].as_str(), Some("a"));
    }

    #[test]
    fn set_values_need_a_key() {
        assert!(parse_set("a.b=1").is_ok());
        assert!(parse_set("a.b").is_err());
        assert!(parse_set("=1").is_err());
    }
}
