//! The automatic camera: a fixed view direction, placed so a bounding box fills the image.

use glam::{Mat4, Vec3};

/// An axis-aligned bounding box.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    pub min: Vec3,
    pub max: Vec3,
}

impl Bounds {
    /// The box of the finite points, `None` when there are none.
    pub fn of_points<I: IntoIterator<Item = Vec3>>(points: I) -> Option<Self> {
        let mut b: Option<Bounds> = None;
        for p in points.into_iter().filter(|p| p.is_finite()) {
            b = Some(match b {
                None => Bounds { min: p, max: p },
                Some(b) => Bounds {
                    min: b.min.min(p),
                    max: b.max.max(p),
                },
            });
        }
        b
    }
    /// The smallest box holding both.
    pub fn union(self, other: Bounds) -> Bounds {
        Bounds {
            min: self.min.min(other.min),
            max: self.max.max(other.max),
        }
    }
    /// Grown by `d` on every side.
    pub fn padded(self, d: f32) -> Bounds {
        Bounds {
            min: self.min - Vec3::splat(d),
            max: self.max + Vec3::splat(d),
        }
    }
    /// True when `other` lies inside this box.
    pub fn contains(&self, other: &Bounds) -> bool {
        self.min.cmple(other.min).all() && other.max.cmple(self.max).all()
    }
    pub fn center(&self) -> Vec3 {
        0.5 * (self.min + self.max)
    }
    pub fn diagonal(&self) -> f32 {
        (self.max - self.min).length()
    }
    /// The 8 corners.
    pub fn corners(&self) -> [Vec3; 8] {
        let (a, b) = (self.min, self.max);
        std::array::from_fn(|k| {
            Vec3::new(
                if k & 1 == 0 { a.x } else { b.x },
                if k & 2 == 0 { a.y } else { b.y },
                if k & 4 == 0 { a.z } else { b.z },
            )
        })
    }
}

/// The direction the camera looks from. +y is up in `iso` and `front`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum View {
    /// A three-quarter view from +x, +y, +z
    #[default]
    Iso,
    /// Along -z (the x-y plane face on)
    Front,
    /// Down along -y (the x-z plane)
    Top,
}

impl View {
    /// (unit vector from the target towards the eye, up vector).
    pub fn axes(self) -> (Vec3, Vec3) {
        match self {
            View::Iso => (Vec3::new(1.0, 0.7, 1.3).normalize(), Vec3::Y),
            View::Front => (Vec3::Z, Vec3::Y),
            View::Top => (Vec3::Y, Vec3::NEG_Z),
        }
    }
}

/// A perspective camera.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Camera {
    pub eye: Vec3,
    pub target: Vec3,
    pub up: Vec3,
    /// Vertical field of view, radians.
    pub fovy: f32,
    /// Width / height.
    pub aspect: f32,
    pub near: f32,
    pub far: f32,
}

/// Vertical field of view of the automatic camera (35 degrees: little perspective distortion).
pub const FOVY: f32 = 35.0 * std::f32::consts::PI / 180.0;

impl Camera {
    /// Looks at `bounds` from `view`, at the distance where every corner of the box lies
    /// inside the image with `margin` (a fraction of the half-width and half-height) to spare.
    /// A box of zero size is treated as a 1 m cube.
    pub fn fit(bounds: Bounds, view: View, aspect: f32, margin: f32) -> Camera {
        let bounds = if bounds.diagonal() > 0.0 && bounds.diagonal().is_finite() {
            bounds
        } else {
            bounds.padded(0.5)
        };
        let (back, up0) = view.axes();
        let right = up0.cross(back).normalize();
        let up = back.cross(right);
        let target = bounds.center();
        let aspect = if aspect.is_finite() && aspect > 0.0 {
            aspect
        } else {
            1.0
        };
        let ty = (0.5 * FOVY).tan() * (1.0 - margin.clamp(0.0, 0.9));
        let tx = ty * aspect;
        // A corner at (x, y) in the image plane and z towards the eye is at depth D - z;
        // it is inside when |x| <= tx (D - z) and |y| <= ty (D - z).
        let corners = bounds.corners().map(|c| c - target);
        let mut dist = 0.0f32;
        for c in corners {
            let (x, y, z) = (c.dot(right), c.dot(up), c.dot(back));
            dist = dist.max(z + x.abs() / tx).max(z + y.abs() / ty);
        }
        let nearest = corners
            .iter()
            .map(|c| dist - c.dot(back))
            .fold(f32::INFINITY, f32::min);
        let farthest = corners
            .iter()
            .map(|c| dist - c.dot(back))
            .fold(0.0, f32::max);
        let size = bounds.diagonal();
        Camera {
            eye: target + back * dist,
            target,
            up,
            fovy: FOVY,
            aspect,
            near: (0.5 * nearest).max(1e-4 * size),
            far: 2.0 * farthest + size,
        }
    }

