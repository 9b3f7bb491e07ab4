//! Python values to the crate's types and back: numpy arrays of vectors, scalars and
//! indices (shape-checked, errors naming the argument and the offending index), scene
//! overrides from a dict (values written as TOML), JSON values as Python objects.

use glam::DVec3;
use msc::model::System;
use numpy::{AllowTypeChange, PyArray1, PyArrayLikeDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyMemoryError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyMapping, PyString};

use crate::errors::{error, Kind};

fn model_error(py: Python<'_>, message: String) -> PyErr {
    error(py, Kind::Model, message)
}

fn shape_text(shape: &[usize]) -> String {
    let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    if parts.len() == 1 {
        format!("({},)", parts[0])
    } else {
        format!("({})", parts.join(", "))
    }
}

/// An array-like of float64 (integer and float dtypes are converted, as
/// `numpy.asarray` would). What numpy would turn into numbers by reinterpreting it is a
/// TypeError naming `what`: None (NaN), strings (parsed), booleans (0 and 1), dates and
/// durations (their tick counts); complex numbers are a ModelError. A sequence numpy
/// cannot make one of (ragged rows, an int too large for a float) is a ModelError with
/// numpy's reason; any other object a TypeError.
fn floats<'py>(
    obj: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<PyArrayLikeDyn<'py, f64, AllowTypeChange>> {
    let py = obj.py();
    let got = type_name(obj);
    let not_numbers = |e: PyErr| {
        if e.is_instance_of::<PyValueError>(py) || e.is_instance_of::<PyOverflowError>(py) {
            return model_error(py, format!("{what}: not an array of numbers ({got}): {e}"));
        }
        PyTypeError::new_err(format!("{what}: expected an array of numbers, got {got}"))
    };
    if let Some(which) = not_a_number(obj) {
        return Err(PyTypeError::new_err(format!(
            "{what}: expected numbers, got {which}"
        )));
    }
    refuse_masked(obj, what)?;
    let a = py
        .import("numpy")?
        .call_method1("asarray", (obj,))
        .map_err(not_numbers)?;
    let dtype = a.getattr("dtype")?;
    let kind: String = dtype.getattr("kind")?.extract()?;
    match kind.as_str() {
        "f" | "i" | "u" => {}
        // numpy casts complex to float64 dropping the imaginary part, with only a warning.
        "c" => {
            return Err(model_error(
                py,
                format!("{what} must be real numbers, got complex dtype {dtype}"),
            ))
        }
        "O" => {
            for item in a.call_method0("ravel")?.try_iter()? {
                if let Some(which) = not_a_number(&item?) {
                    return Err(PyTypeError::new_err(format!(
                        "{what}: expected numbers, got {which} in an object array"
                    )));
                }
            }
        }
        _ => {
            return Err(PyTypeError::new_err(format!(
                "{what}: expected numbers, got an array of dtype {dtype}"
            )))
        }
    }
    a.extract().map_err(not_numbers)
}

/// What a value that numpy would read as a number is instead: None, a string, a bool.
fn not_a_number(obj: &Bound<'_, PyAny>) -> Option<&'static str> {
    if obj.is_none() {
        Some("None")
    } else if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
        Some("a string")
    } else if obj.is_instance_of::<PyBool>() {
        Some("a bool")
    } else {
        None
    }
}

