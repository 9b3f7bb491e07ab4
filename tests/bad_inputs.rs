//! A hostile user's inputs, scripted: every case runs the `msc` binary and expects either a
//! typed error (exit 2 for bad input, naming the key, index or limit) or a documented
//! outcome (a divergence: exit 1 with every output written; a stop request: exit 130).
//! Never a panic, an abort, or a silent wrong number. Add new cases to the tables.

mod common;
#[path = "bad_inputs/fit_inputs.rs"]
mod fit_inputs;
#[path = "bad_inputs/slurm_script.rs"]
mod slurm_script;
#[path = "bad_inputs/writers.rs"]
mod writers;

use common::{msc, read_json, stderr, stdout};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A small, fast scene (a 4 x 4 grid, a few charges, 3 steps) that cases override.
const SMALL: &str = r#"
name = "small"
[mesh]
kind = "grid"
size = [1.0, 1.0]
resolution = [4, 4]
[material]
mass = 0.01
stiffness = 10.0
charge = 1e-9
[integrator]
method = "imex"
dt = 0.01
steps = 3
[output]
every = 1
frames = "ply"
"#;

/// A folder with `small.toml`, a triangle OBJ and a few malformed files.
fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("small.toml"), SMALL).unwrap();
    std::fs::write(p.join("tri.obj"), "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n").unwrap();
    std::fs::write(p.join("empty.obj"), "# nothing\n").unwrap();
    std::fs::write(p.join("nan.obj"), "v 0 0 0\nv nan 0 0\nv 0 1 0\nf 1 2 3\n").unwrap();
    std::fs::write(p.join("badface.obj"), "v 0 0 0\nv 1 0 0\nf 1 2 9\n").unwrap();
    std::fs::write(p.join("broken.toml"), "name = \"x\"\n[mesh\nkind = 1\n").unwrap();
    std::fs::write(p.join("garbage.toml"), [0xff, 0xfe, 0x00, 0x01, 0x80]).unwrap();
    // Latin-1 text: an invalid UTF-8 byte (0xE9) on line 3, at byte offset 27.
    std::fs::write(
        p.join("latin1.toml"),
        b"name = \"small\"\n[mesh]\n# caf\xe9\nkind = \"grid\"\n",
    )
    .unwrap();
    std::fs::write(p.join("typo.toml"), "[integrator]\nmethd = \"imex\"\n").unwrap();
    std::fs::create_dir(p.join("adir.toml")).unwrap();
    std::fs::create_dir(p.join("noframes")).unwrap();
    std::fs::write(p.join("noframes/energy.csv"), "step,time\nnot a number\n").unwrap();
    std::fs::write(
        p.join("manifest_missing_scene.toml"),
        "[[runs]]\nscene = \"nope.toml\"\n",
    )
    .unwrap();
    let manifests = [
        (
            "m_typo.toml",
            r#"[[runs]]
scene = "small.toml"
name = "typo"
set = ["material.stifness=5"]
"#,
        ),
        (
            "m_global.toml",
            r#"set = ["output.evry=5"]
[[runs]]
scene = "small.toml"
"#,
        ),
        (
            "m_ok.toml",
            "[[runs]]\nscene = \"small.toml\"\nname = \"a\"\n",
        ),
        (
            "m_broken.toml",
            "[[runs]]\nscene = \"broken.toml\"\nname = \"broken\"\n",
        ),
        (
            "m_obj.toml",
            r#"[[runs]]
scene = "small.toml"
name = "o"
set = ['mesh.kind="obj"', 'mesh.path="nope.obj"']
"#,
        ),
        (
            "m_badname.toml",
            "[[runs]]\nscene = \"small.toml\"\nname = \"../x\"\n",
        ),
        ("m_norun.toml", "set = []\n"),
    ];
    for (name, text) in manifests {
        std::fs::write(p.join(name), text).unwrap();
    }
    dir
}

/// No panic or abort, whatever else happened.
fn assert_no_crash(o: &Output, what: &str) {
    let err = stderr(o);
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{what}: panicked\n{err}"
    );
    assert!(
        o.status.code().is_some(),
        "{what}: killed by a signal (abort?)\n{err}"
    );
}

/// (arguments, expected exit code, fragment the error must contain).
type Case = (&'static [&'static str], i32, &'static str);

