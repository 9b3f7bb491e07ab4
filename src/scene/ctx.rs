//! Building errors while a scene is built: where a key was set (line or `--set`), and the
//! range checks of single values that name the key.

use super::keys::{line_of, SourceMap};
use super::overrides::Override;
use super::{Location, SceneError};
use crate::model::MeshError;
use glam::DVec3;

/// What error construction needs: where the text came from and which keys `--set` set.
pub(super) struct Ctx<'a> {
    pub origin: String,
    pub map: SourceMap<'a>,
    pub overrides: &'a [Override],
}

impl Ctx<'_> {
    /// The location of `key`: the `--set` that set it, else its line in the file.
    pub fn at(&self, key: &str) -> Location {
        let set_by = self
            .overrides
            .iter()
            .rev()
            .find(|o| o.sets(key))
            .map(|o| o.arg.clone());
        let line = if set_by.is_some() {
            None
        } else {
            self.map.line(key)
        };
        Location {
            origin: self.origin.clone(),
            line,
            set_by,
        }
    }

    pub fn invalid(&self, key: impl Into<String>, message: impl Into<String>) -> SceneError {
        let key = key.into();
        SceneError::Invalid {
            at: self.at(&key),
            key,
            message: message.into(),
        }
    }

    /// A serde error from deserializing `text`: find the key from the error's span.
    pub fn schema(&self, e: toml::de::Error, text: &str, original: bool) -> SceneError {
        let message = e.message().trim().to_string();
        let mut key = match e.span() {
            Some(span) => SourceMap::new(text).key_at(&span),
            None => String::new(),
        };
        // "missing field `x`" points at the table that lacks it.
        if let Some(field) = message
            .strip_prefix("missing field `")
            .and_then(|r| r.split('`').next())
        {
            key = if key.is_empty() {
                field.to_string()
            } else {
                format!("{key}.{field}")
            };
        }
        let mut at = self.at(&key);
        if original && at.line.is_none() {
            // Keys the map cannot place (e.g. a missing top-level key): the error's own span.
            at.line = e.span().map(|s| line_of(text, s.start));
        }
        SceneError::Schema { at, key, message }
    }

    pub fn mesh(&self, e: MeshError) -> SceneError {
        let key = match &e {
            MeshError::BadParameter { param, .. } => format!("mesh.{param}"),
            _ => "mesh.path".to_string(),
        };
        SceneError::Mesh {
            at: self.at(&key),
            key,
            source: Box::new(e),
        }
    }
}

/// A finite 3-vector; the error names the component (`gravity[2]`).
pub(super) fn finite3(ctx: &Ctx, key: &str, v: [f64; 3]) -> Result<DVec3, SceneError> {
    match (0..3).find(|&k| !v[k].is_finite()) {
        None => Ok(DVec3::from_array(v)),
        Some(k) => Err(ctx.invalid(
            format!("{key}[{k}]"),
            format!("must be finite, got {}", crate::display::num(v[k])),
        )),
    }
}

pub(super) fn check(
    ctx: &Ctx,
    key: &str,
    v: f64,
    ok: bool,
    range: &str,
) -> Result<f64, SceneError> {
    if ok && v.is_finite() {
        Ok(v)
    } else {
        Err(ctx.invalid(
            key,
            format!("must be {range}, got {}", crate::display::num(v)),
        ))
    }
}

pub(super) fn positive(ctx: &Ctx, key: &str, v: f64) -> Result<f64, SceneError> {
    check(ctx, key, v, v > 0.0, "positive and finite")
}

pub(super) fn non_negative(ctx: &Ctx, key: &str, v: f64) -> Result<f64, SceneError> {
    check(ctx, key, v, v >= 0.0, "finite and non-negative")
}

/// At most one of two alternative keys.
pub(super) fn one_of<T>(
    ctx: &Ctx,
    a: (&str, Option<T>),
    b: (&str, Option<T>),
) -> Result<(), SceneError> {
    if a.1.is_some() && b.1.is_some() {
        return Err(ctx.invalid(b.0, format!("give {} or {}, not both", a.0, b.0)));
    }
    Ok(())
}