/// A numpy masked array with masked entries is a ModelError naming `what` and the first
/// masked index: numpy.asarray reads the values under the mask as if they were given.
fn refuse_masked(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<()> {
    match masked_entries(obj)? {
        None => Ok(()),
        Some(m) => Err(model_error(obj.py(), format!("{what}: {m}"))),
    }
}

/// What is masked in a numpy masked array, with the advice; None for anything else.
fn masked_entries(obj: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    let np = obj.py().import("numpy")?;
    let ma = np.getattr("ma")?;
    if !ma.call_method1("isMaskedArray", (obj,))?.is_truthy()? {
        return Ok(None);
    }
    let mask = ma.call_method1("getmaskarray", (obj,))?;
    let count: usize = mask.call_method0("sum")?.extract()?;
    if count == 0 {
        return Ok(None);
    }
    let first: Vec<usize> = np
        .call_method1("argwhere", (&mask,))?
        .get_item(0)?
        .call_method0("tolist")?
        .extract()?;
    let at: Vec<String> = first.iter().map(|i| i.to_string()).collect();
    Ok(Some(format!(
        "a masked array with {count} masked entries (the first at [{}]): its values would \
         be read as given; fill them (numpy.ma.filled) or leave them out",
        at.join(", ")
    )))
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an object".into())
}

/// An (n, 3) array of vectors.
pub fn vectors(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<DVec3>> {
    let py = obj.py();
    let a = floats(obj, what)?;
    let shape = a.shape().to_vec();
    if shape.len() != 2 || shape[1] != 3 {
        return Err(model_error(
            py,
            format!("{what} must have shape (n, 3), got {}", shape_text(&shape)),
        ));
    }
    // A broadcast view of any size costs no memory; its copy would abort the process.
    if shape[0] > System::MAX_PARTICLES {
        return Err(model_error(
            py,
            format!(
                "{what} has {} rows: more than the limit of {} particles",
                shape[0],
                System::MAX_PARTICLES
            ),
        ));
    }
    let mut out = reserve(shape[0], what)?;
    // Only a C-ordered buffer is rows of 3 in memory order (numpy's as_slice also takes
    // Fortran order, whose memory runs down the columns).
    let view = a.as_array();
    match view.as_slice() {
        Some(s) => out.extend(s.chunks_exact(3).map(|c| DVec3::new(c[0], c[1], c[2]))),
        None => out.extend(
            view.rows()
                .into_iter()
                .map(|r| DVec3::new(r[0], r[1], r[2])),
        ),
    }
    Ok(out)
}

/// An empty vector with room for `n` items, or a MemoryError naming `what` (an
/// allocation that fails aborts the process instead of raising).
fn reserve<T>(n: usize, what: &str) -> PyResult<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| PyMemoryError::new_err(format!("{what}: {n} rows do not fit in memory")))?;
    Ok(v)
}

/// A 1-D array of `len` numbers, or one number for all of them (`len` given).
pub fn scalars(obj: &Bound<'_, PyAny>, what: &str, len: Option<usize>) -> PyResult<Vec<f64>> {
    let py = obj.py();
    // A bool is an int to Python: `floats` refuses it. Only a number is extracted here:
    // numpy.ma.masked would convert, warning, to NaN.
    let number = obj.is_instance_of::<PyFloat>() || obj.is_instance_of::<PyInt>();
    if let (Some(n), true) = (len, number && !obj.is_instance_of::<PyBool>()) {
        if let Ok(v) = obj.extract::<f64>() {
            return Ok(vec![v; n]);
        }
    }
    let a = floats(obj, what)?;
    let shape = a.shape().to_vec();
    match (shape.as_slice(), len) {
        ([], Some(n)) => Ok(vec![a.as_array().iter().copied().next().unwrap_or(0.0); n]),
        ([m], Some(n)) if *m != n => Err(model_error(
            py,
            format!("{what} has {m} entries, expected {n}"),
        )),
        ([_], _) => Ok(a.as_array().iter().copied().collect()),
        _ => Err(model_error(
            py,
            format!(
                "{what} must be a 1-D array{}, got shape {}",
                if len.is_some() { " or one number" } else { "" },
                shape_text(&shape)
            ),
        )),
    }
}

/// `numpy.asarray(obj)` with its dtype's kind (`"b"`, `"i"`, `"u"`, `"f"`, ...); ragged
/// rows are a ModelError naming `what`.
fn as_array<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<(Bound<'py, PyAny>, String)> {
    let py = obj.py();
    refuse_masked(obj, what)?;
    let np = py.import("numpy")?;
    let a = np.call_method1("asarray", (obj,)).map_err(|e| {
        if e.is_instance_of::<PyValueError>(py) {
            model_error(
                py,
                format!("{what}: not an array ({}): {e}", type_name(obj)),
            )
        } else {
            e
        }
    })?;
    let kind: String = a.getattr("dtype")?.getattr("kind")?.extract()?;
    Ok((a, kind))
}