/// Runs `small.toml` (or the given command) with each case; collects every failure.
fn check_cases(cases: &[Case], base: &[&str]) {
    let dir = fixture();
    let mut failures = Vec::new();
    for (args, code, fragment) in cases {
        let mut all: Vec<&str> = base.to_vec();
        all.extend_from_slice(args);
        let o = msc(&all, dir.path());
        let what = all.join(" ");
        assert_no_crash(&o, &what);
        let err = stderr(&o);
        if o.status.code() != Some(*code) || !err.contains(fragment) {
            failures.push(format!(
                "msc {what}\n  expected exit {code} with {fragment:?}\n  got exit {:?}: {}",
                o.status.code(),
                err.trim()
            ));
        } else if *code == 2 && !err.starts_with("error:") {
            failures.push(format!("msc {what}: no 'error:' line\n{err}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    assert!(
        !dir.path().join("out").exists() || cases.iter().any(|c| c.1 != 2),
        "an input error wrote outputs"
    );
}

const RUN_SMALL: &[&str] = &["run", "small.toml", "--backend", "cpu", "--quiet"];

#[test]
fn scene_names_that_are_not_one_safe_folder_are_refused() {
    let cases: &[Case] = &[
        (&["--set", "name=\"\""], 2, "name: must not be empty"),
        (&["--set", "name=\" \""], 2, "name: must not be empty"),
        (
            &["--set", "name=\"/abs/path\""],
            2,
            "name: '/abs/path' contains '/'",
        ),
        (&["--set", "name=\"../../x\""], 2, "contains '/'"),
        (&["--set", "name=\"..\""], 2, "starts with a dot"),
        (&["--set", "name=\".\""], 2, "starts with a dot"),
        (&["--set", "name=\".hidden\""], 2, "starts with a dot"),
        (&["--set", "name=\"a\\\\b\""], 2, "contains '\\\\'"),
        (&["--set", "name=\"C:x\""], 2, "contains ':'"),
        (&["--set", "name=\"tab\\there\""], 2, "contains '\\t'"),
        (&["--set", "name=\"a*b\""], 2, "contains '*'"),
        (
            &["--set", "name=\" pad\""],
            2,
            "starts or ends with a space",
        ),
    ];
    check_cases(cases, RUN_SMALL);
    // msc fit names its folder out/<name>-fit: the same check, before anything runs.
    check_cases(
        &[(&["--set", "name=\"../up\""], 2, "name:")],
        &[
            "fit",
            "small.toml",
            "--target",
            "small.toml",
            "--param",
            "charge",
        ],
    );
}

/// A `total_mass` whose share per particle underflows to a subnormal or to zero passed the
/// "positive and finite" check; the run then diverged at step 1 asking for a smaller dt.
#[test]
fn a_total_mass_whose_share_underflows_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // 16 particles: 1e-322 / 16 rounds to the smallest subnormal, 5e-324 / 16 to zero.
    for (total, each) in [("1e-322", "5e-324"), ("5e-324", "0")] {
        let scene = SMALL.replace("mass = 0.01", &format!("total_mass = {total}"));
        std::fs::write(dir.path().join("t.toml"), scene).unwrap();
        let o = msc(
            &["run", "t.toml", "--backend", "cpu", "--quiet"],
            dir.path(),
        );
        assert_no_crash(&o, total);
        let err = stderr(&o);
        let want = format!(
            "material.total_mass: {total} kg over 16 particles is {each} kg each: its \
             inverse 1/m overflows f64"
        );
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("t.toml:") && err.contains(&want), "{err}");
        assert!(
            !dir.path().join("out").exists(),
            "an input error wrote outputs"
        );
    }
}

#[test]
fn bad_scene_values_name_their_key() {
    let cases: &[Case] = &[
        (
            &["--set", "integrator.dt=0"],
            2,
            "integrator.dt: must be positive",
        ),
        (&["--set", "integrator.dt=-1"], 2, "integrator.dt"),
        (&["--set", "integrator.dt=nan"], 2, "integrator.dt"),
        (&["--set", "integrator.dt=inf"], 2, "integrator.dt"),
        (&["--set", "integrator.dt=1e300"], 1, "diverged at step 1"),
        // Nothing was integrated at step 0: the time step is not what to change.
        (
            &["--set", "material.rest_length_scale=1e300"],
            1,
            "initial state is already non-finite",
        ),
        (&["--set", "integrator.steps=0"], 2, "integrator.steps"),
        (&["--set", "integrator.steps=-1"], 2, "integrator.steps"),
        (&["--set", "integrator.dtt=0.1"], 2, "integrator.dtt"),
        (
            &["--set", "world.drag=-1"],
            2,
            "world.drag: must be finite and non-negative",
        ),
        (&["--set", "world.drag=nan"], 2, "world.drag"),
        (&["--set", "world.drag=inf"], 2, "world.drag"),
        (&["--set", "world.dragg=1"], 2, "world.dragg"),
        (
            &["--set", "world.drag=1e9"],
            2,
            "the explicit drag is unstable",
        ),
        (
            &["--set", "integrator.method=\"rk4\""],
            2,
            "integrator.method",
        ),
        (&["--set", "integrator.solver.method=\"gmres\""], 2, "gmres"),
        (
            &["--set", "integrator.solver.iterations=0"],
            2,
            "integrator.solver.iterations",
        ),
        (&["--set", "integrator.solver.omega=0"], 2, "omega"),
        (&["--set", "integrator.solver.omega=1.5"], 2, "omega"),
        (&["--set", "integrator.solver.tolerance=-1"], 2, "tolerance"),
        (&["--set", "integrator.solver.rho=1"], 2, "rho"),
        (
            &[
                "--set",
                "integrator.method=\"local_global\"",
                "--set",
                "integrator.local_global_iterations=0",
            ],
            2,
            "local_global_iterations",
        ),
        // One of the two set replaces the file's other; both set is refused.
        (
            &[
                "--set",
                "integrator.duration=1",
                "--set",
                "integrator.steps=3",
            ],
            2,
            "give integrator.duration or integrator.steps, not both",
        ),
        (
            &["--set", "integrator.steps=1000000000000001"],
            2,
            "integrator.steps: must be at most 1e15, got 1000000000000001",
        ),
        (
            &["--set", "gravity=[0, 0, nan]"],
            2,
            "gravity[2]: must be finite",
        ),
        (
            &["--set", "gravity=[0, inf, 0]"],
            2,
            "gravity[1]: must be finite, got inf",
        ),
        (&["--set", "gravity=[1, 2]"], 2, "gravity"),
        (&["--set", "gravity=[0, \"x\", 0]"], 2, "gravity[1]"),
        (&["--set", "material.mass=0"], 2, "material.mass"),
        (&["--set", "material.mass=-1"], 2, "material.mass"),
        // Positive, but 1/m overflows: the run diverged at step 1 asking for a smaller dt.
        (
            &["--set", "material.mass=1e-320"],
            2,
            "material.mass: 1e-320 kg: its inverse 1/m overflows f64",
        ),
        (&["--set", "material.total_mass=1"], 2, "material"),
        (&["--set", "material.stiffness=-1"], 2, "material.stiffness"),
        (
            &["--set", "material.stiffness=nan"],
            2,
            "material.stiffness",
        ),
        (&["--set", "material.damping=-1"], 2, "material.damping"),
        (
            &["--set", "material.rest_length_scale=-1"],
            2,
            "material.rest_length_scale",
        ),
        (&["--set", "material.charge=nan"], 2, "material.charge"),
        (
            &["--set", "material.charged_fraction=2"],
            2,
            "material.charged_fraction",
        ),
        (
            &["--set", "material.charged_fraction=-0.5"],
            2,
            "material.charged_fraction",
        ),
        (&["--set", "material.colour=1"], 2, "material.colour"),
        (&["--set", "mesh.kind=\"blob\""], 2, "mesh.kind"),
        (&["--set", "mesh.resolution=[0, 0]"], 2, "mesh.resolution"),
        (&["--set", "mesh.resolution=[1, 4]"], 2, "mesh.resolution"),
        (&["--set", "mesh.resolution=[-1, 3]"], 2, "mesh.resolution"),
        (
            &["--set", "mesh.resolution=[4, 4, 4]"],
            2,
            "mesh.resolution",
        ),
        (&["--set", "mesh.size=[0, 1]"], 2, "mesh.size"),
        (&["--set", "mesh.size=[1, nan]"], 2, "mesh.size"),
        (&["--set", "mesh.size=[1e300, 1e300]"], 2, "mesh"),
        (&["--set", "mesh.radius=1"], 2, "mesh.radius"),
        (
            &[
                "--set",
                "mesh.kind=\"torus\"",
                "--set",
                "mesh.minor_radius=2",
                "--set",
                "mesh.major_radius=1",
                "--set",
                "mesh.rings=8",
                "--set",
                "mesh.sides=6",
            ],
            2,
            "minor_radius",
        ),
        (
            &["--set", "mesh.kind=\"torus\""],
            2,
            "mesh.major_radius: required",
        ),
        (
            &[
                "--set",
                "mesh.kind=\"icosphere\"",
                "--set",
                "mesh.subdivisions=-1",
            ],
            2,
            "mesh.subdivisions",
        ),
        // Past the particle limit, the limit (its spring count would have saturated at
        // 2^64 - 1 in a memory estimate).
        (
            &[
                "--set",
                "mesh.kind=\"icosphere\"",
                "--set",
                "mesh.radius=1",
                "--set",
                "mesh.subdivisions=30",
            ],
            2,
            "mesh.subdivisions: 30 gives more than the limit of 2147483647 vertices",
        ),
        (
            &[
                "--set",
                "mesh.kind=\"lattice\"",
                "--set",
                "mesh.size=[1,1,1]",
                "--set",
                "mesh.resolution=[0,2,2]",
            ],
            2,
            "mesh.resolution",
        ),
        (&["--set", "mesh.kind=\"obj\""], 2, "mesh.path"),
        (
            &[
                "--set",
                "mesh.kind=\"obj\"",
                "--set",
                "mesh.path=\"missing.obj\"",
            ],
            2,
            "missing.obj",
        ),
        (
            &[
                "--set",
                "mesh.kind=\"obj\"",
                "--set",
                "mesh.path=\"empty.obj\"",
            ],
            2,
            "mesh",
        ),
        (
            &[
                "--set",
                "mesh.kind=\"obj\"",
                "--set",
                "mesh.path=\"nan.obj\"",
            ],
            2,
            "not finite",
        ),
        (
            &[
                "--set",
                "mesh.kind=\"obj\"",
                "--set",
                "mesh.path=\"badface.obj\"",
            ],
            2,
            "mesh",
        ),
        (
            &[
                "--set",
                "mesh.kind=\"obj\"",
                "--set",
                "mesh.path=\"tri.obj\"",
                "--set",
                "mesh.scale=0",
            ],
            2,
            "mesh.scale",
        ),
        (
            &[
                "--set",
                "mesh.kind=\"obj\"",
                "--set",
                "mesh.path=\"tri.obj\"",
                "--set",
                "mesh.scale=-1",
            ],
            2,
            "mesh.scale",
        ),
        (
            &[
                "--set",
                "mesh.kind=\"obj\"",
                "--set",
                "mesh.path=\"tri.obj\"",
                "--set",
                "mesh.scale=1e300",
            ],
            2,
            // The first vertex the scale takes past f32, named before any edge is built.
            "vertex 1 (counting from 0): vertex (1e0, 0e0, 0e0) times mesh scale 1e300",
        ),
        (&["--set", "mesh.center=[0, nan, 0]"], 2, "mesh.center"),
        (&["--set", "pin.indices=[99]"], 2, "pin"),
        (&["--set", "pin.where=\"middle\""], 2, "pin.where"),
        (
            &[
                "--set",
                "pin.indices=[0]",
                "--set",
                "pin.velocity=[nan, 0, 0]",
            ],
            2,
            "pin.velocity",
        ),
        (
            &["--set", "pin.velocity=[0, 0, 0]"],
            2,
            "pin.indices and/or pin.where",
        ),
        (&["--set", "coulomb.method=\"fmm\""], 2, "coulomb.method"),
        (&["--set", "coulomb.softening=-1"], 2, "coulomb.softening"),
        (&["--set", "coulomb.softening=nan"], 2, "coulomb.softening"),
        (
            &[
                "--set",
                "coulomb.method=\"ddef\"",
                "--set",
                "coulomb.samples=-1",
            ],
            2,
            "coulomb.samples",
        ),
        (
            &[
                "--set",
                "coulomb.method=\"ddef\"",
                "--set",
                "coulomb.samples=1000000000",
            ],
            2,
            "coulomb.samples",
        ),
        (
            &[
                "--set",
                "coulomb.method=\"ddef\"",
                "--set",
                "coulomb.rebuild_every=0",
            ],
            2,
            "coulomb.rebuild_every",
        ),
        (
            &[
                "--set",
                "coulomb.method=\"ddef\"",
                "--set",
                "coulomb.ddef_grid=\"octree\"",
            ],
            2,
            "ddef_grid",
        ),
        (&["--set", "coulomb.samples=100"], 2, "coulomb.samples"),
        (
            &[
                "--set",
                "external_charges=[{charge = nan, position = [0, 0, 1]}]",
            ],
            2,
            "external_charges[0].charge",
        ),
        (
            &[
                "--set",
                "external_charges=[{charge = 1e-9, position = [0, inf, 1]}]",
            ],
            2,
            "external_charges[0].position",
        ),
        (
            &["--set", "external_charges=[{charge = 1e-9}]"],
            2,
            "external_charges[0]",
        ),
        (
            &["--set", "external_field.kind=\"dipole\""],
            2,
            "external_field.kind",
        ),
        (
            &[
                "--set",
                "external_field.kind=\"uniform\"",
                "--set",
                "external_field.value=[nan, 0, 0]",
            ],
            2,
            "external_field.value",
        ),
        (
            &[
                "--set",
                "external_field.kind=\"swirl\"",
                "--set",
                "external_field.scale=inf",
            ],
            2,
            "external_field.scale",
        ),
        (
            &[
                "--set",
                "external_field.kind=\"swirl\"",
                "--set",
                "external_field.min_z=-1",
            ],
            2,
            "external_field.min_z",
        ),
        (&["--set", "output.every=0"], 2, "output.every"),
        (&["--set", "output.frames=\"gif\""], 2, "output.frames"),
        (&["--set", "novalue"], 2, "novalue"),
        (&["--set", "=1"], 2, "--set"),
        (&["--set", "[x]=1"], 2, "--set"),
        // An array or inline table TOML cannot read was taken as text and refused as
        // "invalid type: string", naming neither the number nor the missing bracket.
        (
            &["--set", "pin.indices=[18446744073709551615]"],
            2,
            "[18446744073709551615] is not a TOML array (u64 value was too large)",
        ),
        (
            &["--set", "mesh.resolution=[4, 4"],
            2,
            "[4, 4 is not a TOML array (unclosed array",
        ),
        (
            &["--set", "integrator.solver={method=cg}"],
            2,
            "is not a TOML inline table (string values must be quoted",
        ),
        // A value where a table belongs named the parser's type ("expected struct
        // SolverSpec"), not what the scene wants.
        (
            &["--set", "integrator.solver=\"cg\""],
            2,
            "integrator.solver: invalid type: string \"cg\", expected a table",
        ),
        (
            &["--set", "world=1"],
            2,
            "world: invalid type: integer `1`, expected a table",
        ),
    ];
    check_cases(cases, RUN_SMALL);
}

/// An array or value given after an override of a key inside it replaces that key, so the
/// earlier override would silently do nothing (a sweep ran one scene under two labels):
/// refused, the sweep's while planning. An inline table merges key by key, keeping it.
#[test]
fn a_value_set_after_a_key_inside_it_is_refused_but_a_table_merges() {
    let cases: &[Case] = &[
        (
            &[
                "--set",
                "external_charges=[{charge=1e-9, position=[0, 0, 1]}]",
                "--set",
                "external_charges[0].charge=2e-9",
                "--set",
                "external_charges=[]",
            ],
            2,
            "replaces all of external_charges, dropping the earlier --set \
             external_charges[0].charge=2e-9",
        ),
        // An array inside an inline table is replaced whole too.
        (
            &[
                "--set",
                "mesh.resolution[1]=5",
                "--set",
                "mesh={resolution=[4, 4]}",
            ],
            2,
            "replaces all of mesh.resolution, dropping the earlier --set mesh.resolution[1]=5",
        ),
        // A table after a key inside it merges, a key after its table refines it, and a
        // key given again is replaced by design (a manifest's `set`, then a run's, then the
        // command line's).
        (
            &[
                "--set",
                "integrator.solver.iterations=10",
                "--set",
                "integrator.solver={omega=0.3}",
                "--set",
                "integrator.solver={method=\"cg\"}",
                "--set",
                "integrator.solver.iterations=12",
                "--set",
                "integrator.dt=0.02",
                "--set",
                "integrator.dt=0.01",
            ],
            0,
            "",
        ),
    ];
    check_cases(cases, RUN_SMALL);
    // Named while planning, not as a run that cannot start.
    let sweep: &[Case] = &[(
        &[
            "--vary",
            "mesh.resolution[1]=5,6",
            "--vary",
            "mesh={resolution=[4, 4]}",
        ],
        2,
        "error: --vary mesh=...: its value {resolution=[4, 4]} replaces --vary \
         mesh.resolution[1]=5 (at mesh.resolution): give --vary mesh.resolution[1] after \
         this one",
    )];
    check_cases(sweep, &["sweep", "small.toml", "--out", "s", "--quiet"]);

    // `--vary integrator.solver.iterations=10,20 --vary 'integrator.solver={omega=0.3}'`
    // ran one scene under two labels, then was refused: now each run has both.
    let dir = fixture();
    let o = msc(
        &[
            "sweep",
            "small.toml",
            "--out",
            "s",
            "--quiet",
            "--backend",
            "cpu",
            "--vary",
            "integrator.solver.iterations=10,20",
            "--vary",
            "integrator.solver={omega=0.3}",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut iterations = Vec::new();
    for entry in std::fs::read_dir(dir.path().join("s")).unwrap() {
        let scene = entry.unwrap().path().join("scene.toml");
        let Ok(text) = std::fs::read_to_string(&scene) else {
            continue;
        };
        let t: toml::Table = toml::from_str(&text).unwrap();
        let solver = &t["integrator"]["solver"];
        assert_eq!(solver["omega"].as_float(), Some(0.3), "{}", scene.display());
        iterations.push(solver["iterations"].as_integer().unwrap());
    }
    iterations.sort();
    assert_eq!(iterations, [10, 20]);
}

#[test]
fn bad_files_and_options_are_named() {
    let cases: &[Case] = &[
        (&["run", "nosuchscene", "--quiet"], 2, "nosuchscene"),
        (&["run", "missing.toml", "--quiet"], 2, "missing.toml"),
        (&["run", "no/such/dir/x.toml", "--quiet"], 2, "x.toml"),
        (&["run", "broken.toml", "--quiet"], 2, "broken.toml:2"),
        (&["run", "garbage.toml", "--quiet"], 2, "garbage.toml"),
        // It said "stream did not contain valid UTF-8", naming no line or byte.
        (
            &["run", "latin1.toml", "--quiet"],
            2,
            "latin1.toml: not UTF-8 text: invalid byte 0xE9 at line 3, column 6 (byte offset 27)",
        ),
        (&["run", "typo.toml", "--quiet"], 2, "integrator.methd"),
        (&["run", "adir.toml", "--quiet"], 2, "adir.toml"),
        (
            &["run", "small.toml", "--steps", "0", "--quiet"],
            2,
            "steps",
        ),
        // Above i64::MAX the run folder's scene.toml could not record it; and unlike
        // duration, steps had no cap.
        (
            &[
                "run",
                "small.toml",
                "--steps",
                "9223372036854775808",
                "--quiet",
            ],
            2,
            "invalid --steps\n  caused by: integrator.steps: must be at most 1e15, got \
             9223372036854775808",
        ),
        (
            &[
                "run",
                "small.toml",
                "--steps",
                "1000000000000001",
                "--quiet",
            ],
            2,
            "integrator.steps: must be at most 1e15, got 1000000000000001",
        ),
        (&["run", "small.toml", "--backend", "tpu"], 2, "tpu"),
        (&["run", "small.toml", "--out", ".", "--quiet"], 0, ""),
        (
            &["validate", "small.toml", "--tolerance", "-1"],
            2,
            "tolerance",
        ),
        (&["validate", "small.toml", "--steps", "0"], 2, "steps"),
        (&["bench", "--sweeps", "0"], 2, "sweeps"),
        (&["bench", "--sizes", "abc"], 2, "abc"),
        (&["plot", "/nonexistent/run"], 2, "/nonexistent/run"),
        (&["plot", "noframes"], 2, "energy.csv"),
        (&["plot", "small.toml", "small.toml"], 2, "--out"),
        (&["render", "/nonexistent/run"], 2, "/nonexistent/run"),
        (&["render", "noframes"], 2, "no frames"),
        (&["render", "noframes", "--fps", "0"], 2, "fps"),
        // Slower than GIF's longest delay: it was clamped to 655.35 s without a word.
        (&["render", "noframes", "--fps", "0.001"], 2, "655.35 s"),
        (&["render", "noframes", "--size", "0x10"], 2, "size"),
        (&["sweep", "small.toml", "--out", "s"], 2, "--vary"),
        (
            &[
                "sweep",
                "small.toml",
                "--out",
                "s",
                "--vary",
                "integrator.dt",
            ],
            2,
            "KEY=V1,V2",
        ),
        (
            &[
                "sweep",
                "small.toml",
                "--out",
                "s",
                "--vary",
                "integrator.dt=0.1,0.1",
            ],
            2,
            "given twice",
        ),
        // One value in two spellings would run the same scene twice.
        (
            &[
                "sweep",
                "small.toml",
                "--out",
                "s",
                "--vary",
                "integrator.dt=0.01,1e-2",
            ],
            2,
            "given twice",
        ),
        // The varied values come after --set: this --set would be dropped from every run.
        (
            &[
                "sweep",
                "small.toml",
                "--out",
                "s",
                "--vary",
                "integrator.dt=0.01,0.02",
                "--set",
                "integrator.dt=0.5",
            ],
            2,
            "replaces --set integrator.dt=0.5",
        ),
        (
            &["sweep", "small.toml", "--out", "s", "--vary", "a b=1,2"],
            2,
            "dotted scene key",
        ),
        (
            &[
                "sweep",
                "small.toml",
                "--out",
                "s",
                "--vary",
                "integrator.dt=[1,2",
            ],
            2,
            "unbalanced",
        ),
        (
            &["batch", "nomanifest.toml", "--out", "b"],
            2,
            "nomanifest.toml",
        ),
        (&["fit", "small.toml"], 2, "--target"),
        (&["ddef-error", "--samples", "0"], 2, "samples"),
        (&["nosuchcommand"], 2, "nosuchcommand"),
    ];
    let dir = fixture();
    let _ = dir;
    check_cases(cases, &[]);
}

/// Physically impossible or unrepresentable inputs: refused before the run, naming them.
#[test]
fn impossible_systems_are_refused_before_they_run() {
    let cases: &[Case] = &[
        (&["--set", "mesh.resolution=[40000, 40000]"], 2, "needs"),
        (&["--set", "mesh.resolution=[4000000, 4000000]"], 2, "mesh"),
        (
            &[
                "--set",
                "mesh.size=[1e-170, 1e-170]",
                "--set",
                "mesh.resolution=[2, 2]",
            ],
            2,
            "coulomb.softening: charged particles 0 and 1",
        ),
        (
            &[
                "--set",
                "external_charges=[{charge = -1e-6, position = [-0.5, -0.5, 0.0]}]",
            ],
            2,
            "external_charges[0].position",
        ),
        (&["--set", "material.charge=1e200"], 2, "material.charge"),
        // Forces infinite before any step were reported as a divergence at step 1 with
        // "Try a smaller integrator.dt" (swirl, vortex) or at step 0 without a key (k_c q_e
        // overflows though k_c q_e q_i does not).
        (
            &["--set", "external_field={kind=\"swirl\", min_z=1e-320}"],
            2,
            "external_field.min_z: the field's force q E on particle 0 (z = 0 m",
        ),
        (
            &["--set", "external_field={kind=\"vortex\", scale=1e308}"],
            2,
            "raise external_field.min_z or lower external_field.scale",
        ),
        (
            &[
                "--set",
                "external_charges=[{charge=1e-9, position=[0, 0, 1]}, \
                 {charge=1e300, position=[0, 0, 1]}]",
            ],
            2,
            "external_charges[1].charge: 1e300 C at",
        ),
    ];
    check_cases(cases, RUN_SMALL);
    // Softening makes the same close pair legal.
    check_cases(
        &[
            (
                &[
                    "--set",
                    "mesh.size=[1e-170, 1e-170]",
                    "--set",
                    "mesh.resolution=[2, 2]",
                    "--set",
                    "coulomb.softening=1e-3",
                ],
                0,
                "",
            ),
            // A finite non-zero orbit axis whose length overflows (or underflows) f64 is
            // still a direction: it was refused as "must be a non-zero finite vector".
            (
                &[
                    "--set",
                    "external_charges=[{charge=1e-9, position=[0, 0, 1], orbit={axis=[1e200, \
                     1e200, 0], angular_velocity=1}}, {charge=1e-9, position=[0, 0, 2], \
                     orbit={axis=[0, 1e-200, 1e-200], angular_velocity=1}}]",
                ],
                0,
                "",
            ),
        ],
        RUN_SMALL,
    );
}

/// Values f32 cannot hold are named at upload on the GPU, not reported as a divergence.
#[test]
fn values_beyond_f32_are_named_on_the_gpu() {
    if !common::gpu_available() {
        return;
    }
    let cases: &[Case] = &[
        (
            &["--set", "mesh.size=[2e30, 2e30]"],
            2,
            "outside what the GPU's f32",
        ),
        (&["--set", "material.charge=1e15"], 2, "Coulomb product"),
        (&["--set", "gravity=[0, 0, 1e39]"], 2, "gravity"),
        (&["--set", "integrator.dt=1e-50"], 2, "dt"),
        (&["--set", "world.drag=1e-40"], 2, "world.drag"),
    ];
    check_cases(cases, &["run", "small.toml", "--backend", "gpu", "--quiet"]);
}

/// A sweep or batch whose plan holds a run that cannot start stops before anything runs
/// (exit 2, the run and the key named, no output folder).
#[test]
fn bad_sweep_and_batch_plans_stop_before_anything_runs() {
    let cases: &[Case] = &[
        (
            &[
                "sweep",
                "small.toml",
                "--out",
                "D",
                "--vary",
                "integrator.dtt=0.01,0.02",
            ],
            2,
            "integrator.dtt",
        ),
        (
            &[
                "sweep",
                "small.toml",
                "--out",
                "D",
                "--vary",
                "integrator.dt=0.01,-1",
            ],
            2,
            "run 'integrator.dt=-1'",
        ),
        (
            &[
                "sweep",
                "small.toml",
                "--out",
                "D",
                "--vary",
                "integrator.method=imex,leapfrog",
            ],
            2,
            "leapfrog",
        ),
        (
            &[
                "sweep",
                "small.toml",
                "--out",
                "D",
                "--vary",
                "name=\"a\",\"../b\"",
            ],
            2,
            "name",
        ),
        (
            &[
                "sweep",
                "nosuch.toml",
                "--out",
                "D",
                "--vary",
                "integrator.dt=0.1,0.2",
            ],
            2,
            "nosuch.toml",
        ),
        (
            &["batch", "m_typo.toml", "--out", "D"],
            2,
            "material.stifness",
        ),
        (&["batch", "m_global.toml", "--out", "D"], 2, "output.evry"),
        (
            &[
                "batch",
                "m_ok.toml",
                "--out",
                "D",
                "--set",
                "coulomb.methd=\"none\"",
            ],
            2,
            "coulomb.methd",
        ),
        (
            &["batch", "m_broken.toml", "--out", "D"],
            2,
            "broken.toml:2",
        ),
        (&["batch", "m_obj.toml", "--out", "D"], 2, "nope.obj"),
        (
            &["batch", "manifest_missing_scene.toml", "--out", "D"],
            2,
            "nope.toml",
        ),
        (&["batch", "m_badname.toml", "--out", "D"], 2, "../x"),
        (&["batch", "m_norun.toml", "--out", "D"], 2, "m_norun.toml"),
    ];
    let dir = fixture();
    check_cases(cases, &[]);
    assert!(!dir.path().join("D").exists());
}

/// The scene file is an input: `--out .` beside it must not overwrite it.
#[test]
fn the_scene_file_is_never_overwritten_by_outputs() {
    let dir = fixture();
    std::fs::write(dir.path().join("scene.toml"), SMALL).unwrap();
    let o = msc(
        &[
            "run",
            "scene.toml",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            ".",
        ],
        dir.path(),
    );
    assert_no_crash(&o, "run scene.toml --out .");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("an input of this command"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("scene.toml")).unwrap(),
        SMALL
    );
    assert!(!dir.path().join("energy.csv").exists());
    // From another folder the same command writes there, not over the scene.
    let o = msc(
        &[
            "run",
            "small.toml",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            ".",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("small.toml")).unwrap(),
        SMALL
    );
}

/// The torus at h = 0.15 s by explicit Verlet (the README's example of a method that
/// fails) blows up: every run that does is reported diverged with all outputs written.
fn diverging(dir: &Path, out: &str, backend: &str, extra: &[&str]) -> (Output, PathBuf) {
    let mut args = vec![
        "run",
        "torus_dt015",
        "--backend",
        backend,
        "--quiet",
        "--out",
        out,
        "--set",
        "integrator.method=\"verlet\"",
    ];
    args.extend_from_slice(extra);
    (msc(&args, dir), dir.join(out))
}

/// Every frame written is finite (PLY float): a run reported finite never hides inf.
fn assert_frames_finite(out: &Path) {
    let Ok(entries) = std::fs::read_dir(out.join("frames")) else {
        return;
    };
    for e in entries {
        let path = e.unwrap().path();
        let ply = msc::output::ply_read::parse_ply(&std::fs::read(&path).unwrap())
            .unwrap_or_else(|m| panic!("{}: {m}", path.display()));
        for (i, v) in ply.velocities.iter().flatten().enumerate() {
            assert!(v.is_finite(), "{}: velocity {i} is {v}", path.display());
        }
    }
}

fn assert_diverged_with_outputs(o: &Output, out: &Path, what: &str) {
    assert_no_crash(o, what);
    assert_eq!(o.status.code(), Some(1), "{what}: {}", stderr(o));
    assert!(stderr(o).contains("diverged"), "{what}: {}", stderr(o));
    let s = read_json(&out.join("summary.json"));
    assert_eq!(s["finite"], false, "{what}");
    assert!(s["divergence"].is_string(), "{what}: {s}");
    let csv = std::fs::read_to_string(out.join("energy.csv")).unwrap();
    let last_step: u64 = csv
        .lines()
        .last()
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(Some(last_step), s["steps"].as_u64(), "{what}: last row");
    assert_frames_finite(out);
}

#[test]
fn a_diverging_run_stops_with_every_output_written_on_the_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let (o, out) = diverging(dir.path(), "verlet", "cpu", &[]);
    assert_diverged_with_outputs(&o, &out, "verlet cpu");
    for grid in ["lattice", "delaunay"] {
        for frames in ["ply", "none"] {
            let g = format!("coulomb.ddef_grid=\"{grid}\"");
            let f = format!("output.frames=\"{frames}\"");
            let name = format!("ddef-{grid}-{frames}");
            let extra = ["--set", "coulomb.method=\"ddef\"", "--set", &g, "--set", &f];
            let (o, out) = diverging(dir.path(), &name, "cpu", &extra);
            assert_diverged_with_outputs(&o, &out, &name);
        }
    }
}

#[test]
fn a_diverging_run_stops_with_every_output_written_on_the_gpu() {
    if !common::gpu_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // DDEF on the GPU runs on the lattice grid (the Delaunay grid is refused there).
    let extra = ["--set", "coulomb.method=\"ddef\""];
    let (o, out) = diverging(dir.path(), "gpu-ddef-lattice", "gpu", &extra);
    assert_diverged_with_outputs(&o, &out, "gpu-ddef-lattice");
    let (o, out) = diverging(dir.path(), "gpu-verlet", "gpu", &[]);
    assert_diverged_with_outputs(&o, &out, "gpu verlet");
}

#[test]
fn render_draws_the_frames_it_can_and_names_the_rest() {
    if !common::gpu_available() {
        return;
    }
    let dir = fixture();
    let o = msc(
        &[
            "run",
            "small.toml",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            "r",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Break one frame the way a diverged f32 writer would: a non-finite x.
    let frame = dir.path().join("r/frames/frame_000001.ply");
    let mut bytes = std::fs::read(&frame).unwrap();
    let body = bytes
        .windows(11)
        .position(|w| w == b"end_header\n")
        .unwrap()
        + 11;
    bytes[body..body + 4].copy_from_slice(&f32::INFINITY.to_le_bytes());
    std::fs::write(&frame, bytes).unwrap();
    // A stale image from an earlier render of another run.
    std::fs::create_dir_all(dir.path().join("r/render")).unwrap();
    std::fs::write(dir.path().join("r/render/frame_000099.png"), "stale").unwrap();
    let o = msc(&["render", "r", "--size", "200x150"], dir.path());
    assert_no_crash(&o, "render");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("frame_000001.ply") && stderr(&o).contains("non-finite"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).contains("1 skipped"), "{}", stdout(&o));
    let mut images: Vec<String> = std::fs::read_dir(dir.path().join("r/render"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    images.sort();
    assert_eq!(
        images,
        ["frame_000000.png", "frame_000002.png", "frame_000003.png"]
    );
    // A rerun of the run clears the images drawn from the old frames.
    let o = msc(
        &[
            "run",
            "small.toml",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            "r",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_dir(dir.path().join("r/render"))
            .unwrap()
            .count(),
        0
    );
}

/// A file size limit stands in for a full disk: the energy rows written before the write
/// error must survive under `energy.csv`.
#[cfg(unix)]
#[test]
fn a_write_error_keeps_the_energy_rows_already_written() {
    let dir = fixture();
    let bin = env!("CARGO_BIN_EXE_msc");
    // 4 blocks of 1 KiB (bash's unit); SIGXFSZ ignored so writes fail with EFBIG instead.
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -f 4; exec {bin} run small.toml --backend cpu --quiet \
             --out full --steps 200 --set output.frames=\\\"none\\\""
        ))
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_no_crash(&o, "run with a file size limit");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("energy.csv"), "{}", stderr(&o));
    let csv = std::fs::read_to_string(dir.path().join("full/energy.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert!(rows.len() > 10, "rows kept: {}", rows.len());
    assert!(csv.ends_with('\n'), "only whole rows");
    for (k, row) in rows[1..].iter().enumerate() {
        assert!(row.starts_with(&format!("{k},")), "row {k}: {row}");
        assert_eq!(row.split(',').count(), 8, "row {k}: {row}");
    }
    let hidden = common::leftover_temp_files(&dir.path().join("full"));
    assert!(hidden.is_empty(), "temporary files left: {hidden:?}");
}

/// SIGINT (Ctrl-C) and SIGTERM (a scheduler's) finish the step, write every output with
/// `"interrupted": true` and exit 130.
#[cfg(unix)]
#[test]
fn a_stop_request_writes_every_output_and_exits_130() {
    for signal in ["INT", "TERM"] {
        let dir = fixture();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_msc"))
            .args([
                "run",
                "small.toml",
                "--backend",
                "cpu",
                "--quiet",
                "--out",
                "stop",
                "--steps",
                "100000000",
                "--set",
                "output.every=1000",
            ])
            .current_dir(dir.path())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Wait until the run is under way (its energy log has started).
        let started = std::time::Instant::now();
        while !std::fs::read_dir(dir.path().join("stop"))
            .map(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().contains("energy"))
            })
            .unwrap_or(false)
        {
            assert!(started.elapsed().as_secs() < 60, "the run did not start");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        let kill = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let o = child.wait_with_output().unwrap();
        assert_no_crash(&o, signal);
        assert_eq!(o.status.code(), Some(130), "SIG{signal}: {}", stderr(&o));
        assert!(stderr(&o).contains("interrupted"), "{}", stderr(&o));
        let out = dir.path().join("stop");
        let s = read_json(&out.join("summary.json"));
        assert_eq!(s["interrupted"], true, "SIG{signal}");
        assert_eq!(s["finite"], true, "SIG{signal}");
        let steps = s["steps"].as_u64().unwrap();
        assert!(steps > 0 && steps < 100_000_000, "steps {steps}");
        let csv = std::fs::read_to_string(out.join("energy.csv")).unwrap();
        let last = csv.lines().last().unwrap();
        assert!(last.starts_with(&format!("{steps},")), "last row {last}");
        // The frame of the step it stopped at is there too.
        let frames = std::fs::read_dir(out.join("frames")).unwrap().count() as u64;
        assert_eq!(frames, s["frames"].as_u64().unwrap());
        let hidden = common::leftover_temp_files(&out);
        assert!(hidden.is_empty(), "temporary files left: {hidden:?}");
    }
}

/// A sweep stops after the run under way, which is recorded `interrupted` in runs.csv.
#[cfg(unix)]
#[test]
fn a_stop_request_ends_a_sweep_after_the_run_under_way() {
    let dir = fixture();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_msc"))
        .args([
            "sweep",
            "small.toml",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            "sw",
            "--steps",
            "100000000",
            "--vary",
            "material.stiffness=10,20,30",
        ])
        .current_dir(dir.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !dir
        .path()
        .join("sw/material.stiffness=10/scene.toml")
        .exists()
    {
        assert!(started.elapsed().as_secs() < 60, "the sweep did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    assert_no_crash(&o, "sweep");
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("interrupted after 1 of 3 runs"),
        "{}",
        stderr(&o)
    );
    let csv = std::fs::read_to_string(dir.path().join("sw/runs.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{csv}");
    assert!(rows[0].contains(",interrupted,"), "{csv}");
    assert!(!dir.path().join("sw/material.stiffness=20").exists());
    let s = read_json(&dir.path().join("sw/material.stiffness=10/summary.json"));
    assert_eq!(s["interrupted"], true);
}

/// Zero prints as zero: no `-0` in a CPU run's report or files.
#[test]
fn zero_is_never_written_as_minus_zero() {
    let dir = fixture();
    let o = msc(
        &["run", "small.toml", "--backend", "cpu", "--out", "z"],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stdout(&o).contains("-0.0000e0"), "{}", stdout(&o));
    let csv = std::fs::read_to_string(dir.path().join("z/energy.csv")).unwrap();
    assert!(
        !csv.split([',', '\n']).any(|f| f == "-0e0"),
        "energy.csv holds -0e0:\n{csv}"
    );
    let summary = std::fs::read_to_string(dir.path().join("z/summary.json")).unwrap();
    assert!(!summary.contains("-0.0"), "{summary}");
}

/// Numbers in errors stay short: 1e39 is not a 40-digit integer.
#[test]
fn big_numbers_in_errors_are_printed_briefly() {
    let dir = fixture();
    let o = msc(
        &[
            "run",
            "small.toml",
            "--backend",
            "cpu",
            "--quiet",
            "--set",
            "integrator.dt=-1e300",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("-1e300"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("0000000000"), "{}", stderr(&o));
}

/// Without XDG_RUNTIME_DIR (a headless server), Mesa's complaint must not reach the user.
#[test]
fn no_runtime_dir_noise_on_a_headless_server() {
    let dir = fixture();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_msc"))
        .args([
            "run",
            "small.toml",
            "--backend",
            "auto",
            "--quiet",
            "--out",
            "x",
        ])
        .env_remove("XDG_RUNTIME_DIR")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("XDG_RUNTIME_DIR"), "{}", stderr(&o));
    // The auto note names each software device once, with its backends.
    if let Some(line) = stderr(&o).lines().find(|l| l.contains("found:")) {
        let after = line.split("found:").nth(1).unwrap();
        for name in after.split("), ") {
            let device = name.split(" (").next().unwrap().trim();
            assert_eq!(after.matches(device).count(), 1, "{line}");
        }
    }
}
