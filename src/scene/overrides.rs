//! `--set key=value`: edits the parsed TOML table before it is deserialized, so an
//! override goes through exactly the same checks as the file itself.

use super::keys::{format_path, parse_path, Seg};
use super::schema::{coulomb_keys, integrator_keys, MeshKind};
use super::SceneError;
use crate::config::{CoulombMethod, ExternalField, Integrator};
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

    /// How much of `path` (a key at or inside this override's) this override gives a value
    /// whole: all of it when it reaches the key, less when an array or value stands in for a
    /// table holding it; `None` when an inline table leaves the key out (it merges, so the
    /// key keeps the value it had).
    fn reaches(&self, path: &[Seg]) -> Option<usize> {
        let rest = path.strip_prefix(self.path.as_slice())?;
        let mut v = &self.value;
        for (i, seg) in rest.iter().enumerate() {
            match (v, seg) {
                (Value::Table(t), Seg::Key(k)) => v = t.get(k)?,
                _ => return Some(self.path.len() + i),
            }
        }
        Some(path.len())
    }

    /// Whether this override set `key`, for naming where an error's key came from.
    pub fn sets(&self, key: &str) -> bool {
        match parse_path(key) {
            Some(path) => self.reaches(&path).is_some(),
            None => {
                let k = self.key();
                key == k || key.starts_with(&format!("{k}.")) || key.starts_with(&format!("{k}["))
            }
        }
    }
}

/// The dotted keys an override sets one by one: its inline tables' keys, recursively
/// (arrays are values).
fn leaves(path: &[Seg], value: &Value, out: &mut Vec<Vec<Seg>>) {
    match value {
        Value::Table(t) if !t.is_empty() => {
            for (k, v) in t {
                let mut p = path.to_vec();
                p.push(Seg::Key(k.clone()));
                leaves(&p, v, out);
            }
        }
        _ => out.push(path.to_vec()),
    }
}

/// The first key `earlier` sets that `later` gives a new value, with the key `later` sets
/// whole to do so: the same key, or a table or array holding it, replaced by an array or
/// value. An inline table merges key by key, so a key it leaves out keeps its value.
pub(super) fn overwrites(
    earlier: &Override,
    later: &Override,
    only_holders: bool,
) -> Option<(String, String)> {
    let mut keys = Vec::new();
    leaves(&earlier.path, &earlier.value, &mut keys);
    keys.iter().find_map(|key| {
        let n = later.reaches(key)?;
        (!only_holders || n < key.len()).then(|| (format_path(key), format_path(&key[..n])))
    })
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
    let value = match toml::from_str::<Table>(&format!("v = {raw}")) {
        Ok(mut t) => {
            let v = t.remove("v");
            // `0.01\nsteps=99` parses as two keys: refused, not cut to the first.
            let extra: Vec<&str> = t.keys().map(String::as_str).collect();
            match v {
                Some(v) if extra.is_empty() => v,
                _ => {
                    return Err(err(
                        arg,
                        format!(
                            "the value must be one TOML value, but it also sets {}: give \
                             each key its own --set",
                            extra.join(", ")
                        ),
                    ))
                }
            }
        }
        // A bare string is one line: more lines are text the parser could not read.
        Err(e) if raw.contains(['\n', '\r']) => {
            return Err(err(
                arg,
                format!(
                    "the value spans lines and is not one TOML value ({})",
                    e.message().trim()
                ),
            ))
        }
        // A number TOML cannot hold (2^64, 1e999) is not meant as text.
        Err(e) if looks_numeric(raw) => {
            return Err(err(
                arg,
                format!(
                    "{raw} is not a TOML number ({}): integers are 64-bit signed, floats \
                     64-bit",
                    e.message().trim()
                ),
            ))
        }
        // An array or inline table TOML cannot read (`[4, 4`, `[2^64]`) is not meant as
        // text either: read as a string, it was refused as "invalid type: string".
        Err(e) if raw.starts_with(['[', '{']) => {
            return Err(err(
                arg,
                format!(
                    "{raw} is not a TOML {} ({}); text that starts with [ or {{ must be \
                     quoted",
                    if raw.starts_with('[') {
                        "array"
                    } else {
                        "inline table"
                    },
                    e.message().trim()
                ),
            ))
        }
        Err(_) => Value::String(raw.to_string()),
    };
    Ok(Override {
        arg: arg.to_string(),
        path,
        value,
    })
}

