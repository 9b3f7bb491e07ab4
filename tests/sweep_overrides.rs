//! A sweep's plan refuses a `--vary` value that would replace a `--set` or an earlier
//! `--vary` (runs labelled apart would run alike), naming both while planning; an inline
//! table merges key by key, so a key it leaves out is not replaced.

use msc::batch::plan::{sweep, Vary};

fn vary(args: &[&str]) -> Vec<Vary> {
    args.iter().map(|a| Vary::parse(a).unwrap()).collect()
}

const CHARGE: &str = "external_charges[0].charge";

#[test]
fn a_value_that_replaces_a_set_is_refused() {
    let dt = vary(&["integrator.dt=0.01,0.02"]);
    let solver = vary(&["integrator.solver={method=\"cg\"},{iterations=9}"]);
    let charges = vary(&["external_charges=[],[{charge=1}]"]);
    let charge = format!("{CHARGE}=1e-9");
    for (set, varies, value, at) in [
        ("integrator.dt=0.5", &dt, "0.01", "integrator.dt"),
        (" integrator.dt = 0.5", &dt, "0.01", "integrator.dt"),
        // The first value merges around the --set; the second sets it again.
        (
            "integrator.solver.iterations=5",
            &solver,
            "{iterations=9}",
            "integrator.solver.iterations",
        ),
        (&charge, &charges, "[]", "external_charges"),
    ] {
        let e = sweep("t", &[set.into()], varies).unwrap_err().to_string();
        let says = format!("its value {value} replaces --set {set} (at {at}): drop that --set");
        assert!(e.contains(&says), "{set}: {e}");
    }
    // A --set beside, around or after a varied key, or one its tables leave out, applies.
    for set in [
        "integrator.dt_x=1",
        "integrator.steps=5",
        "integrator={method=\"imex\"}",
    ] {
        assert!(sweep("t", &[set.into()], &dt).is_ok(), "{set}");
    }
    let merged = vary(&["integrator.solver={method=\"cg\"},{omega=0.3}"]);
    let set = ["integrator.solver.iterations=5".into()];
    assert!(sweep("t", &set, &merged).is_ok());
}

/// `--vary 'integrator.solver.iterations=10,20' --vary 'integrator.solver={omega=0.3}'`
/// ran one scene under two labels when a table replaced its table (c6ec939 refused it when
/// the first run loaded); with merging it runs both. An array still replaces whole, and
/// since c6ec939 that was refused only when the first run loaded, not while planning.
#[test]
fn a_value_that_replaces_an_earlier_varied_key_is_refused_while_planning() {
    let cases = [
        (
            vary(&[
                "integrator.solver.iterations=1,2",
                "integrator.solver={iterations=3},{omega=0.3}",
            ]),
            "--vary integrator.solver=...: its value {iterations=3} replaces --vary \
             integrator.solver.iterations=1 (at integrator.solver.iterations): vary \
             integrator.solver.iterations in one --vary only",
        ),
        (
            vary(&[&format!("{CHARGE}=1,2"), "external_charges=[{charge=3}]"]),
            "--vary external_charges=...: its value [{charge=3}] replaces --vary \
             external_charges[0].charge=1 (at external_charges): give --vary \
             external_charges[0].charge after this one",
        ),
    ];
    for (varies, says) in cases {
        let e = sweep("t", &[], &varies).unwrap_err().to_string();
        assert!(e.contains(says), "{e}");
    }
    for ok in [
        vary(&[
            "integrator.solver.iterations=10,20",
            "integrator.solver={omega=0.3}",
        ]),
        vary(&["external_charges=[{charge=3}]", &format!("{CHARGE}=1,2")]),
    ] {
        let plan = sweep("t", &[], &ok).unwrap();
        assert_eq!(plan.runs.len(), 2);
    }
}