    pub fn view(&self) -> Mat4 {
        Mat4::look_at_rh(self.eye, self.target, self.up)
    }
    /// Depth 0..1, as wgpu expects.
    pub fn proj(&self) -> Mat4 {
        Mat4::perspective_rh(self.fovy, self.aspect, self.near, self.far)
    }
    /// Normalized device coordinates of a point (x, y in -1..1 when in view).
    pub fn project(&self, p: Vec3) -> Vec3 {
        self.proj().project_point3(self.view().transform_point3(p))
    }

    /// The camera orbited about its target by `yaw` (about the up axis) and `pitch`
    /// (about the right axis), radians; the distance is kept. Pitch stops short of the poles.
    pub fn orbit(&self, yaw: f32, pitch: f32) -> Camera {
        let offset = self.eye - self.target;
        let dist = offset.length();
        let back = offset / dist;
        let up_axis = self.up.normalize();
        let right = up_axis.cross(back).normalize();
        let elevation = back.dot(up_axis).clamp(-1.0, 1.0).asin();
        let new_elevation = (elevation + pitch).clamp(-1.45, 1.45);
        let flat = (back - up_axis * back.dot(up_axis)).normalize_or(right.cross(up_axis));
        let flat = glam::Quat::from_axis_angle(up_axis, yaw) * flat;
        let back = flat * new_elevation.cos() + up_axis * new_elevation.sin();
        Camera {
            eye: self.target + back * dist,
            ..*self
        }
    }

    /// The camera moved towards (factor < 1) or away from (> 1) its target.
    pub fn zoom(&self, factor: f32) -> Camera {
        let f = factor.clamp(0.05, 20.0);
        Camera {
            eye: self.target + (self.eye - self.target) * f,
            near: self.near * f,
            far: self.far * f,
            ..*self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cube() -> Bounds {
        Bounds {
            min: Vec3::new(-1.0, -2.0, 0.0),
            max: Vec3::new(3.0, 1.0, 0.5),
        }
    }

    #[test]
    fn every_corner_is_inside_the_image_with_the_margin_for_each_view_and_aspect() {
        for view in [View::Iso, View::Front, View::Top] {
            for aspect in [0.5, 1.0, 16.0 / 9.0] {
                let cam = Camera::fit(cube(), view, aspect, 0.1);
                let mut widest = 0.0f32;
                for c in cube().corners() {
                    let p = cam.project(c);
                    assert!(p.x.abs() <= 0.9 + 1e-4, "{view:?} {aspect}: {p}");
                    assert!(p.y.abs() <= 0.9 + 1e-4, "{view:?} {aspect}: {p}");
                    assert!(p.z > 0.0 && p.z < 1.0, "{view:?} {aspect}: depth {p}");
                    widest = widest.max(p.x.abs()).max(p.y.abs());
                }
                // Tight: some corner touches the margin.
                assert!(widest > 0.9 - 1e-3, "{view:?} {aspect}: {widest}");
            }
        }
    }

    #[test]
    fn up_is_up_in_the_image() {
        let cam = Camera::fit(cube(), View::Iso, 1.0, 0.1);
        let c = cube().center();
        assert!(cam.project(c + Vec3::Y * 0.5).y > cam.project(c).y);
        let top = Camera::fit(cube(), View::Top, 1.0, 0.1);
        // Looking down +y: x to the right.
        assert!(top.project(c + Vec3::X * 0.5).x > top.project(c).x);
    }

    #[test]
    fn a_single_point_still_gives_a_usable_camera() {
        let b = Bounds::of_points([Vec3::new(2.0, 2.0, 2.0)]).unwrap();
        let cam = Camera::fit(b, View::Front, 1.0, 0.1);
        let p = cam.project(Vec3::new(2.0, 2.0, 2.0));
        assert!(p.is_finite() && p.x.abs() < 1e-5 && p.y.abs() < 1e-5, "{p}");
        assert!(Bounds::of_points([Vec3::NAN]).is_none());
    }

    #[test]
    fn orbit_keeps_the_distance_and_zoom_scales_it() {
        let cam = Camera::fit(cube(), View::Iso, 1.0, 0.1);
        let d = (cam.eye - cam.target).length();
        let o = cam.orbit(0.7, 0.3);
        assert!(((o.eye - o.target).length() - d).abs() < 1e-3 * d);
        assert!((o.eye - cam.eye).length() > 0.1 * d);
        let z = cam.zoom(0.5);
        assert!(((z.eye - z.target).length() - 0.5 * d).abs() < 1e-3 * d);
    }
}
