//! `msc.run`, `msc.sweep` and `msc.fit`: the commands themselves, given the arguments the
//! command line would get (so every default, check and output is the command's), run on
//! a worker thread that Ctrl-C stops as it stops the command. They return the run's
//! summary, the rows of `runs.csv` and `fit.json` as Python objects.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use clap::Parser;
use msc::batch::BatchError;
use msc::cli::{Cli, CliError, Command};
use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyIterator, PyList, PyMapping, PyString};

use crate::convert::{json, key_and_value, overrides, to_py, toml_value};
use crate::errors::{fit_error, with_attrs, Classify};
use crate::scene::path_or_name;
use crate::steps::{count, interruptible, Int};

/// `--name=value`: with the `=`, a value that starts with `-` (a negative number, a
/// path such as `-run`) stays a value instead of being read as an option.
fn opt(name: &str, value: impl std::fmt::Display) -> String {
    format!("--{name}={value}")
}

/// Parses the command line of `subcommand` with `args` (options only) and the scene
/// last, after `--`, so that a scene path that starts with `-` is not an option.
fn command(subcommand: &str, args: Vec<String>, scene: String) -> PyResult<Command> {
    let argv = ["msc".to_string(), subcommand.to_string()]
        .into_iter()
        .chain(args)
        .chain(["--".to_string(), scene]);
    Cli::try_parse_from(argv)
        .map(|c| c.command)
        .map_err(|e| PyValueError::new_err(e.to_string().trim().to_string()))
}

/// `--set` for each override, `--backend`, `--steps`.
fn common(
    set: Option<&Bound<'_, PyAny>>,
    backend: &str,
    steps: Option<Int>,
) -> PyResult<Vec<String>> {
    crate::simulator::backend_arg(backend)?;
    let steps = steps.map(|n| count::<u64>(n, "steps")).transpose()?;
    let mut a = vec![opt("backend", backend), "--quiet".into()];
    for s in overrides(set)? {
        a.push(opt("set", s));
    }
    if let Some(n) = steps {
        a.push(opt("steps", n));
    }
    Ok(a)
}

/// The values of a list argument; one string is refused (iterated, it would give one
/// value per character).
fn list_values<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Bound<'py, PyIterator>> {
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} takes a list of values, not one string"
        )));
    }
    obj.try_iter().map_err(|_| {
        let got = obj.get_type().name().map(|n| n.to_string());
        PyTypeError::new_err(format!(
            "{what} takes a list of values, got {}",
            got.unwrap_or_default()
        ))
    })
}

fn read_json<'py>(py: Python<'py>, path: &Path) -> PyResult<Bound<'py, PyAny>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| PyOSError::new_err(format!("cannot read {}: {e}", path.display())))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| PyValueError::new_err(format!("{}: {e}", path.display())))?;
    json(py, &value)
}

/// Runs a scene into its folder (`msc run`): energy.csv, frames, summary.json; returns
/// the summary. A diverged run raises DivergenceError (its outputs written, `out` on the
/// exception); Ctrl-C stops after the current step, writes everything and raises
/// KeyboardInterrupt.
#[pyfunction]
#[pyo3(signature = (scene, *, out=None, set=None, steps=None, backend="auto"))]
pub fn run<'py>(
    py: Python<'py>,
    scene: &Bound<'py, PyAny>,
    out: Option<&Bound<'py, PyAny>>,
    set: Option<&Bound<'py, PyAny>>,
    steps: Option<Int>,
    backend: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let mut args = common(set, backend, steps)?;
    if let Some(o) = out {
        args.push(opt("out", path_or_name(o, "out")?));
    }
    let Command::Run(run_args) = command("run", args, path_or_name(scene, "scene")?)? else {
        unreachable!("parsed as run")
    };
    let outcome = interruptible(py, || msc::cli::run::execute(&run_args))?;
    match outcome {
        Ok(o) => to_py(py, &o.summary),
        Err(e) => Err(e.raise(py)),
    }
}

/// The string values given for each varied key: their cells stay text ("007", "true").
type Texts = HashMap<String, HashSet<String>>;

