//! Tests that a scene input is either used or refused naming its key: extra vector
//! elements, inline tables and multi-line values in `--set`, keys without effect (also
//! those of a method `--set` switched away from), values that would diverge at step 0,
//! brief numbers in the messages, and mesh paths.

use super::{load, LoadedScene, SceneError};

/// The probe's small torus: 32 particles, charged, 5 IMEX steps.
const BASE: &str = "name = \"base\"\n\
    [mesh]\nkind = \"torus\"\nmajor_radius = 4.0\nminor_radius = 1.5\nrings = 8\nsides = 4\n\
    [material]\nmass = 0.1\nstiffness = 10.0\ncharge = 6e-6\n\
    [integrator]\nmethod = \"imex\"\ndt = 0.015\nsteps = 5\n\
    [output]\nevery = 1\nframes = \"none\"\n";

/// A pinned 6 x 6 grid under gravity, without Coulomb forces.
const GRID: &str = "name = \"grid\"\ngravity = [0.0, -9.8, 0.0]\n\
    [mesh]\nkind = \"grid\"\nsize = [1.0, 1.0]\nresolution = [6, 6]\n\
    [material]\nmass = 0.01\nstiffness = 10.0\n\
    [pin]\nwhere = \"corners_max_y\"\n\
    [integrator]\ndt = 0.01\nsteps = 3\n\
    [coulomb]\nmethod = \"none\"\n\
    [output]\nevery = 1\nframes = \"none\"\n";

/// Loads `text` (written to a file) with `sets` as `--set` arguments.
fn load_text(text: &str, sets: &[&str]) -> Result<LoadedScene, SceneError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scene.toml");
    std::fs::write(&path, text).unwrap();
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    load(path.to_str().unwrap(), &sets)
}

