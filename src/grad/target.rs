//! Target frames for fitting: PLY files (read by [`crate::output::ply_read`]: ASCII or
//! binary, as `msc run` writes them in `frames/frame_NNNNNN.ply`) and run folders, mapped
//! onto the steps of the simulation being fitted by their time.

use super::loss::Target;
use crate::output::ply_read::{self, PlyReadError};
use glam::DVec3;
use std::path::{Path, PathBuf};

/// Problems with a target. Each names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a readable PLY file: {message}", path.display())]
    Ply { path: PathBuf, message: String },
    #[error("{}: no frames/frame_NNNNNN.ply files in this run folder", path.display())]
    NoFrames { path: PathBuf },
    #[error(
        "{}: target time {time} s is not a whole number of the fit's time steps dt = {dt} s",
        path.display()
    )]
    Time { path: PathBuf, time: f64, dt: f64 },
    /// A target frame whose particle count is not the scene's.
    #[error("{}: {got} particles, the scene has {expected}", path.display())]
    ParticleCount {
        path: PathBuf,
        got: usize,
        expected: usize,
    },
    /// A target time too many steps away: past [`MAX_HORIZON_STEPS`].
    #[error(
        "{}: target time {time} s is {steps:e} steps of dt = {dt} s, over the limit of \
         {limit} steps (2^53, where f64 stops counting steps exactly)",
        path.display()
    )]
    Horizon {
        path: PathBuf,
        time: f64,
        dt: f64,
        steps: f64,
        limit: u64,
    },
    #[error("{}: the frames are not in increasing time ({earlier} s, then {later} s)", path.display())]
    Order {
        path: PathBuf,
        earlier: f64,
        later: f64,
    },
    /// Two frames whose times round to the same step of the fit (a time within 1e-6 of
    /// a step of another).
    #[error(
        "{}: target time {later} s falls on step {step} of dt = {dt} s, as the previous \
         frame's time {earlier} s does",
        path.display()
    )]
    SameStep {
        path: PathBuf,
        earlier: f64,
        later: f64,
        step: u64,
        dt: f64,
    },
    /// The target's frame at t = 0 is not the scene's initial state: it comes from
    /// another geometry, which no fitted parameter can turn into this one.
    #[error(
        "{}: the target's frame at t = 0 is {} m (RMS) from the scene's initial positions, \
         {} of the scene's size {} m, above the tolerance {}: the target comes from \
         another geometry or initial state, so a fit would converge to nonsense. Fit \
         against frames of this scene, or raise --initial-tolerance",
        path.display(),
        crate::display::num(*rms),
        crate::display::num(*relative),
        crate::display::num(*size),
        crate::display::num(*tolerance)
    )]
    InitialState {
        path: PathBuf,
        rms: f64,
        relative: f64,
        size: f64,
        tolerance: f64,
    },
}

/// The default tolerance of [`check_initial`] (`msc fit --initial-tolerance`): a thousandth
/// of the scene's size, far above the f32 rounding of frames written by `msc run` (about
/// 1e-7) and far below any change of geometry.
pub const DEFAULT_INITIAL_TOLERANCE: f64 = 1e-3;

/// Checks the target's frame at t = 0 (from its header; a target without one is not
/// checked) against the scene's initial positions `initial`: the RMS distance over the
/// scene's size (its bounding box's diagonal) must be at most `tolerance`. A frame with
/// another particle count is left to the loss's own check.
pub fn check_initial(
    frames: &[TargetFrame],
    initial: &[DVec3],
    tolerance: f64,
) -> Result<(), TargetError> {
    let Some(first) = frames.iter().find(|f| f.time == Some(0.0)) else {
        return Ok(());
    };
    if first.positions.len() != initial.len() || initial.is_empty() {
        return Ok(());
    }
    let (lo, hi) = initial.iter().fold(
        (DVec3::splat(f64::INFINITY), DVec3::splat(f64::NEG_INFINITY)),
        |(lo, hi), p| (lo.min(*p), hi.max(*p)),
    );
    // A single point (or a set at one place) has no size: judge in metres then.
    let size = (hi - lo).length();
    let sum: f64 = (first.positions.iter().zip(initial))
        .map(|(a, b)| (*a - *b).length_squared())
        .sum();
    let rms = (sum / initial.len() as f64).sqrt();
    let relative = rms / size.max(f64::MIN_POSITIVE);
    if relative > tolerance || !rms.is_finite() {
        return Err(TargetError::InitialState {
            path: first.path.clone(),
            rms,
            relative,
            size,
            tolerance,
        });
    }
    Ok(())
}