/// A decimal number in TOML's syntax: optional sign, digits, an optional fraction and
/// exponent (`3d_model.obj` and `0.0.1` are not).
fn looks_numeric(raw: &str) -> bool {
    let s = raw.strip_prefix(['+', '-']).unwrap_or(raw);
    let (mantissa, exponent) = match s.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e.strip_prefix(['+', '-']).unwrap_or(e))),
        None => (s, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, "0"));
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit() || b == b'_');
    digits(int) && digits(frac) && exponent.is_none_or(digits)
}

/// Sets every override in `table`, creating missing tables on the way; an inline table
/// merges into the table it names, as its dotted keys would.
pub(super) fn apply(table: &mut Table, overrides: &[Override]) -> Result<(), SceneError> {
    // An inline table merges, but an array or value set after a key inside it replaces
    // that key: refused, not dropped (a sweep's `--vary a[0].b=1,2 --vary a=[{c=3}]` ran the
    // same scene under two labels). A key given again replaces its value.
    for (j, later) in overrides.iter().enumerate() {
        let dropped = overrides[..j]
            .iter()
            .find_map(|e| Some((e, overwrites(e, later, true)?.1)));
        if let Some((earlier, holder)) = dropped {
            return Err(err(
                &later.arg,
                format!(
                    "replaces all of {holder}, dropping the earlier --set {}: give that key \
                     after this one, or inside its value",
                    earlier.arg
                ),
            ));
        }
    }
    let before = Selectors::of(table);
    for o in overrides {
        set(table, o)?;
    }
    // Switching a kind or method from the command line drops the file's parameters that
    // only the old one reads (keys set by --set are kept), so `--set mesh.kind=obj --set
    // mesh.path=...` works and `--set integrator.method=verlet` does not leave the file's
    // solver behind. An inline table (`external_field={kind="vortex",value=[1,0,0]}`) sets
    // each of its keys, so they are kept and checked as if set one by one.
    let mut set_keys = Vec::new();
    for o in overrides {
        keys_set(o.key(), &o.value, &mut set_keys);
    }
    let after = Selectors::of(table);
    if after.mesh != before.mesh {
        if let Some(kind) = after.mesh.as_deref().and_then(MeshKind::from_name) {
            prune(table, "mesh", kind.keys(), &["kind", "center"], &set_keys);
        }
    }
    if after.field != before.field {
        if let Some(kind) = after.field.as_deref().and_then(ExternalField::from_name) {
            prune(table, "external_field", kind.keys(), &["kind"], &set_keys);
        }
    }
    if after.integrator != before.integrator {
        if let Some(method) = after.integrator.as_deref().and_then(Integrator::from_name) {
            let always = ["method", "dt", "duration", "steps"];
            prune(
                table,
                "integrator",
                integrator_keys(method),
                &always,
                &set_keys,
            );
        }
    }
    if after.coulomb != before.coulomb {
        if let Some(method) = after.coulomb.as_deref().and_then(CoulombMethod::from_name) {
            let always = ["method", "softening"];
            prune(table, "coulomb", coulomb_keys(method), &always, &set_keys);
        }
    }
    // A run's length is one of two keys: --set of one replaces the file's other (the
    // torus's `duration` and `--set integrator.steps=5`); --set of both is still refused.
    let set_here = |k: &str| set_keys.iter().any(|s| s == &format!("integrator.{k}"));
    for (this, other) in [("steps", "duration"), ("duration", "steps")] {
        if set_here(this) && !set_here(other) {
            if let Some(Value::Table(t)) = table.get_mut("integrator") {
                t.remove(other);
            }
        }
    }
    Ok(())
}