/// The error message of a load that must fail.
fn refused(text: &str, sets: &[&str]) -> String {
    match load_text(text, sets) {
        Ok(s) => panic!("{sets:?} loaded: {}", s.resolved_toml),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_vector_of_three_refuses_a_fourth_value_naming_its_key() {
    let charge = "[[external_charges]]\ncharge = 1e-6\nposition = [0.0, 0.0, 9.0]\n";
    let orbit = format!("{BASE}{charge}orbit = {{ angular_velocity = 1.0 }}\n");
    let field = "[external_field]\nkind = \"uniform\"\n";
    let cases: [(String, &str, &str); 8] = [
        (BASE.into(), "gravity", "[0, 0, -9.8, 7]"),
        (BASE.into(), "mesh.center", "[1, 2, 3, 4]"),
        (GRID.into(), "pin.velocity", "[1, 2, 3, 4]"),
        (
            format!("{BASE}{charge}"),
            "external_charges[0].position",
            "[0, 0, 9, 1]",
        ),
        (
            orbit.clone(),
            "external_charges[0].orbit.center",
            "[0, 0, 0, 0]",
        ),
        (
            orbit.clone(),
            "external_charges[0].orbit.axis",
            "[0, 0, 1, 0]",
        ),
        (
            format!("{BASE}{field}"),
            "external_field.value",
            "[1, 0, 0, 0]",
        ),
        (BASE.into(), "gravity", "[1, 2]"),
    ];
    for (text, key, value) in cases {
        let n = value.split(',').count();
        let e = refused(&text, &[&format!("{key}={value}")]);
        assert!(
            e.contains(&format!("{key}: expected 3 values ([x, y, z]), got {n}")),
            "{e}"
        );
    }
    // The same in the file, with its line.
    let text = BASE.replace(
        "name = \"base\"\n",
        "name = \"base\"\ngravity = [1.0, 2.0, 3.0, 4.0]\n",
    );
    let e = refused(&text, &[]);
    assert!(e.contains(":2: gravity: expected 3 values"), "{e}");
}

#[test]
fn an_inline_table_in_set_is_checked_key_by_key() {
    let e = refused(BASE, &["external_field={kind=\"vortex\",value=[1,0,0]}"]);
    assert!(
        e.contains("external_field.value: not used by kind = \"vortex\""),
        "{e}"
    );
    let mesh = "mesh={kind=\"icosphere\",radius=1,subdivisions=1";
    let e = refused(BASE, &[&format!("{mesh},rings=99}}")]);
    assert!(
        e.contains("mesh.rings: not used by kind = \"icosphere\""),
        "{e}"
    );
    let s = load_text(BASE, &[&format!("{mesh}}}")]).unwrap();
    assert_eq!(s.system.len(), 42, "an icosphere of 1 subdivision");
}

#[test]
fn a_set_value_is_one_toml_value() {
    let e = refused(BASE, &["integrator.dt=0.01\nsteps=99"]);
    assert!(
        e.contains("must be one TOML value, but it also sets steps"),
        "{e}"
    );
    let e = refused(BASE, &["integrator.solver.method=cg\nx"]);
    assert!(e.contains("spans lines and is not one TOML value"), "{e}");
    // A bare word on one line is still a string.
    let s = load_text(BASE, &["integrator.solver.method=cg"]).unwrap();
    assert_eq!(s.config.solver.method.name(), "cg");
    // A number TOML cannot hold says so, instead of "invalid type: string".
    for (set, why) in [
        ("output.every=18446744073709551615", "too large"),
        ("integrator.dt=1e999", "overflowed"),
    ] {
        let e = refused(BASE, &[set]);
        assert!(e.contains("is not a TOML number") && e.contains(why), "{e}");
    }
    // Text that merely starts with digits is still text.
    let e = refused(BASE, &["output.every=3d"]);
    assert!(e.contains("invalid type: string \"3d\""), "{e}");
}

#[test]
fn an_index_into_a_missing_array_says_the_array_is_missing() {
    let e = refused(BASE, &["external_charges[0].charge=1e-6"]);
    assert!(
        e.contains("the scene has no external_charges, so there is no external_charges[0]"),
        "{e}"
    );
    let e = refused(BASE, &["gravity[5]=1"]);
    assert!(
        e.contains("the scene has no gravity, so there is no gravity[5]"),
        "{e}"
    );
    let e = refused(BASE, &["integrator[0]=1"]);
    assert!(e.contains("integrator is a table, not an array"), "{e}");
    let e = refused(BASE, &["integrator.dt.x=1"]);
    assert!(e.contains("integrator.dt is a float, not a table"), "{e}");
    let e = refused(BASE, &["integrator.steps.x=1"]);
    assert!(
        e.contains("integrator.steps is an integer, not a table"),
        "{e}"
    );
}

#[test]
fn a_charge_that_no_particle_carries_is_refused() {
    // 32 particles at fraction 0.01: floor(0.32) = 0 charged.
    for text in [
        BASE.to_string(),
        BASE.replace("charge = 6e-6", "total_charge = 1e-5"),
    ] {
        let e = refused(&text, &["material.charged_fraction=0.01"]);
        assert!(e.contains("no particle is charged"), "{e}");
        assert!(e.contains("0 of the 32 particles"), "{e}");
    }
    // Without a charge, a fraction that charges none is harmless.
    let text = BASE.replace("charge = 6e-6\n", "");
    let s = load_text(&text, &["material.charged_fraction=0.01"]).unwrap();
    assert_eq!(s.system.charged_count(), 0);
}

#[test]
fn a_solver_key_the_method_does_not_read_is_refused() {
    for method in ["jacobi", "block_jacobi", "cg"] {
        let e = refused(
            BASE,
            &[
                &format!("integrator.solver.method={method}"),
                "integrator.solver.rho=0.5",
            ],
        );
        assert!(
            e.contains(&format!(
                "integrator.solver.rho: only used with method = \"chebyshev\" (method is \"{method}\")"
            )),
            "{e}"
        );
    }
    let s = load_text(
        BASE,
        &[
            "integrator.solver.method=chebyshev",
            "integrator.solver.rho=0.5",
        ],
    )
    .unwrap();
    assert_eq!(s.config.solver.rho, Some(0.5));

    let e = refused(BASE, &["integrator.local_global_iterations=3"]);
    assert!(
        e.contains("integrator.local_global_iterations: only used with method = \"local_global\""),
        "{e}"
    );
    let s = load_text(
        BASE,
        &[
            "integrator.method=local_global",
            "integrator.local_global_iterations=3",
        ],
    )
    .unwrap();
    assert_eq!(s.config.local_global_iterations, 3);
}

#[test]
fn an_explicit_integrator_refuses_the_keys_of_a_solve() {
    let with_solver = BASE.replace(
        "steps = 5\n",
        "steps = 5\nsolver = { method = \"cg\", iterations = 9 }\n",
    );
    for method in ["verlet", "symplectic_euler"] {
        let file = with_solver.replace("\"imex\"", &format!("\"{method}\""));
        let e = refused(&file, &[]);
        let said = format!(
            "integrator.solver: only used with method = \"imex\" or \"local_global\" (method \
             is \"{method}\")"
        );
        assert!(e.contains(&said), "{e}");
        let file = BASE.replace("\"imex\"", &format!("\"{method}\""));
        let e = refused(&file, &["integrator.local_global_iterations=3"]);
        assert!(
            e.contains(
                "integrator.local_global_iterations: only used with method = \"local_global\""
            ),
            "{e}"
        );
        // Switched on the command line, the file's solve goes with the old method; a
        // solver key given with the switch is still refused.
        let switch = format!("integrator.method={method}");
        let s = load_text(&with_solver, &[&switch]).unwrap();
        assert!(
            !s.resolved_toml.contains("iterations = 9"),
            "{}",
            s.resolved_toml
        );
        let e = refused(&with_solver, &[&switch, "integrator.solver.iterations=4"]);
        assert!(e.contains(&said), "{e}");
    }
    // Back to an implicit method, a key given with the switch is read.
    let lg = BASE.replace("\"imex\"", "\"verlet\"");
    let s = load_text(
        &lg,
        &[
            "integrator.method=local_global",
            "integrator.solver.iterations=4",
            "integrator.local_global_iterations=2",
        ],
    )
    .unwrap();
    assert_eq!(s.config.solver.iterations, 4);
    assert_eq!(s.config.local_global_iterations, 2);
}

#[test]
fn switching_the_coulomb_method_drops_the_files_ddef_keys() {
    let ddef = format!("{BASE}[coulomb]\nmethod = \"ddef\"\nsamples = 40\n");
    let s = load_text(&ddef, &["coulomb.method=all_pairs"]).unwrap();
    assert_eq!(s.config.coulomb.method.name(), "all_pairs");
    let e = refused(&ddef, &["coulomb.method=none", "coulomb.samples=30"]);
    assert!(
        e.contains("coulomb.samples: only used with method = \"ddef\" (method is \"none\")"),
        "{e}"
    );
}

#[test]
fn an_initial_state_that_would_diverge_at_step_0_is_refused_naming_its_key() {
    let field = "external_field={kind=\"uniform\",value=[1e308,0,0]}";
    let cases: [(&str, &str, &str); 6] = [
        (BASE, "gravity=[1e308,0,0]", "gravity[0]: must be at most"),
        (BASE, field, "external_field.value[0]: must be at most"),
        (
            BASE,
            "mesh.center=[1e308,0,0]",
            "mesh.center[0]: must be at most 3.4028234663852886e38",
        ),
        (
            BASE,
            "mesh.center=[0,-1e39,0]",
            "mesh.center[1]: must be at most",
        ),
        (
            GRID,
            "pin.velocity=[1e308,0,0]",
            "pin.velocity[0]: must be at most",
        ),
        (GRID, "mesh.size=[1e39,1]", "mesh: vertex 0 is beyond"),
    ];
    for (text, set, want) in cases {
        let e = refused(text, &[set]);
        assert!(e.contains(want), "{set}: {e}");
        assert!(e.len() < 400, "{set}: brief numbers: {e}");
    }
    // Large but finite throughout: still runs (a later divergence is the run's to find).
    for set in ["gravity=[1e200,0,0]", "mesh.center=[1e38,0,0]"] {
        load_text(BASE, &[set]).unwrap();
    }
    load_text(GRID, &["pin.velocity=[1e20,0,0]"]).unwrap();
}

#[test]
fn numbers_in_messages_are_brief() {
    let no_steps = BASE.replace("steps = 5\n", "");
    let e = refused(&no_steps, &["integrator.duration=1e300"]);
    assert!(
        e.contains("1e300 s at dt = 0.015 s is more than 1e15 steps"),
        "{e}"
    );
    let e = refused(GRID, &["mesh.size=[1e308,1e308]"]);
    assert!(e.contains("mesh:") && e.len() < 300, "{e}");
}

#[test]
fn an_empty_mesh_path_and_a_surface_file_for_tet_are_named() {
    let mesh = |kind: &str, path: &str| {
        format!(
            "name = \"m\"\n[mesh]\nkind = \"{kind}\"\npath = \"{path}\"\n\
             [material]\nmass = 0.1\nstiffness = 10.0\n\
             [integrator]\ndt = 0.01\nsteps = 2\n"
        )
    };
    // "" joined to the scene's folder named the folder itself ("cannot read OBJ file").
    let m = refused(&mesh("obj", ""), &[]);
    assert!(m.contains("mesh.path") && m.contains("empty"), "{m}");
    let m = refused(&mesh("tet", "box.obj"), &[]);
    assert!(m.contains("is an OBJ surface mesh"), "{m}");
}

/// A --set of one of the two run-length keys replaces the file's other (the torus gives a
/// duration: `--set integrator.steps=5` was refused, "not both"); both set is refused.
#[test]
fn a_set_run_length_replaces_the_files_other_key() {
    let steps = load_text(BASE, &["integrator.duration=0.15"]).unwrap();
    assert_eq!(steps.config.steps, 10, "0.15 s at dt = 0.015 s");
    let with_duration = BASE.replace("steps = 5", "duration = 0.15");
    let set = load_text(&with_duration, &["integrator.steps=7"]).unwrap();
    assert_eq!(set.config.steps, 7);
    assert!(
        !set.resolved_toml.contains("duration"),
        "{}",
        set.resolved_toml
    );
    let both = refused(BASE, &["integrator.steps=7", "integrator.duration=0.15"]);
    assert!(both.contains("not both"), "{both}");
    // The file's own two keys are still refused together.
    let file_both = BASE.replace("steps = 5", "steps = 5\nduration = 0.15");
    assert!(refused(&file_both, &[]).contains("not both"));
}