/// The rows of a `runs.csv`: one dict per run, numbers as numbers, empty fields as None.
fn rows<'py>(py: Python<'py>, csv: &Path, texts: &Texts) -> PyResult<Bound<'py, PyList>> {
    let text = std::fs::read_to_string(csv)
        .map_err(|e| PyOSError::new_err(format!("cannot read {}: {e}", csv.display())))?;
    let mut lines = text.lines();
    let header = msc::batch::record::parse_csv_line(lines.next().unwrap_or_default());
    let list = PyList::empty(py);
    for line in lines.filter(|l| !l.is_empty()) {
        let d = PyDict::new(py);
        for (k, v) in header.iter().zip(msc::batch::record::parse_csv_line(line)) {
            let text = texts.get(k).is_some_and(|t| t.contains(&v));
            d.set_item(k, field(py, k, &v, text)?)?;
        }
        list.append(d)?;
    }
    Ok(list)
}

/// A field of runs.csv: text columns and `text` fields stay text; others become int,
/// float, bool or None.
fn field<'py>(py: Python<'py>, column: &str, v: &str, text: bool) -> PyResult<Bound<'py, PyAny>> {
    if text || matches!(column, "run" | "status" | "backend" | "reason") {
        return Ok(v.into_pyobject(py)?.into_any());
    }
    Ok(if v.is_empty() {
        py.None().into_bound(py)
    } else if let Ok(i) = v.parse::<i64>() {
        i.into_pyobject(py)?.into_any()
    } else if let Ok(f) = v.parse::<f64>() {
        f.into_pyobject(py)?.into_any()
    } else if v == "true" || v == "false" {
        pyo3::types::PyBool::new(py, v == "true")
            .to_owned()
            .into_any()
    } else {
        v.into_pyobject(py)?.into_any()
    })
}

/// Runs `scene` once per combination of `vary`'s values (`msc sweep`), one folder each
/// under `out`, and returns the rows of runs.csv. A rerun with the same arguments skips
/// the complete runs. With `check`, runs that failed or diverged raise (DivergenceError
/// when every one diverged, else MscError) with the rows as `rows`; without, their
/// status column says so.
#[pyfunction]
#[pyo3(signature = (scene, vary, *, out, set=None, steps=None, backend="auto", batch=true, check=true))]
#[allow(clippy::too_many_arguments)]
pub fn sweep<'py>(
    py: Python<'py>,
    scene: &Bound<'py, PyAny>,
    vary: &Bound<'py, PyMapping>,
    out: &Bound<'py, PyAny>,
    set: Option<&Bound<'py, PyAny>>,
    steps: Option<Int>,
    backend: &str,
    batch: bool,
    check: bool,
) -> PyResult<Bound<'py, PyList>> {
    let out = PathBuf::from(path_or_name(out, "out")?);
    let mut args = common(set, backend, steps)?;
    args.push(opt("out", out.to_string_lossy()));
    // The parser would name `--vary`, which the caller never wrote.
    if vary.len()? == 0 {
        return Err(PyValueError::new_err(
            "vary is empty: give at least one key and its values, e.g. \
             {\"material.stiffness\": [10, 20]}",
        ));
    }
    let mut texts = Texts::new();
    for item in vary.items()?.iter() {
        let (key, values) = key_and_value(&item, "vary")?;
        let values = list_values(&values, &format!("vary[{key:?}]"))?
            .map(|v| {
                let value = toml_value(&v?, &key)?;
                if let toml::Value::String(s) = &value {
                    texts.entry(key.clone()).or_default().insert(s.clone());
                }
                Ok(value.to_string())
            })
            .collect::<PyResult<Vec<_>>>()?;
        if values.is_empty() {
            return Err(PyValueError::new_err(format!(
                "vary[{key:?}] is empty: give it at least one value"
            )));
        }
        args.push(opt("vary", format!("{key}={}", values.join(","))));
    }
    if !batch {
        args.push("--no-batch".into());
    }
    let Command::Sweep(sweep_args) = command("sweep", args, path_or_name(scene, "scene")?)? else {
        unreachable!("parsed as sweep")
    };
    let outcome = interruptible(py, || msc::cli::sweep::execute(&sweep_args))?;
    let csv = out.join(msc::batch::RUNS_CSV);
    match outcome {
        Ok(_) => rows(py, &csv, &texts),
        Err(CliError::Batch(BatchError::RunsFailed { .. })) if !check => rows(py, &csv, &texts),
        Err(e @ CliError::Batch(BatchError::RunsFailed { .. })) => {
            let table = rows(py, &csv, &texts)?;
            Err(with_attrs(py, e.raise(py), [("rows", table.into_any())]))
        }
        Err(e) => Err(e.raise(py)),
    }
}