/// The names that choose which keys of a section are read.
struct Selectors {
    mesh: Option<String>,
    field: Option<String>,
    integrator: Option<String>,
    coulomb: Option<String>,
}

impl Selectors {
    fn of(table: &Table) -> Self {
        Self {
            mesh: name_of(table, "mesh", "kind"),
            field: name_of(table, "external_field", "kind"),
            integrator: name_of(table, "integrator", "method"),
            coulomb: name_of(table, "coulomb", "method"),
        }
    }
}

fn keys_set(key: String, value: &Value, out: &mut Vec<String>) {
    if let Value::Table(t) = value {
        for (k, v) in t {
            keys_set(format!("{key}.{k}"), v, out);
        }
    }
    out.push(key);
}

fn name_of(table: &Table, section: &str, key: &str) -> Option<String> {
    table
        .get(section)?
        .as_table()?
        .get(key)?
        .as_str()
        .map(str::to_string)
}

fn prune(table: &mut Table, section: &str, keep: &[&str], always: &[&str], set: &[String]) {
    if let Some(Value::Table(t)) = table.get_mut(section) {
        t.retain(|k, _| {
            keep.contains(&k)
                || always.contains(&k)
                || set.iter().any(|s| {
                    // `integrator.solver.iterations` set keeps `integrator.solver`.
                    let rest = s.strip_prefix(&format!("{section}.{k}"));
                    rest.is_some_and(|r| r.is_empty() || r.starts_with(['.', '[']))
                })
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
        let next = &o.path[depth + 1];
        cur = step(cur, seg, next, &o.path[..=depth], &o.arg)?;
    }
    let here = format_path(parents);
    match (cur, last) {
        (Value::Table(t), Seg::Key(k)) => {
            match t.get_mut(k) {
                Some(slot) => merge(slot, &o.value),
                None => {
                    t.insert(k.clone(), o.value.clone());
                }
            }
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
            merge(slot, &o.value);
            Ok(())
        }
        (v, seg) => Err(not_a(&o.arg, &here, v, seg)),
    }
}

/// Puts `value` in `slot` as its dotted keys would go one by one: a table into a table key
/// by key (so the file's other keys stay), anything else whole (arrays are replaced).
fn merge(slot: &mut Value, value: &Value) {
    match (slot, value) {
        (Value::Table(old), Value::Table(new)) => {
            for (k, v) in new {
                match old.get_mut(k) {
                    Some(s) => merge(s, v),
                    None => {
                        old.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

/// `here` holds a `v` where `seg` needs a table (a key) or an array (an index).
fn not_a(arg: &str, here: &str, v: &Value, seg: &Seg) -> SceneError {
    let wanted = match seg {
        Seg::Key(_) => "a table",
        Seg::Index(_) => "an array",
    };
    let kind = v.type_str();
    let a = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    err(arg, format!("{here} is {a} {kind}, not {wanted}"))
}

fn step<'v>(
    cur: &'v mut Value,
    seg: &Seg,
    next: &Seg,
    path: &[Seg],
    arg: &str,
) -> Result<&'v mut Value, SceneError> {
    let here = format_path(&path[..path.len() - 1]);
    match (cur, seg) {
        (Value::Table(t), Seg::Key(k)) => {
            // A missing table is created; a missing array cannot be, so an index into one
            // names what is missing.
            if let (false, Seg::Index(i)) = (t.contains_key(k), next) {
                let key = format_path(path);
                return Err(err(
                    arg,
                    format!("the scene has no {key}, so there is no {key}[{i}] to set"),
                ));
            }
            Ok(t.entry(k.clone())
                .or_insert_with(|| Value::Table(Table::new())))
        }
        (Value::Array(a), Seg::Index(i)) => {
            let len = a.len();
            a.get_mut(*i).ok_or_else(|| {
                err(
                    arg,
                    format!("{here} has {len} entries, index {i} is out of range"),
                )
            })
        }
        (v, seg) => Err(not_a(arg, &here, v, seg)),
    }
}
