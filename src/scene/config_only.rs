//! A configuration from scene keys alone (`integrator.*`, `coulomb.*`, `gravity`,
//! `external_charges`, `external_field`, `world.*`), for callers that build their system in code:
//! the scene file's names, defaults and checks, without a mesh.

use super::ctx::Ctx;
use super::keys::SourceMap;
use super::overrides;
use super::schema::SceneFile;
use super::settings::build_config;
use super::SceneError;
use crate::config::Config;

/// The top-level scene keys a configuration is made of.
pub const CONFIG_KEYS: [&str; 6] = [
    "integrator",
    "coulomb",
    "gravity",
    "external_charges",
    "external_field",
    "world",
];

/// The configuration `key=value` overrides describe (as `--set` takes them), with the
/// scene file's defaults for the rest; `integrator.steps` defaults to
/// `Config::default().steps` unless `integrator.duration` is given. A key outside
/// [`CONFIG_KEYS`] is an error naming it.
pub fn config_from(overrides: &[String]) -> Result<Config, SceneError> {
    let ovs = overrides
        .iter()
        .map(|a| overrides::parse(a))
        .collect::<Result<Vec<_>, _>>()?;
    for o in &ovs {
        let key = o.key();
        let top = key.split(['.', '[']).next().unwrap_or_default();
        if !CONFIG_KEYS.contains(&top) {
            return Err(SceneError::Override {
                arg: o.arg.clone(),
                message: format!(
                    "'{key}' is not a simulation setting (those are under {})",
                    CONFIG_KEYS.join(", ")
                ),
            });
        }
    }
    // The settings never read the mesh; the schema asks for one.
    let mut table = toml::Table::new();
    let mut mesh = toml::Table::new();
    mesh.insert("kind".into(), "grid".into());
    table.insert("mesh".into(), mesh.into());
    overrides::apply(&mut table, &ovs)?;
    if let Some(toml::Value::Table(it)) = table.get_mut("integrator") {
        if !it.contains_key("duration") && !it.contains_key("steps") {
            it.insert("steps".into(), (Config::default().steps as i64).into());
        }
    } else {
        let mut it = toml::Table::new();
        it.insert("steps".into(), (Config::default().steps as i64).into());
        table.insert("integrator".into(), it.into());
    }
    let text = toml::to_string(&table).map_err(|e| SceneError::Override {
        arg: overrides.join(" "),
        message: format!("cannot write the settings: {e}"),
    })?;
    let ctx = Ctx {
        origin: "configuration".into(),
        map: SourceMap::new(&text),
        overrides: &ovs,
    };
    let file: SceneFile = toml::from_str(&text).map_err(|e| ctx.schema(e, &text, false))?;
    build_config(&file, &ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ExternalField, Integrator};

    #[test]
    fn settings_alone_make_the_config_a_scene_with_them_would() {
        let set: Vec<String> = [
            "integrator.method=\"verlet\"",
            "integrator.dt=0.002",
            "gravity=[0, 0, -9.81]",
            "external_field={ kind = \"vortex\", scale = 2.0 }",
            "external_charges=[{ charge = 1e-6, position = [0, 0, 1], orbit = { axis = [0, 0, 2], angular_velocity = 1.0 } }]",
        ]
        .map(String::from)
        .to_vec();
        let c = config_from(&set).unwrap();
        assert_eq!(c.integrator, Integrator::Verlet);
        assert_eq!(c.steps, Config::default().steps);
        // The built-in torus with the same keys has the same settings, but for its steps.
        let scene = crate::scene::load("torus", &set).unwrap().config;
        assert_eq!(
            Config {
                steps: c.steps,
                ..scene
            },
            c
        );
        assert!(matches!(
            c.external_field,
            Some(ExternalField::Vortex { scale: 2.0, .. })
        ));
        // The orbit's axis is normalized as a scene's is.
        assert_eq!(c.external_charges[0].orbit.unwrap().axis.z, 1.0);
        assert_eq!(config_from(&[]).unwrap(), Config::default());
        let d = config_from(&["integrator.duration=0.5".into()]).unwrap();
        assert_eq!(d.steps, 34);
    }

    #[test]
    fn bad_settings_name_their_key() {
        let e = config_from(&["integrator.dt=-1".into()]).unwrap_err();
        assert!(e.to_string().contains("integrator.dt"), "{e}");
        let e = config_from(&["material.charge=1e-6".into()]).unwrap_err();
        assert!(e.to_string().contains("not a simulation setting"), "{e}");
        let e = config_from(&["integrator.solver.methd=\"cg\"".into()]).unwrap_err();
        assert!(e.to_string().contains("methd"), "{e}");
        let e = config_from(&["world.drag=-1".into()]).unwrap_err();
        assert!(e.to_string().contains("world.drag: must be finite"), "{e}");
    }

    /// `[world]` is part of a configuration (`Config::world`): refused as "not a
    /// simulation setting", a configuration built in code could not have drag.
    #[test]
    fn the_world_table_is_a_setting() {
        let c = config_from(&["world.drag=0.25".into()]).unwrap();
        assert_eq!(c.world.drag, 0.25);
        let scene = crate::scene::load("torus", &["world.drag=0.25".into()]).unwrap();
        assert_eq!(c.world, scene.config.world);
    }
}
