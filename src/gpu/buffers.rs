//! The solver's GPU buffers: what each holds, and their creation from a system (f64 to
//! f32 with range checks, the CSR adjacency, the constant local-global matrix, `Params`).

use glam::DVec3;
use wgpu::util::DeviceExt;

use super::layout::{ExtCharge, Params, MAX_EXT_CHARGES};
use super::limits::Sizes;
use super::solver::GpuSolver;
use super::GpuError;
use crate::config::{Config, ExternalField, Integrator, SolverMethod};
use crate::model::{Adjacency, System, COULOMB_K};

/// The GPU buffers, indexed by `Buf as usize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Buf {
    /// Positions (xyz, 1): also a vertex buffer (Float32x4, stride 16).
    X,
    V,
    /// (mass, charge * sqrt(k_c), charge, pinned)
    Props,
    /// Non-spring forces (xyz) and Coulomb potential (w).
    Force,
    Sources,
    Charged,
    Clock,
    Springs,
    SParams,
    /// Per spring (n, fmag), (s, t, energy, 0).
    Sf,
    Adj,
    /// Per particle b, inverse diagonal (two vec4).
    Bd,
    /// Solver ping-pong partner of the unknown.
    S,
    Xt,
    B0,
    R,
    P,
    Q,
    Partials,
    Scalars,
    // Forward sensitivities (src/gpu/tangent.rs), created there, after the buffers above.
    /// Per direction: dx then dv (2 n vec4).
    TanState,
    /// Per direction: dq per particle, (k, L, c, dk) per spring, (dx_e, dq_e) per external.
    TanDir,
    /// Per direction: its active particles (n u32).
    TanActive,
    /// The tangent solve's unknown and its ping-pong partner.
    TanU,
    TanS,
    /// Local-global, per direction: the iteration-independent right-hand side (n vec4).
    TanA,
    /// Local-global: the forward iterate of the current alternation (n vec4).
    TanZ,
}

/// Buffers created with the solver (the tangent buffers come after them).
pub(super) const BUF_COUNT: usize = Buf::Scalars as usize + 1;

pub(super) fn to_f32(value: f64, what: &str, index: usize) -> Result<f32, GpuError> {
    let v = value as f32;
    if v.is_finite() || !value.is_finite() {
        Ok(v)
    } else {
        // A backstop: `range::check` has already refused such values with more context.
        Err(GpuError::F32Range {
            what: format!("{what} {index}"),
            value,
            limit: format!("|value| <= {:e}", f32::MAX),
        })
    }
}

pub(super) fn vec4(v: DVec3, w: f32, what: &str, index: usize) -> Result<[f32; 4], GpuError> {
    Ok([
        to_f32(v.x, what, index)?,
        to_f32(v.y, what, index)?,
        to_f32(v.z, what, index)?,
        w,
    ])
}

impl GpuSolver {
    pub(super) fn buf(&self, b: Buf) -> &wgpu::Buffer {
        &self.buffers[b as usize]
    }

