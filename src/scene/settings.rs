//! The simulation settings of a scene (`[integrator]`, `[coulomb]`, gravity, external
//! charges and field) as a validated [`Config`]; what the file leaves out comes from
//! `Config::default()` and the settings' own defaults.

use super::ctx::{positive, Ctx};
use super::schema::{coulomb_keys, integrator_keys, SceneFile};
use super::SceneError;
use crate::config::{
    Config, CoulombConfig, CoulombMethod, ExternalCharge, ExternalField, Orbit, SolverMethod,
};
use glam::DVec3;

pub(super) fn build_config(f: &SceneFile, ctx: &Ctx) -> Result<Config, SceneError> {
    // What the file leaves out.
    let d = Config::default();
    let it = &f.integrator;
    let integrator = it.method.unwrap_or(d.integrator);
    let dt = it.dt.unwrap_or(d.dt);
    let steps = match (it.duration, it.steps) {
        (Some(_), Some(_)) => {
            return Err(ctx.invalid(
                "integrator.steps",
                "give integrator.duration or integrator.steps, not both",
            ))
        }
        (None, None) => {
            return Err(ctx.invalid(
                "integrator.duration",
                "give integrator.duration (s) or integrator.steps",
            ))
        }
        (None, Some(n)) => n,
        (Some(d), None) => {
            positive(ctx, "integrator.duration", d)?;
            if dt.is_finite() && dt > 0.0 {
                // The small offset keeps 15 s / 0.015 s at 1000 steps despite rounding.
                let n = (d / dt - 1e-9).ceil();
                if n > Config::MAX_STEPS as f64 {
                    return Err(ctx.invalid(
                        "integrator.duration",
                        format!(
                            "{} s at dt = {} s is more than {} steps",
                            crate::display::num(d),
                            crate::display::num(dt),
                            crate::display::num(Config::MAX_STEPS as f64)
                        ),
                    ));
                }
                (n as u64).max(1)
            } else {
                1 // Config::validate reports the bad dt.
            }
        }
    };
    let mut solver = d.solver;
    if let Some(s) = &it.solver {
        solver.method = s.method.unwrap_or(solver.method);
        solver.iterations = s.iterations.unwrap_or(solver.iterations);
        solver.omega = s.omega.unwrap_or(solver.omega);
        solver.tolerance = s.tolerance.unwrap_or(solver.tolerance);
        solver.rho = s.rho.or(solver.rho);
    }
    // Keys the chosen method never reads are refused, not kept without effect.
    if let (Some(_), SolverMethod::BlockJacobi | SolverMethod::Jacobi | SolverMethod::Cg) =
        (it.solver.as_ref().and_then(|s| s.rho), solver.method)
    {
        return Err(ctx.invalid(
            "integrator.solver.rho",
            format!(
                "only used with method = \"chebyshev\" (method is \"{}\")",
                solver.method.name()
            ),
        ));
    }
    // Likewise the keys of another integrator (explicit ones solve nothing).
    let given = [
        (
            "solver",
            it.solver.is_some(),
            "\"imex\" or \"local_global\"",
        ),
        (
            "local_global_iterations",
            it.local_global_iterations.is_some(),
            "\"local_global\"",
        ),
    ];
    let read = integrator_keys(integrator);
    if let Some((key, _, users)) = given.iter().find(|(k, set, _)| *set && !read.contains(k)) {
        return Err(ctx.invalid(
            format!("integrator.{key}"),
            format!(
                "only used with method = {users} (method is \"{}\")",
                integrator.name()
            ),
        ));
    }
    let c = &f.coulomb;
    let mut method = c.method.unwrap_or(d.coulomb.method);
    if let CoulombMethod::Ddef(p) = &mut method {
        p.samples = c.samples.unwrap_or(p.samples);
        p.variant = c.ddef_variant.unwrap_or(p.variant);
        p.rebuild_every = c.rebuild_every.unwrap_or(p.rebuild_every);
        p.grid = c.ddef_grid.unwrap_or(p.grid);
    }
    let given = [
        ("samples", c.samples.is_some()),
        ("ddef_variant", c.ddef_variant.is_some()),
        ("rebuild_every", c.rebuild_every.is_some()),
        ("ddef_grid", c.ddef_grid.is_some()),
    ];
    let read = coulomb_keys(method);
    if let Some((k, _)) = given.iter().find(|(k, set)| *set && !read.contains(k)) {
        return Err(ctx.invalid(
            format!("coulomb.{k}"),
            format!(
                "only used with method = \"ddef\" (method is \"{}\")",
                method.name()
            ),
        ));
    }
    let coulomb = CoulombConfig {
        method,
        softening: c.softening.unwrap_or(d.coulomb.softening),
    };
    let mut external_charges = Vec::with_capacity(f.external_charges.len());
    for (k, c) in f.external_charges.iter().enumerate() {
        let orbit = match &c.orbit {
            None => None,
            Some(o) => {
                let key = format!("external_charges[{k}].orbit.axis");
                let axis = DVec3::from_array(o.axis.unwrap_or([0.0, 0.0, 1.0]));
                if !(axis.is_finite() && axis != DVec3::ZERO) {
                    return Err(ctx.invalid(key, "must be a non-zero finite vector"));
                }
                // The length of [1e200, 1e200, 0] overflows and that of [1e-200, 1e-200, 0]
                // underflows to 0: such an axis is scaled to its largest component first.
                let len = axis.length();
                let axis = if len.is_finite() && len > 0.0 {
                    axis / len
                } else {
                    let a = axis / axis.abs().max_element();
                    a / a.length()
                };
                Some(Orbit {
                    center: DVec3::from_array(o.center.unwrap_or([0.0; 3])),
                    axis,
                    angular_velocity: o.angular_velocity,
                })
            }
        };
        external_charges.push(ExternalCharge {
            charge: c.charge,
            position: DVec3::from_array(c.position),
            orbit,
        });
    }
    let external_field = match &f.external_field {
        None => None,
        Some(e) => {
            let used = e.kind.keys();
            for (k, set) in [
                ("value", e.value.is_some()),
                ("scale", e.scale.is_some()),
                ("min_z", e.min_z.is_some()),
            ] {
                if set && !used.contains(&k) {
                    return Err(ctx.invalid(
                        format!("external_field.{k}"),
                        format!(
                            "not used by kind = \"{}\" (it reads {})",
                            e.kind.name(),
                            used.join(", ")
                        ),
                    ));
                }
            }
            // `kind` came with the defaults of its parameters.
            let mut field = e.kind;
            match &mut field {
                ExternalField::Uniform(v) => *v = e.value.map_or(*v, DVec3::from_array),
                ExternalField::Swirl { scale, min_z } | ExternalField::Vortex { scale, min_z } => {
                    *scale = e.scale.unwrap_or(*scale);
                    *min_z = e.min_z.unwrap_or(*min_z);
                }
            }
            Some(field)
        }
    };
    let config = Config {
        integrator,
        dt,
        steps,
        solver,
        local_global_iterations: it
            .local_global_iterations
            .unwrap_or(d.local_global_iterations),
        gravity: f.gravity.map_or(d.gravity, DVec3::from_array),
        coulomb,
        external_charges,
        external_field,
        world: f.world,
    };
    config
        .validate()
        .map_err(|e| ctx.invalid(e.key, e.message))?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use crate::config::{
        Config, CoulombMethod, DdefGrid, DdefVariant, ExternalField, Integrator, SolverMethod,
    };

    fn load(set: &[String]) -> Result<Config, String> {
        crate::scene::load("torus", set)
            .map(|s| s.config)
            .map_err(|e| e.to_string())
    }

    fn set(key: &str, name: &str) -> Vec<String> {
        vec![format!("{key}={name}")]
    }

    #[test]
    fn every_name_a_scene_accepts_is_the_config_enum_of_that_name() {
        for name in Integrator::NAMES {
            let c = load(&set("integrator.method", name)).unwrap();
            assert_eq!(c.integrator.name(), name);
        }
        for name in SolverMethod::NAMES {
            let c = load(&set("integrator.solver.method", name)).unwrap();
            assert_eq!(c.solver.method.name(), name);
        }
        for name in CoulombMethod::NAMES {
            let c = load(&set("coulomb.method", name)).unwrap();
            assert_eq!(c.coulomb.method.name(), name);
        }
        let ddef = set("coulomb.method", "ddef");
        for name in DdefVariant::NAMES {
            let c = load(&[ddef.clone(), set("coulomb.ddef_variant", name)].concat()).unwrap();
            assert_eq!(c.coulomb.method.ddef().unwrap().variant.name(), name);
        }
        for name in DdefGrid::NAMES {
            let c = load(&[ddef.clone(), set("coulomb.ddef_grid", name)].concat()).unwrap();
            assert_eq!(c.coulomb.method.ddef().unwrap().grid.name(), name);
        }
        for name in ExternalField::NAMES {
            let c = load(&set("external_field.kind", name)).unwrap();
            assert_eq!(c.external_field.unwrap().name(), name);
        }
    }

    #[test]
    fn an_unknown_name_lists_the_names_a_scene_accepts() {
        let cases: [(&str, &[&str]); 4] = [
            ("integrator.method", &Integrator::NAMES),
            ("integrator.solver.method", &SolverMethod::NAMES),
            ("coulomb.method", &CoulombMethod::NAMES),
            ("external_field.kind", &ExternalField::NAMES),
        ];
        for (key, names) in cases {
            let e = load(&set(key, "\"nope\"")).unwrap_err();
            let listed: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            assert!(
                e.contains(&format!(
                    "unknown variant `nope`, expected one of {}",
                    listed.join(", ")
                )),
                "{key}: {e}"
            );
            assert!(e.contains(key), "{key}: {e}");
        }
    }

    #[test]
    fn an_orbit_axis_whose_length_overflows_is_the_same_direction() {
        let axis = |a: &str| {
            let charge = format!(
                "external_charges=[{{charge=1e-9, position=[0, 0, 9], orbit={{axis={a}, \
                 angular_velocity=1}}}}]"
            );
            load(&[charge]).unwrap().external_charges[0]
                .orbit
                .unwrap()
                .axis
        };
        assert_eq!(axis("[1e200, 1e200, 0]"), axis("[1, 1, 0]"));
        assert_eq!(axis("[0, 1e-200, 1e-200]"), axis("[0, 1, 1]"));
    }

    #[test]
    fn what_a_scene_leaves_out_is_the_config_default() {
        let text = "[mesh]\nkind = \"icosphere\"\nradius = 1.0\nsubdivisions = 1\n\
                    [integrator]\nsteps = 5\n";
        let path = std::env::temp_dir().join(format!("msc-defaults-{}.toml", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let c = crate::scene::load(path.to_str().unwrap(), &[])
            .unwrap()
            .config;
        std::fs::remove_file(&path).unwrap();
        let d = Config::default();
        assert_eq!(
            Config {
                steps: d.steps,
                ..c.clone()
            },
            d
        );
        assert_eq!(c.steps, 5);
        // A kind's parameters left out take the kind's defaults.
        let vortex = load(&set("external_field.kind", "vortex")).unwrap();
        assert_eq!(
            vortex.external_field,
            ExternalField::from_name("vortex"),
            "scale and min_z"
        );
    }
}