/// An integer array of shape (m, `width`): index rows (springs, faces). Each entry must
/// lie in 0..n; an error names the row.
pub fn index_rows(
    obj: &Bound<'_, PyAny>,
    what: &str,
    width: usize,
    n: usize,
) -> PyResult<Vec<Vec<u32>>> {
    let py = obj.py();
    let (a, kind) = as_array(obj, what)?;
    let size: usize = a.getattr("size")?.extract()?;
    if size == 0 {
        return Ok(Vec::new());
    }
    if kind != "i" && kind != "u" {
        return Err(model_error(
            py,
            format!("{what} must hold integer particle indices, got dtype kind '{kind}'"),
        ));
    }
    let shape: Vec<usize> = a.getattr("shape")?.extract()?;
    if shape.len() != 2 || shape[1] != width {
        return Err(model_error(
            py,
            format!(
                "{what} must have shape (m, {width}), got {}",
                shape_text(&shape)
            ),
        ));
    }
    if kind == "u" {
        // Past i64::MAX an index would wrap negative in the int64 copy: named as given.
        let max: u64 = a.call_method0("max")?.extract()?;
        if max >= n as u64 {
            let k = a.call_method0("argmax")?.extract::<usize>()? / width;
            return Err(model_error(
                py,
                format!("{what} {k}: index {max} is out of range (the system has {n} particles)"),
            ));
        }
    }
    let a = a.call_method1("astype", ("int64",))?;
    let a: PyArrayLikeDyn<'_, i64, AllowTypeChange> = a.extract()?;
    let view = a.as_array();
    let mut rows = Vec::with_capacity(shape[0]);
    for (k, row) in view.rows().into_iter().enumerate() {
        let mut out = Vec::with_capacity(width);
        for &i in row {
            if i < 0 || i as u64 >= n as u64 {
                return Err(model_error(
                    py,
                    format!("{what} {k}: index {i} is out of range (the system has {n} particles)"),
                ));
            }
            out.push(i as u32);
        }
        rows.push(out);
    }
    Ok(rows)
}

/// A boolean mask of length n, or a list of particle indices.
pub fn mask(obj: &Bound<'_, PyAny>, what: &str, n: usize) -> PyResult<Vec<bool>> {
    let py = obj.py();
    let (a, kind) = as_array(obj, what)?;
    let shape: Vec<usize> = a.getattr("shape")?.extract()?;
    if shape.len() != 1 {
        return Err(model_error(
            py,
            format!(
                "{what} must be a 1-D mask or list of indices, got shape {}",
                shape_text(&shape)
            ),
        ));
    }
    if kind == "b" {
        // Checked before the copy: a broadcast view may be of any length.
        if shape[0] != n {
            return Err(model_error(
                py,
                format!(
                    "{what} has {} entries, expected {n} (one per particle)",
                    shape[0]
                ),
            ));
        }
        return a.call_method0("tolist")?.extract();
    }
    let mut m = vec![false; n];
    if shape[0] == 0 {
        return Ok(m);
    }
    if kind != "i" && kind != "u" {
        return Err(model_error(
            py,
            format!("{what} must be booleans or integer indices, got dtype kind '{kind}'"),
        ));
    }
    if kind == "u" {
        // Past i64::MAX an index is no i64: named as given (not pyo3's OverflowError).
        let max: u64 = a.call_method0("max")?.extract()?;
        if max >= n as u64 {
            let k: usize = a.call_method0("argmax")?.extract()?;
            return Err(model_error(
                py,
                format!("{what}[{k}]: index {max} is out of range (the system has {n} particles)"),
            ));
        }
    }
    let idx: Vec<i64> = a.call_method0("tolist")?.extract()?;
    for (k, &i) in idx.iter().enumerate() {
        if i < 0 || i as u64 >= n as u64 {
            return Err(model_error(
                py,
                format!("{what}[{k}]: index {i} is out of range (the system has {n} particles)"),
            ));
        }
        m[i as usize] = true;
    }
    Ok(m)
}

/// A flat buffer as an (n, 3) array, without a copy.
pub fn rows3<'py, T: numpy::Element>(py: Python<'py>, flat: Vec<T>) -> PyResult<Bound<'py, PyAny>> {
    let n = flat.len() / 3;
    Ok(PyArray1::from_vec(py, flat).reshape([n, 3])?.into_any())
}