    pub(super) fn create_buffers(
        &mut self,
        system: &System,
        config: &Config,
        sz: &Sizes,
    ) -> Result<(), GpuError> {
        let n = system.len();
        let h = config.dt;
        let sqrt_k = COULOMB_K.sqrt();
        let mut x = Vec::with_capacity(n);
        let mut v = Vec::with_capacity(n);
        let mut props = Vec::with_capacity(n);
        let charged = system.charged_indices();
        for i in 0..n {
            x.push(vec4(system.positions()[i], 1.0, "position of particle", i)?);
            v.push(vec4(
                system.velocities()[i],
                0.0,
                "velocity of particle",
                i,
            )?);
            let q = system.charges()[i];
            props.push([
                to_f32(system.masses()[i], "mass of particle", i)?,
                to_f32(q * sqrt_k, "charge of particle", i)?,
                to_f32(q, "charge of particle", i)?,
                if system.pinned()[i] { 1.0 } else { 0.0 },
            ]);
        }
        let springs: Vec<[u32; 2]> = system.springs().iter().map(|s| [s.i, s.j]).collect();
        let mut sparams = Vec::with_capacity(springs.len());
        for (k, s) in system.springs().iter().enumerate() {
            sparams.push([
                to_f32(s.stiffness, "stiffness of spring", k)?,
                to_f32(s.rest_length, "rest length of spring", k)?,
                to_f32(s.damping, "damping of spring", k)?,
                0.0,
            ]);
        }
        let adjacency = Adjacency::build(n, system.springs());
        let mut adj: Vec<u32> = adjacency.offsets.clone();
        for e in &adjacency.entries {
            adj.push(e.spring);
            adj.push(e.other | if e.sign < 0 { 1 << 31 } else { 0 });
        }
        let lg = config.integrator == Integrator::LocalGlobal;
        // Local-global: the matrix P = M + h C_L + h^2 L is constant (DESIGN section 2):
        // upload its edge weights as W_k = (h c + h^2 k) I and its diagonal inverse once.
        let mut sf_init: Vec<[f32; 4]> = Vec::new();
        let mut bd_init: Vec<[f32; 4]> = Vec::new();
        if lg {
            let mut diag: Vec<f64> = system.masses().to_vec();
            for (k, s) in system.springs().iter().enumerate() {
                let w = h * s.damping + h * h * s.stiffness;
                diag[s.i as usize] += w;
                diag[s.j as usize] += w;
                sf_init.push([0.0; 4]);
                sf_init.push([
                    to_f32(w, "local-global weight of spring", k)?,
                    0.0,
                    0.0,
                    0.0,
                ]);
            }
            for (i, d) in diag.iter().enumerate() {
                let inv = to_f32(1.0 / d, "diagonal of particle", i)?;
                bd_init.push([0.0; 4]);
                bd_init.push([inv, inv, inv, 0.0]);
                bd_init.push([0.0; 4]);
            }
        }
        let storage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC;
        let device = &self.device;
        let size_of = |name: &str| -> u64 {
            sz.storage
                .iter()
                .find(|(w, _)| *w == name)
                .map(|(_, b)| *b)
                .unwrap_or(16)
        };
        let init = |label: &str, data: &[u8], usage: wgpu::BufferUsages| {
            device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: data,
                usage,
            })
        };
        let zeroed = |label: &str, size: u64| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: size.max(16),
                usage: storage,
                mapped_at_creation: false,
            })
        };
        let padded = |data: &[u8], size: u64| -> Vec<u8> {
            let mut d = data.to_vec();
            d.resize((size.max(16) as usize).max(data.len()), 0);
            d
        };
        let mut bufs: Vec<Option<wgpu::Buffer>> = (0..BUF_COUNT).map(|_| None).collect();
        let mut put = |b: Buf, buffer: wgpu::Buffer| bufs[b as usize] = Some(buffer);
        put(
            Buf::X,
            init(
                "msc positions",
                bytemuck::cast_slice(&x),
                storage | wgpu::BufferUsages::VERTEX,
            ),
        );
        put(
            Buf::V,
            init(
                "msc velocities",
                bytemuck::cast_slice(&v),
                storage | wgpu::BufferUsages::VERTEX,
            ),
        );
        put(
            Buf::Props,
            init(
                "msc particle properties",
                bytemuck::cast_slice(&props),
                storage,
            ),
        );
        put(Buf::Force, zeroed("msc forces", size_of("forces")));
        put(
            Buf::Sources,
            zeroed("msc coulomb sources", size_of("Coulomb sources")),
        );
        put(
            Buf::Charged,
            init(
                "msc charged indices",
                &padded(bytemuck::cast_slice(&charged), size_of("charged indices")),
                storage,
            ),
        );
        put(Buf::Clock, zeroed("msc clock", 16));
        put(
            Buf::Springs,
            init(
                "msc springs",
                &padded(bytemuck::cast_slice(&springs), size_of("springs")),
                storage,
            ),
        );
        put(
            Buf::SParams,
            init(
                "msc spring parameters",
                &padded(bytemuck::cast_slice(&sparams), size_of("spring parameters")),
                storage,
            ),
        );
        put(
            Buf::Sf,
            init(
                "msc spring blocks",
                &padded(bytemuck::cast_slice(&sf_init), size_of("spring blocks")),
                storage,
            ),
        );
        put(
            Buf::Adj,
            init("msc adjacency", bytemuck::cast_slice(&adj), storage),
        );
        put(
            Buf::Bd,
            init(
                "msc rhs and diagonal",
                &padded(
                    bytemuck::cast_slice(&bd_init),
                    size_of("right-hand side and diagonal"),
                ),
                storage,
            ),
        );
        put(
            Buf::S,
            zeroed("msc solver scratch", size_of("solver scratch")),
        );
        put(Buf::Xt, zeroed("msc x_t", size_of("x_t")));
        put(Buf::B0, zeroed("msc b0", size_of("b0")));
        put(Buf::R, zeroed("msc cg r", size_of("cg r")));
        put(Buf::P, zeroed("msc cg p", size_of("cg p")));
        put(Buf::Q, zeroed("msc cg q", size_of("cg q")));
        // Two blocks of one vec4 per workgroup of a per-particle dispatch.
        let grid = self.grid(self.n);
        let partials = 32 * u64::from(grid[0]) * u64::from(grid[1]);
        put(Buf::Partials, zeroed("msc partial sums", partials));
        put(Buf::Scalars, zeroed("msc scalars", size_of("scalars")));
        self.buffers = bufs
            .into_iter()
            .map(|b| b.expect("every buffer is created"))
            .collect();

        // Params
        let mut params = Params {
            n: n as u32,
            n_springs: system.springs().len() as u32,
            n_charged: charged.len() as u32,
            n_ext: config.external_charges.len() as u32,
            dt: h as f32,
            dt2: (h * h) as f32,
            omega: config.solver.omega as f32,
            eps2: to_f32(config.coulomb.softening.powi(2), "softening", 0)?,
            gravity: vec4(config.gravity, 0.0, "gravity", 0)?,
            field: [0.0; 4],
            field_kind: 0,
            n_wg: {
                let g = self.grid(self.n);
                g[0] * g[1]
            },
            block_diag: u32::from(matches!(
                config.solver.method,
                SolverMethod::BlockJacobi | SolverMethod::Chebyshev
            )),
            _pad0: 0,
            ext: [ExtCharge::default(); MAX_EXT_CHARGES],
        };
        match config.external_field {
            None => {}
            Some(ExternalField::Uniform(e)) => {
                params.field_kind = 1;
                params.field = vec4(e, 0.0, "external field", 0)?;
            }
            Some(ExternalField::Swirl { scale, min_z }) => {
                params.field_kind = 2;
                params.field = [
                    to_f32(scale, "field scale", 0)?,
                    to_f32(min_z, "field min_z", 0)?,
                    0.0,
                    0.0,
                ];
            }
            Some(ExternalField::Vortex { scale, min_z }) => {
                params.field_kind = 3;
                params.field = [
                    to_f32(scale, "field scale", 0)?,
                    to_f32(min_z, "field min_z", 0)?,
                    0.0,
                    0.0,
                ];
            }
        }
        for (k, c) in config.external_charges.iter().enumerate() {
            let orbit = c.orbit;
            params.ext[k] = ExtCharge {
                pos0: vec4(
                    c.position,
                    to_f32(c.charge * sqrt_k, "external charge", k)?,
                    "external charge position",
                    k,
                )?,
                center: match orbit {
                    Some(o) => vec4(
                        o.center,
                        to_f32(o.angular_velocity, "orbit angular velocity", k)?,
                        "orbit center",
                        k,
                    )?,
                    None => [0.0; 4],
                },
                axis: match orbit {
                    Some(o) => vec4(o.axis, 1.0, "orbit axis", k)?,
                    None => [0.0; 4],
                },
            };
        }
        let params_buf = self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("msc params"),
                contents: bytemuck::bytes_of(&params),
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            });
        self.params = Some(params_buf);
        Ok(())
    }
}