/// Estimates parameters (`msc fit`) so that `scene` matches the frames of `target` (a
/// run folder or one PLY file); returns fit.json (history, result, stop reason). Raises
/// FitError when it cannot run or stops without converging (`out` and `result` on the
/// exception).
#[pyfunction]
#[pyo3(signature = (scene, target, params, *, init=None, set=None, frames="all", starts=Int(1), max_iters=Int(50), optimizer="auto", learning_rate=None, window=None, exact_solves=false, backend="auto", out=None))]
#[allow(clippy::too_many_arguments)]
pub fn fit<'py>(
    py: Python<'py>,
    scene: &Bound<'py, PyAny>,
    target: &Bound<'py, PyAny>,
    params: &Bound<'py, PyAny>,
    init: Option<&Bound<'py, PyAny>>,
    set: Option<&Bound<'py, PyAny>>,
    frames: &str,
    starts: Int,
    max_iters: Int,
    optimizer: &str,
    learning_rate: Option<f64>,
    window: Option<Int>,
    exact_solves: bool,
    backend: &str,
    out: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut args = vec![opt("target", path_or_name(target, "target")?)];
    args.extend(common(set, backend, None)?);
    let params: Vec<String> = match params.extract::<String>() {
        Ok(one) => vec![one],
        Err(_) => params.extract().map_err(|_| {
            let got = params.get_type().name().map(|n| n.to_string());
            PyTypeError::new_err(format!(
                "params takes a parameter name or a list of names, got {}",
                got.unwrap_or_default()
            ))
        })?,
    };
    if params.is_empty() {
        // The parser would name `--param`, which the caller never wrote.
        return Err(PyValueError::new_err(
            "params is empty: name at least one parameter to fit, e.g. \"charge\"",
        ));
    }
    if let Some(i) = params.iter().position(|p| p.trim().is_empty()) {
        return Err(PyValueError::new_err(format!(
            "params[{i}] is an empty name: name a parameter to fit, e.g. \"charge\""
        )));
    }
    for p in params {
        args.push(opt("param", p));
    }
    if let Some(init) = init {
        for v in list_values(init, "init")? {
            let v = v?;
            let text = match toml_value(&v, "init")? {
                toml::Value::Array(a) => a
                    .iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
                x => x.to_string(),
            };
            args.push(opt("init", text));
        }
    }
    args.push(opt("frames", frames));
    args.push(opt("starts", count::<u32>(starts, "starts")?));
    args.push(opt("max-iters", count::<u32>(max_iters, "max_iters")?));
    args.push(opt("optimizer", optimizer));
    if let Some(r) = learning_rate {
        args.push(opt("learning-rate", r));
    }
    if let Some(w) = window {
        args.push(opt("window", count::<u64>(w, "window")?));
    }
    if exact_solves {
        args.push("--exact-solves".into());
    }
    if let Some(o) = out {
        args.push(opt("out", path_or_name(o, "out")?));
    }
    let Command::Fit(fit_args) = command("fit", args, path_or_name(scene, "scene")?)? else {
        unreachable!("parsed as fit")
    };
    let outcome = interruptible(py, || msc::cli::fit::execute(&fit_args))?;
    match outcome {
        Ok(r) => read_json(py, &r.out),
        Err(CliError::FitStalled { loss, out }) => {
            let result = read_json(py, &out)?;
            let e = fit_error(py, CliError::FitStalled { loss, out });
            Err(with_attrs(py, e, [("result", result)]))
        }
        Err(CliError::FitNoGradient { source, out }) => {
            let result = read_json(py, &out)?;
            let e = fit_error(py, CliError::FitNoGradient { source, out });
            Err(with_attrs(py, e, [("result", result)]))
        }
        Err(e) => Err(fit_error(py, e)),
    }
}