/// Vectors as an (n, 3) float64 array.
pub fn vec3_array<'py>(py: Python<'py>, v: &[DVec3]) -> PyResult<Bound<'py, PyAny>> {
    let mut flat = Vec::with_capacity(3 * v.len());
    for p in v {
        flat.extend_from_slice(&[p.x, p.y, p.z]);
    }
    rows3(py, flat)
}

/// f32 vectors as an (n, 3) float32 array (no copy) or float64 array.
pub fn f32_rows<'py>(
    py: Python<'py>,
    v: Vec<[f32; 3]>,
    f64_out: bool,
) -> PyResult<Bound<'py, PyAny>> {
    if f64_out {
        let mut flat = Vec::with_capacity(3 * v.len());
        for p in &v {
            flat.extend_from_slice(&[f64::from(p[0]), f64::from(p[1]), f64::from(p[2])]);
        }
        rows3(py, flat)
    } else {
        rows3(py, flatten(v))
    }
}

/// f64 vectors as f32, for a read with dtype float32: a finite value beyond float32's
/// range is a ValueError naming the particle (the cast would make it inf silently).
pub fn f32_checked(v: &[DVec3], what: &str) -> PyResult<Vec<[f32; 3]>> {
    let mut out = Vec::with_capacity(v.len());
    for (i, p) in v.iter().enumerate() {
        let r = [p.x as f32, p.y as f32, p.z as f32];
        if let Some(a) = (0..3).find(|&a| r[a].is_infinite() && p[a].is_finite()) {
            return Err(PyValueError::new_err(format!(
                "{what} of particle {i} ({}) = {:e} does not fit float32 (|value| <= {:e}): \
                 read it as float64",
                ["x", "y", "z"][a],
                p[a],
                f32::MAX
            )));
        }
        out.push(r);
    }
    Ok(out)
}

/// The components of `v` in order, in the same allocation.
fn flatten(v: Vec<[f32; 3]>) -> Vec<f32> {
    let mut v = std::mem::ManuallyDrop::new(v);
    let (ptr, len, cap) = (v.as_mut_ptr(), v.len(), v.capacity());
    // SAFETY: [f32; 3] is three f32 with f32's alignment and no padding, so the
    // allocation of `cap` arrays is one of `3 cap` f32 with the same layout.
    unsafe { Vec::from_raw_parts(ptr.cast::<f32>(), 3 * len, 3 * cap) }
}

/// `dtype` as "float32" or "float64" (None: float64).
pub fn float_dtype(py: Python<'_>, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
    let Some(d) = dtype else { return Ok(true) };
    let name: String = py
        .import("numpy")?
        .call_method1("dtype", (d,))?
        .getattr("name")?
        .extract()?;
    match name.as_str() {
        "float64" => Ok(true),
        "float32" => Ok(false),
        other => Err(PyValueError::new_err(format!(
            "dtype must be float32 or float64, got {other}"
        ))),
    }
}

/// A Python value as TOML: bool, int, float, str, sequences and mappings of them.
pub fn toml_value(obj: &Bound<'_, PyAny>, key: &str) -> PyResult<toml::Value> {
    nested_toml(obj, key, 0)
}

/// Deeper nesting than any setting has: a list or dict that holds itself recursed until
/// the stack overflowed (a segfault).
const MAX_DEPTH: usize = 64;