/// Every frame must hold the scene's `expected` particles; the first that does not is named
/// by its file (an index into the frames after t = 0 would not say which).
pub fn check_counts(frames: &[TargetFrame], expected: usize) -> Result<(), TargetError> {
    match frames.iter().find(|f| f.positions.len() != expected) {
        Some(f) => Err(TargetError::ParticleCount {
            path: f.path.clone(),
            got: f.positions.len(),
            expected,
        }),
        None => Ok(()),
    }
}

/// One target frame as read: positions, and the step and time its `msc` header comment
/// gives (absent for PLY files from elsewhere).
#[derive(Clone, Debug, PartialEq)]
pub struct TargetFrame {
    pub path: PathBuf,
    pub step: Option<u64>,
    pub time: Option<f64>,
    pub positions: Vec<DVec3>,
}

/// Reads a PLY file's vertex positions and its `msc` step/time comment.
pub fn read_ply(path: &Path) -> Result<TargetFrame, TargetError> {
    let frame = ply_read::read_ply(path).map_err(|e| match e {
        PlyReadError::Io { path, source } => TargetError::Io { path, source },
        PlyReadError::Malformed { path, message } => TargetError::Ply { path, message },
    })?;
    Ok(TargetFrame {
        path: path.to_path_buf(),
        step: frame.step,
        time: frame.time,
        positions: frame.positions,
    })
}

