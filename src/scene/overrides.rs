//! `--set key=value`: edits the parsed TOML table before it is deserialized, so an
//! override goes through exactly the same checks as the file itself.

use super::keys::{format_path, parse_path, Seg};
use super::schema::MeshKind;
use super::SceneError;
use crate::config::ExternalField;
use toml::{Table, Value};

/// One parsed `--set` argument.
pub(super) struct Override {
    pub arg: String,
    pub path: Vec<Seg>,
    pub value: Value,
}

impl Override {
    pub fn key(&self) -> String {
        format_path(&self.path)
    }
}

fn err(arg: &str, message: impl Into<String>) -> SceneError {
    SceneError::Override {
        arg: arg.to_string(),
        message: message.into(),
    }
}

/// Parses `key=value`. The value is read as a TOML value (`0.15`, `[64, 64]`,
/// `{ method = "cg" }`, `"text"`); when that fails it is taken as a bare string (`cg`).
pub(super) fn parse(arg: &str) -> Result<Override, SceneError> {
    let Some((key, raw)) = arg.split_once('=') else {
        return Err(err(arg, "expected key=value, e.g. integrator.dt=0.01"));
    };
    let key = key.trim();
    let path = parse_path(key)
        .filter(|p| matches!(p.first(), Some(Seg::Key(_))))
        .ok_or_else(|| {
            err(
                arg,
                format!("'{key}' is not a dotted key such as integrator.solver.method"),
            )
        })?;
    let raw = raw.trim();
    let value = toml::from_str::<Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(raw.to_string()));
    Ok(Override {
        arg: arg.to_string(),
        path,
        value,
    })
}

/// Sets every override in `table`, creating missing tables on the way.
pub(super) fn apply(table: &mut Table, overrides: &[Override]) -> Result<(), SceneError> {
    let original_mesh_kind = kind_of(table, "mesh");
    let original_field_kind = kind_of(table, "external_field");
    for o in overrides {
        set(table, o)?;
    }
    // Switching a kind from the command line drops the file's parameters of the old kind
    // (keys set by --set are kept), so `--set mesh.kind=obj --set mesh.path=...` works.
    let set_keys: Vec<String> = overrides.iter().map(Override::key).collect();
    let new_mesh_kind = kind_of(table, "mesh");
    if new_mesh_kind != original_mesh_kind {
        if let Some(kind) = new_mesh_kind.as_deref().and_then(MeshKind::from_name) {
            prune(table, "mesh", kind.keys(), &["kind", "center"], &set_keys);
        }
    }
    let new_field_kind = kind_of(table, "external_field");
    if new_field_kind != original_field_kind {
        if let Some(kind) = new_field_kind.as_deref().and_then(ExternalField::from_name) {
            prune(table, "external_field", kind.keys(), &["kind"], &set_keys);
        }
    }
    Ok(())
}

fn kind_of(table: &Table, section: &str) -> Option<String> {
    table
        .get(section)?
        .as_table()?
        .get("kind")?
        .as_str()
        .map(str::to_string)
}

fn prune(table: &mut Table, section: &str, keep: &[&str], always: &[&str], set: &[String]) {
    if let Some(Value::Table(t)) = table.get_mut(section) {
        t.retain(|k, _| {
            keep.contains(&k)
                || always.contains(&k)
                || set.iter().any(|s| s == &format!("{section}.{k}"))
        });
    }
}

fn set(root: &mut Table, o: &Override) -> Result<(), SceneError> {
    // Wrap the document as a value so one loop handles every level.
    let mut doc = Value::Table(std::mem::take(root));
    let result = set_in(&mut doc, o);
    if let Value::Table(t) = doc {
        *root = t;
    }
    result
}

fn set_in(doc: &mut Value, o: &Override) -> Result<(), SceneError> {
    let Some((last, parents)) = o.path.split_last() else {
        return Err(err(&o.arg, "empty key"));
    };
    let mut cur = doc;
    for (depth, seg) in parents.iter().enumerate() {
        cur = step(cur, seg, &format_path(&parents[..depth]), &o.arg)?;
    }
    let here = format_path(parents);
    match (cur, last) {
        (Value::Table(t), Seg::Key(k)) => {
            t.insert(k.clone(), o.value.clone());
            Ok(())
        }
        (Value::Array(a), Seg::Index(i)) => {
            let len = a.len();
            let slot = a.get_mut(*i).ok_or_else(|| {
                err(
                    &o.arg,
                    format!("{here} has {len} entries, index {i} is out of range"),
                )
            })?;
            *slot = o.value.clone();
            Ok(())
        }
        (v, _) => Err(err(
            &o.arg,
            format!("{here} is a {}, not a table or array", v.type_str()),
        )),
    }
}

fn step<'v>(
    cur: &'v mut Value,
    seg: &Seg,
    here: &str,
    arg: &str,
) -> Result<&'v mut Value, SceneError> {
    match (cur, seg) {
        (Value::Table(t), Seg::Key(k)) => Ok(t
            .entry(k.clone())
            .or_insert_with(|| Value::Table(Table::new()))),
        (Value::Array(a), Seg::Index(i)) => {
            let len = a.len();
            a.get_mut(*i).ok_or_else(|| {
                err(
                    arg,
                    format!("{here} has {len} entries, index {i} is out of range"),
                )
            })
        }
        (v, _) => Err(err(
            arg,
            format!("{here} is a {}, not a table or array", v.type_str()),
        )),
    }
}