fn nested_toml(obj: &Bound<'_, PyAny>, key: &str, depth: usize) -> PyResult<toml::Value> {
    if depth > MAX_DEPTH {
        return Err(PyValueError::new_err(format!(
            "{key}: nested more than {MAX_DEPTH} levels deep (a list or dict that holds itself?)"
        )));
    }
    if obj.is_instance_of::<PyBool>() {
        return Ok(toml::Value::Boolean(obj.extract()?));
    }
    if obj.is_instance_of::<PyString>() {
        return Ok(toml::Value::String(obj.extract()?));
    }
    if obj.is_instance_of::<PyBytes>() {
        // Iterated, bytes would be numbers: b"abc" was [97, 98, 99].
        return Err(PyTypeError::new_err(format!(
            "{key}: bytes have no scene-file (TOML) form (give a str)"
        )));
    }
    if obj.is_instance_of::<PyInt>() {
        // TOML integers are i64: a larger one is named with its key (not pyo3's message).
        return obj.extract().map(toml::Value::Integer).map_err(|_| {
            PyOverflowError::new_err(format!(
                "{key} = {obj} is too large (a setting's integers are 64-bit)"
            ))
        });
    }
    if obj.is_instance_of::<PyFloat>() {
        return Ok(toml::Value::Float(obj.extract()?));
    }
    if let Ok(m) = obj.cast::<PyMapping>() {
        let mut t = toml::Table::new();
        for item in m.items()?.iter() {
            let (k, v): (String, Bound<'_, PyAny>) = item.extract()?;
            let sub = format!("{key}.{k}");
            t.insert(k, nested_toml(&v, &sub, depth + 1)?);
        }
        return Ok(toml::Value::Table(t));
    }
    // numpy scalars and arrays, tuples, lists.
    if let Some(m) = masked_entries(obj)? {
        // Their tolist() gives None for each masked entry ("a NoneType has no form").
        return Err(PyValueError::new_err(format!("{key}: {m}")));
    }
    if obj.hasattr("tolist")? {
        let plain = obj.call_method0("tolist")?;
        // A longdouble's tolist is another longdouble: recursing on it overflowed the
        // stack (a segfault).
        if !plain.get_type().is(obj.get_type()) {
            return nested_toml(&plain, key, depth + 1);
        }
    }
    if let Ok(items) = obj.try_iter() {
        let values = items
            .map(|item| nested_toml(&item?, key, depth + 1))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(toml::Value::Array(values));
    }
    // A clongdouble converts to a float dropping its imaginary part, with only a warning.
    let complex = obj
        .getattr("dtype")
        .and_then(|d| d.getattr("kind"))
        .and_then(|k| k.extract::<String>())
        .is_ok_and(|k| k == "c");
    if let (false, Ok(v)) = (complex, obj.extract::<f64>()) {
        return Ok(toml::Value::Float(v));
    }
    Err(PyTypeError::new_err(format!(
        "{key}: a {} has no scene-file (TOML) form",
        type_name(obj)
    )))
}

/// An item of a mapping whose keys are dotted scene keys (`set=`, `vary`): a key that
/// is not a string is a TypeError naming `what`.
pub fn key_and_value<'py>(
    item: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<(String, Bound<'py, PyAny>)> {
    let (k, v): (Bound<'py, PyAny>, Bound<'py, PyAny>) = item.extract()?;
    match k.extract::<String>() {
        Ok(k) => Ok((k, v)),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{what} keys must be strings (dotted scene keys), got {} {k}",
            type_name(&k)
        ))),
    }
}

/// `set=`: a mapping of dotted keys to values, or a sequence of "key=value" strings (as
/// `--set` takes them).
pub fn overrides(set: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    let Some(set) = set else {
        return Ok(Vec::new());
    };
    if set.is_none() {
        return Ok(Vec::new());
    }
    if let Ok(m) = set.cast::<PyMapping>() {
        let mut out = Vec::new();
        for item in m.items()?.iter() {
            let (k, v) = key_and_value(&item, "set=")?;
            out.push(format!("{k}={}", toml_value(&v, &k)?));
        }
        return Ok(out);
    }
    if set.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "set= takes a dict {key: value} or a list of \"key=value\" strings, not one string",
        ));
    }
    set.extract::<Vec<String>>().map_err(|_| {
        PyTypeError::new_err("set= takes a dict {key: value} or a list of \"key=value\" strings")
    })
}

/// A JSON value as Python objects (dicts, lists, numbers, strings, None).
pub fn json<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(a) => {
            let items = a
                .iter()
                .map(|x| json(py, x))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any()
        }
        Value::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, json(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// A serializable value (a summary, an adapter) as Python objects.
pub fn to_py<'py, T: serde::Serialize>(py: Python<'py>, v: &T) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::to_value(v).map_err(|e| PyValueError::new_err(e.to_string()))?;
    json(py, &value)
}
