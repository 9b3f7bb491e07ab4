//! The checks a batch of worlds passes before anything is built, and how an error of one
//! world names it ("world 2 (run 'c')"), so that in a batch of many worlds the one to fix
//! is known.

use super::key::BatchKey;
use crate::config::{Config, ConfigError};
use crate::gpu::error::GpuError;
use crate::model::System;

/// Worlds one [`super::worlds::GpuWorlds`] holds at most (a reduction's second stage runs
/// one workgroup per world, within the 65535 of one grid dimension).
pub const MAX_BATCH_WORLDS: usize = 4096;

/// World `w` in a message: its index and, where the caller named it, its name.
fn label(w: usize, names: &[Option<String>]) -> String {
    label_named(w, names.get(w).and_then(Option::as_deref))
}

fn label_named(w: usize, name: Option<&str>) -> String {
    match name {
        Some(name) => format!("world {w} ({name})"),
        None => format!("world {w}"),
    }
}

/// The batch's key, after checking every world against the first and on its own.
pub(super) fn check(
    worlds: &[(&System, &Config)],
    names: &[Option<String>],
) -> Result<BatchKey, GpuError> {
    let Some((_, first)) = worlds.first() else {
        return Err(GpuError::Worlds("a batch needs at least one world".into()));
    };
    if worlds.len() > MAX_BATCH_WORLDS {
        return Err(GpuError::LimitExceeded {
            what: "worlds in one batch".into(),
            needed: worlds.len() as u64,
            limit: MAX_BATCH_WORLDS as u64,
        });
    }
    let key = BatchKey::of(first).map_err(|e| in_world(0, names, e))?;
    for (w, (system, config)) in worlds.iter().enumerate() {
        let k = BatchKey::of(config).map_err(|e| in_world(w, names, e))?;
        if k != key {
            return Err(GpuError::Worlds(format!(
                "{} differs from {} in what a batch shares ({}): group worlds by \
                 integrator, solver method, iterations and Coulomb method",
                label(w, names),
                label(0, names),
                k.differences(&key)
            )));
        }
        check_world(system, config).map_err(|e| in_world(w, names, e))?;
    }
    Ok(key)
}

/// The checks of one world on its own (`GpuWorlds::check_world`): its configuration
/// for its system, and every value within f32 range.
pub(super) fn check_world(system: &System, config: &Config) -> Result<(), GpuError> {
    config.validate_for(system)?;
    crate::gpu::host::range::check(system, config)
}

/// `e`, an error of world `w`, naming the world. Where the error has a place for it the
/// world goes there and the variant stays (callers match on it: a CPU fallback for
/// `Unsupported` and f32 range errors, the exit code of a limit, Python's ConfigError and
/// its key); errors of the device or the whole batch are left as they are; any other (a
/// DDEF plan, a model) is wrapped in [`GpuError::World`].
pub(super) fn in_world(w: usize, names: &[Option<String>], e: GpuError) -> GpuError {
    at_world(label(w, names), e)
}

/// [`in_world`] for world `w` named `name` alone (no table of names to index, so any
/// `w` is only printed).
pub(super) fn in_named_world(w: usize, name: Option<&str>, e: GpuError) -> GpuError {
    at_world(label_named(w, name), e)
}

fn at_world(at: String, e: GpuError) -> GpuError {
    match e {
        GpuError::F32Range { what, value, limit } => GpuError::F32Range {
            what: format!("{at}, {what}"),
            value,
            limit,
        },
        GpuError::F32Pair {
            what,
            distance,
            limit,
        } => GpuError::F32Pair {
            what: format!("{at}, {what}"),
            distance,
            limit,
        },
        GpuError::LimitExceeded {
            what,
            needed,
            limit,
        } => GpuError::LimitExceeded {
            what: format!("{at}, {what}"),
            needed,
            limit,
        },
        GpuError::Unsupported(what) => GpuError::Unsupported(format!("{at}, {what}")),
        GpuError::Config(c) => GpuError::Config(ConfigError {
            message: format!("in {at}, {}", c.message),
            key: c.key,
        }),
        e @ (GpuError::Ddef(_) | GpuError::Model(_)) => GpuError::World {
            world: at,
            error: Box::new(e),
        },
        e => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ddef::DdefError;

    /// A DDEF plan's error has no place for the world: it is wrapped, naming the world
    /// and keeping the error.
    #[test]
    fn an_error_without_a_place_for_the_world_is_wrapped_naming_it() {
        let names = [None, None, Some("run 'c'".to_string())];
        let e = in_world(2, &names, GpuError::Ddef(DdefError::NoCharges));
        assert!(
            e.to_string().starts_with("world 2 (run 'c'): DDEF needs"),
            "{e}"
        );
        match e {
            GpuError::World { error, .. } => {
                assert!(matches!(*error, GpuError::Ddef(DdefError::NoCharges)))
            }
            e => panic!("expected GpuError::World, got {e:?}"),
        }
    }

    /// Errors of the device are no world's: they stay as they are.
    #[test]
    fn a_device_error_names_no_world() {
        let e = in_world(1, &[], GpuError::DeviceLost("gone".into()));
        assert_eq!(e.to_string(), "GPU device lost: gone");
    }
}