/// Reads a target: a PLY file, or a run folder's `frames/frame_NNNNNN.ply` in name order.
pub fn read_target(path: &Path) -> Result<Vec<TargetFrame>, TargetError> {
    if !path.is_dir() {
        return Ok(vec![read_ply(path)?]);
    }
    let frames_dir = path.join("frames");
    let io = |source| TargetError::Io {
        path: frames_dir.clone(),
        source,
    };
    let entries = match std::fs::read_dir(&frames_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(TargetError::NoFrames {
                path: path.to_path_buf(),
            })
        }
        Err(e) => return Err(io(e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_frame = name
            .strip_prefix("frame_")
            .and_then(|s| s.strip_suffix(".ply"))
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
        if is_frame {
            names.push(name);
        }
    }
    if names.is_empty() {
        return Err(TargetError::NoFrames {
            path: path.to_path_buf(),
        });
    }
    // Same-width zero-padded numbers sort as numbers; sort by length first for wider ones.
    names.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    names
        .iter()
        .map(|n| read_ply(&frames_dir.join(n)))
        .collect()
}

/// The most steps a target frame may be from t = 0: 2^53, up to which f64 counts whole
/// steps exactly.
pub const MAX_HORIZON_STEPS: u64 = 1 << 53;

/// Maps target frames onto the steps of a simulation with time step `dt`: each frame's time
/// (from its header; `default_time` for a frame without one) must be a whole number of
/// steps (to 1e-6 of a step), at most [`MAX_HORIZON_STEPS`]. Frames at t = 0 are dropped:
/// no parameter moves the initial state, so they add a constant to the loss.
pub fn to_targets(
    frames: &[TargetFrame],
    dt: f64,
    default_time: f64,
) -> Result<Vec<Target>, TargetError> {
    let mut out: Vec<Target> = Vec::new();
    let mut last_time = f64::NEG_INFINITY;
    let mut last_step: Option<u64> = None;
    for f in frames {
        let time = f.time.unwrap_or(default_time);
        let steps = time / dt;
        let step = steps.round();
        if step > MAX_HORIZON_STEPS as f64 {
            // `as u64` would saturate (1e30 s became u64::MAX steps).
            return Err(TargetError::Horizon {
                path: f.path.clone(),
                time,
                dt,
                steps,
                limit: MAX_HORIZON_STEPS,
            });
        }
        if !(step >= 0.0 && (steps - step).abs() <= 1e-6 * step.max(1.0)) {
            return Err(TargetError::Time {
                path: f.path.clone(),
                time,
                dt,
            });
        }
        if time <= last_time {
            return Err(TargetError::Order {
                path: f.path.clone(),
                earlier: last_time,
                later: time,
            });
        }
        // Both would enter the loss at one step, the earlier frame's positions then
        // compared with a later state (refused later as "frame steps must increase").
        if last_step == Some(step as u64) {
            return Err(TargetError::SameStep {
                path: f.path.clone(),
                earlier: last_time,
                later: time,
                step: step as u64,
                dt,
            });
        }
        (last_time, last_step) = (time, Some(step as u64));
        if step == 0.0 {
            continue;
        }
        out.push(Target {
            step: step as u64,
            positions: f.positions.clone(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_map_to_whole_steps_or_fail_naming_both() {
        let frame = |t: f64| TargetFrame {
            path: PathBuf::from("f.ply"),
            step: None,
            time: Some(t),
            positions: vec![DVec3::ZERO],
        };
        let frames = [frame(0.0), frame(0.18), frame(0.36)];
        let t = to_targets(&frames, 0.009, 0.0).unwrap();
        assert_eq!(t.iter().map(|t| t.step).collect::<Vec<_>>(), vec![20, 40]);
        let e = to_targets(&frames, 0.05, 0.0).unwrap_err().to_string();
        assert!(e.contains("0.18") && e.contains("0.05"), "{e}");
        let e = to_targets(&[frame(0.36), frame(0.18)], 0.009, 0.0).unwrap_err();
        assert!(matches!(e, TargetError::Order { .. }));
        // 1e30 s was u64::MAX steps (a saturating cast); past 2^53 steps is refused.
        for t in [1e30, 1e300] {
            let e = to_targets(&[frame(t)], 0.01, 0.0).unwrap_err();
            assert!(matches!(
                e,
                TargetError::Horizon {
                    limit: MAX_HORIZON_STEPS,
                    ..
                }
            ));
            assert!(
                e.to_string().contains(&MAX_HORIZON_STEPS.to_string()),
                "{e}"
            );
        }
        // Times 1e-9 s apart are one step of 0.01 s: both frames entered the loss at step
        // 10, the second then refused as "frame steps must increase", naming no file.
        let e = to_targets(&[frame(0.1), frame(0.1 + 1e-9)], 0.01, 0.0).unwrap_err();
        assert!(matches!(e, TargetError::SameStep { step: 10, .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with("f.ply: target time 0.100000001 s"),
            "{e}"
        );
        let t = to_targets(&[frame(MAX_HORIZON_STEPS as f64)], 1.0, 0.0).unwrap();
        assert_eq!(t[0].step, MAX_HORIZON_STEPS);
    }

    /// A 2 m grid's first frame against a 1 m grid of the same 16 particles (issue 22's
    /// case: the fit "converged" to a charge 400 times the true one).
    #[test]
    fn a_target_from_another_geometry_is_refused() {
        let grid = |size: f64| -> Vec<DVec3> {
            (0..16)
                .map(|k| DVec3::new((k % 4) as f64, (k / 4) as f64, 0.0) * (size / 3.0))
                .collect()
        };
        let frame = |positions: Vec<DVec3>, t: f64| TargetFrame {
            path: PathBuf::from("target/frames/frame_000000.ply"),
            step: Some(0),
            time: Some(t),
            positions,
        };
        let scene = grid(1.0);
        // The same geometry, stored as f32: accepted.
        let rounded: Vec<DVec3> = scene.iter().map(|p| p.as_vec3().as_dvec3()).collect();
        check_initial(&[frame(rounded, 0.0)], &scene, 1e-3).unwrap();
        let e = check_initial(&[frame(grid(2.0), 0.0)], &scene, 1e-3).unwrap_err();
        match &e {
            TargetError::InitialState { relative, .. } => assert!(*relative > 0.1, "{e}"),
            other => panic!("{other:?}"),
        }
        assert!(e.to_string().contains("--initial-tolerance"), "{e}");
        // A target without a frame at t = 0 cannot be checked.
        check_initial(&[frame(grid(2.0), 0.5)], &scene, 1e-3).unwrap();
        // A looser tolerance accepts it.
        check_initial(&[frame(grid(2.0), 0.0)], &scene, 1.0).unwrap();
    }
}
