//! Loading a run's scene: the scene with its `--set` overrides, then `--steps`, and the
//! resolved text made self-contained for the copy in the run folder.

use super::RunError;
use crate::scene::{self, LoadedScene};
use std::path::{Path, PathBuf};

/// Loads the scene, then applies `--steps` directly to the configuration: it replaces the
/// scene's `duration` or `steps`, and stands in for both where the file gives neither.
/// `resolved_toml` is made self-contained for the copy in the run folder: see [`portable`].
pub fn load(scene: &str, set: &[String], steps: Option<u64>) -> Result<LoadedScene, RunError> {
    load_checked(scene, set, steps, |_, _| Ok(()))
}

/// [`load`] with a device check of the scene's size before its mesh is built (see
/// [`scene::load_checked`]).
pub fn load_checked(
    name: &str,
    set: &[String],
    steps: Option<u64>,
    device: impl FnOnce(&scene::SceneSize, &crate::Config) -> Result<(), scene::Shortfall>,
) -> Result<LoadedScene, RunError> {
    // `--steps` is enough for a file that gives neither duration nor steps: a placeholder
    // length stands in for the file's (dropping its duration, as --set of the steps does)
    // and `--steps` replaces it below, where its own errors name it. A --set of the length
    // keeps its meaning (and still loses to `--steps`).
    let length_set = set.iter().any(|a| match scene::parse_override(a) {
        Ok((key, value)) => match key.as_str() {
            "integrator.steps" | "integrator.duration" => true,
            "integrator" => value
                .as_table()
                .is_some_and(|t| t.contains_key("steps") || t.contains_key("duration")),
            _ => false,
        },
        // Loading names it.
        Err(_) => false,
    });
    let mut with_steps = set.to_vec();
    if steps.is_some() && !length_set {
        with_steps.push("integrator.steps=1".to_string());
    }
    let mut scene =
        scene::load_checked(name, &with_steps, device).map_err(|source| RunError::Scene {
            scene: name.to_string(),
            source: Box::new(source),
        })?;
    if let Some(n) = steps {
        scene.config.steps = n;
        scene.config.validate().map_err(|source| RunError::Option {
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

    /// `--steps` had no cap (`duration` had 1e15 steps): one above i64::MAX ran, and the
    /// run folder's scene.toml could not record it. Now it is refused naming the option,
    /// the key and the limit, and the cap itself is recorded.
    #[test]
    fn steps_beyond_the_cap_are_refused() {
        let max = crate::Config::MAX_STEPS;
        for n in [max + 1, i64::MAX as u64 + 1, u64::MAX] {
            match load("builtin:torus", &[], Some(n)) {
                Err(RunError::Option { option, source }) => {
                    assert_eq!(
                        (option, source.key.as_str()),
                        ("--steps", "integrator.steps")
                    );
                    assert!(source.message.contains("at most 1e15"), "{source}");
                }
                Err(e) => panic!("--steps {n}: {e}"),
                Ok(_) => panic!("--steps {n} accepted"),
            }
        }
        let scene = load("builtin:torus", &[], Some(max)).unwrap();
        let copy: toml::Table = scene.resolved_toml.parse().unwrap();
        assert_eq!(copy["integrator"]["steps"].as_integer(), Some(max as i64));
    }

    /// `--steps` is the run's length even where the file gives neither `duration` nor
    /// `steps` (it was refused: "give integrator.duration (s) or integrator.steps"), and
    /// it still wins over a --set of the duration.
    #[test]
    fn steps_stand_in_for_a_file_without_a_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        let text = "[mesh]\nkind = \"grid\"\nsize = [1.0, 1.0]\nresolution = [3, 3]\n\
                    [material]\nmass = 0.01\nstiffness = 10.0\n";
        std::fs::write(&path, text).unwrap();
        let name = path.to_str().unwrap();
        let Err(e) = load(name, &[], None) else {
            panic!("a file without a length loaded")
        };
        assert!(format!("{e:?}").contains("integrator.duration"), "{e:?}");
        let scene = load(name, &[], Some(3)).unwrap();
        assert_eq!(scene.config.steps, 3);
        let copy: toml::Table = scene.resolved_toml.parse().unwrap();
        assert_eq!(copy["integrator"]["steps"].as_integer(), Some(3));
        // Another integrator key is no length; an inline table with one is.
        let dt = ["integrator = {dt = 0.01}".to_string()];
        assert_eq!(load(name, &dt, Some(3)).unwrap().config.steps, 3);
        let inline = ["integrator = {duration = 5.0}".to_string()];
        assert_eq!(
            load("builtin:torus", &inline, Some(4))
                .unwrap()
                .config
                .steps,
            4
        );
        let set = ["integrator.duration=5.0".to_string()];
        assert_eq!(
            load("builtin:torus", &set, Some(4)).unwrap().config.steps,
            4
        );
        // A bad --steps is still named as the option.
        let over = crate::Config::MAX_STEPS + 1;
        assert!(matches!(
            load(name, &[], Some(over)),
            Err(RunError::Option {
                option: "--steps",
                ..
            })
        ));
    }

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
}
