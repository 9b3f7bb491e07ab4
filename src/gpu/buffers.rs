//! The solver's GPU buffers, in one [`Buffers`] table indexed by [`Buf`]: what each
//! holds, and their creation from a system (f64 to f32 with range checks, the sliced
//! adjacency, the constant local-global matrix, the `Params` uniform).

use glam::DVec3;
use wgpu::util::DeviceExt;

use super::adjacency;
use super::layout::Params;
use super::limits::Sizes;
use super::params::{to_f32, vec4, TimeStep};
use super::GpuError;
use crate::config::{Config, Integrator};
use crate::model::{System, COULOMB_K};

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
    /// Per spring its block W_k = s I + m m^T as (m, s), then per spring (n, fmag).
    Sf,
    Adj,
    /// Per particle 2 or 3 vec4 (`params::block_diag`): b, the inverse diagonal with the
    /// mass (0: pinned) in w, its off-diagonal entries (shared/blocks.wgsl).
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
    // Forward sensitivities (`gpu::tangent`), added by it before the step is planned.
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

/// Every buffer kind.
const BUF_KINDS: usize = Buf::TanZ as usize + 1;

/// The solver's buffers (those of the forward step always; the tangent banks when added)
/// and the `Params` uniform every solver kernel binds at 0.
pub(super) struct Buffers {
    list: Vec<Option<wgpu::Buffer>>,
    params: wgpu::Buffer,
}

/// Usage of every solver storage buffer (readable back, writable by the host).
pub(super) const STORAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_DST)
    .union(wgpu::BufferUsages::COPY_SRC);

/// A zero-filled storage buffer (at least 16 bytes: wgpu refuses empty bindings).
pub(super) fn zeroed(device: &wgpu::Device, label: &str, size: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: size.max(16),
        usage: STORAGE,
        mapped_at_creation: false,
    })
}

/// A storage buffer holding `data`, zero-padded to `size` bytes (and to 16 at least).
pub(super) fn filled(device: &wgpu::Device, label: &str, data: &[u8], size: u64) -> wgpu::Buffer {
    let mut d = data.to_vec();
    d.resize((size.max(16) as usize).max(data.len()), 0);
    device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some(label),
        contents: &d,
        usage: STORAGE,
    })
}

impl Buffers {
    /// The buffer `b`, or a typed error when it was never created (a tangent buffer of a
    /// solver without tangents).
    pub(super) fn get(&self, b: Buf) -> Result<&wgpu::Buffer, GpuError> {
        self.list[b as usize]
            .as_ref()
            .ok_or_else(|| GpuError::Binding {
                kernel: "buffers",
                problem: format!("buffer {b:?} does not exist on this solver"),
            })
    }

    pub(super) fn params(&self) -> &wgpu::Buffer {
        &self.params
    }

    /// Replaces the `Params` uniform (a batch of worlds writes its own), before the step
    /// is planned.
    pub(super) fn set_params(&mut self, device: &wgpu::Device, params: &Params) {
        self.params = uniform(device, params);
    }

    /// Adds (or replaces) buffer `b`: the tangent banks, before the step is planned.
    pub(super) fn insert(&mut self, b: Buf, buffer: wgpu::Buffer) {
        self.list[b as usize] = Some(buffer);
    }

    /// Creates the forward step's buffers for `system` and the `Params` uniform. `n_wg`:
    /// workgroups of a per-particle dispatch (two reduction blocks of partial sums each).
    pub(super) fn create(
        device: &wgpu::Device,
        system: &System,
        config: &Config,
        dt: TimeStep,
        sz: &Sizes,
        n_wg: u32,
    ) -> Result<Self, GpuError> {
        let h = dt.seconds();
        let (x, v) = state_vec4(system.positions(), system.velocities())?;
        let props = particle_props(system)?;
        let charged = system.charged_indices();
        let springs: Vec<[u32; 2]> = system.springs().iter().map(|s| [s.i, s.j]).collect();
        let sparams = spring_params(system)?;
        let (adj_shift, adj) = adjacency::words(system.len(), system.springs());
        let (sf_init, bd_init) = if config.integrator == Integrator::LocalGlobal {
            local_global_init(system, &|_| h)?
        } else {
            (Vec::new(), Vec::new())
        };
        let size_of = |name: &str| -> u64 {
            sz.storage
                .iter()
                .find(|(w, _)| *w == name)
                .map(|(_, b)| *b)
                .unwrap_or(16)
        };
        let vertex = |label: &str, data: &[u8]| {
            device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: data,
                usage: STORAGE | wgpu::BufferUsages::VERTEX,
            })
        };
        let zero = |label: &str, what: &str| zeroed(device, label, size_of(what));
        let fill =
            |label: &str, data: &[u8], what: &str| filled(device, label, data, size_of(what));
        let mut list: Vec<Option<wgpu::Buffer>> = (0..BUF_KINDS).map(|_| None).collect();
        let mut put = |b: Buf, buffer: wgpu::Buffer| list[b as usize] = Some(buffer);
        put(Buf::X, vertex("msc positions", bytemuck::cast_slice(&x)));
        put(Buf::V, vertex("msc velocities", bytemuck::cast_slice(&v)));
        put(
            Buf::Props,
            fill(
                "msc particle properties",
                bytemuck::cast_slice(&props),
                "particle properties",
            ),
        );
        put(Buf::Force, zero("msc forces", "forces"));
        put(Buf::Sources, zero("msc coulomb sources", "Coulomb sources"));
        put(
            Buf::Charged,
            fill(
                "msc charged indices",
                bytemuck::cast_slice(&charged),
                "charged indices",
            ),
        );
        put(Buf::Clock, zeroed(device, "msc clock", 16));
        put(
            Buf::Springs,
            fill("msc springs", bytemuck::cast_slice(&springs), "springs"),
        );
        put(
            Buf::SParams,
            fill(
                "msc spring parameters",
                bytemuck::cast_slice(&sparams),
                "spring parameters",
            ),
        );
        put(
            Buf::Sf,
            fill(
                "msc spring blocks",
                bytemuck::cast_slice(&sf_init),
                "spring blocks",
            ),
        );
        put(
            Buf::Adj,
            // Its own size: the limit checks use the bound of either layout.
            filled(device, "msc adjacency", bytemuck::cast_slice(&adj), 0),
        );
        put(
            Buf::Bd,
            fill(
                "msc rhs and diagonal",
                bytemuck::cast_slice(&bd_init),
                "right-hand side and diagonal",
            ),
        );
        put(Buf::S, zero("msc solver scratch", "solver scratch"));
        put(Buf::Xt, zero("msc x_t", "x_t"));
        put(Buf::B0, zero("msc b0", "b0"));
        put(Buf::R, zero("msc cg r", "cg r"));
        put(Buf::P, zero("msc cg p", "cg p"));
        put(Buf::Q, zero("msc cg q", "cg q"));
        // Two blocks of one vec4 per workgroup of a per-particle dispatch.
        put(
            Buf::Partials,
            zeroed(device, "msc partial sums", 32 * u64::from(n_wg)),
        );
        put(Buf::Scalars, zero("msc scalars", "scalars"));

        let params = super::params::params(system, config, dt, n_wg)?;
        // Both come from `adjacency::slice_shift` on the same springs.
        debug_assert_eq!(params.adj_shift, adj_shift);
        let params = uniform(device, &params);
        Ok(Self { list, params })
    }
}

/// Positions (xyz, 1) and velocities (xyz, 0) as the `X` and `V` buffers hold them.
pub(super) fn state_vec4(x: &[DVec3], v: &[DVec3]) -> Result<(Vec<Vec4>, Vec<Vec4>), GpuError> {
    let x = x
        .iter()
        .enumerate()
        .map(|(i, p)| vec4(*p, 1.0, "position of particle", i))
        .collect::<Result<_, _>>()?;
    let v = v
        .iter()
        .enumerate()
        .map(|(i, p)| vec4(*p, 0.0, "velocity of particle", i))
        .collect::<Result<_, _>>()?;
    Ok((x, v))
}

/// The `Props` rows: (mass, charge * sqrt(k_c), charge, pinned) per particle.
pub(super) fn particle_props(system: &System) -> Result<Vec<Vec4>, GpuError> {
    let sqrt_k = COULOMB_K.sqrt();
    (0..system.len())
        .map(|i| {
            let q = system.charges()[i];
            Ok([
                to_f32(system.masses()[i], "mass of particle", i)?,
                to_f32(q * sqrt_k, "charge of particle", i)?,
                to_f32(q, "charge of particle", i)?,
                if system.pinned()[i] { 1.0 } else { 0.0 },
            ])
        })
        .collect()
}

/// The `SParams` rows: (k, L, c, 0) per spring.
pub(super) fn spring_params(system: &System) -> Result<Vec<Vec4>, GpuError> {
    system
        .springs()
        .iter()
        .enumerate()
        .map(|(k, s)| {
            Ok([
                to_f32(s.stiffness, "stiffness of spring", k)?,
                to_f32(s.rest_length, "rest length of spring", k)?,
                to_f32(s.damping, "damping of spring", k)?,
                0.0,
            ])
        })
        .collect()
}

fn uniform(device: &wgpu::Device, params: &Params) -> wgpu::Buffer {
    device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("msc params"),
        contents: bytemuck::bytes_of(params),
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
    })
}

/// One `vec4<f32>` of a storage buffer.
type Vec4 = [f32; 4];

/// Local-global: the matrix P = M + h C_L + h^2 L is constant (DESIGN section 2): its
/// edge weights as W_k = (h c + h^2 k) I, i.e. (m, s) = (0, w), then the unused (n, fmag)
/// half, and per particle its two `Bd` rows (`params::block_diag` is false under
/// local-global): b (written by lg_rhs), the diagonal inverse with the row's mass (0:
/// pinned) in w. `h(i)`: the time step of particle i's
/// world (a spring's is its first particle's).
pub(super) fn local_global_init(
    system: &System,
    h: &dyn Fn(u32) -> f64,
) -> Result<(Vec<Vec4>, Vec<Vec4>), GpuError> {
    let mut sf_init = Vec::with_capacity(2 * system.springs().len());
    let mut bd_init = Vec::with_capacity(2 * system.len());
    let mut diag: Vec<f64> = system.masses().to_vec();
    for (k, s) in system.springs().iter().enumerate() {
        let h = h(s.i);
        let w = h * s.damping + h * h * s.stiffness;
        diag[s.i as usize] += w;
        diag[s.j as usize] += w;
        sf_init.push([
            0.0,
            0.0,
            0.0,
            to_f32(w, "local-global weight of spring", k)?,
        ]);
    }
    sf_init.resize(2 * system.springs().len(), [0.0; 4]);
    for (i, d) in diag.iter().enumerate() {
        let inv = to_f32(1.0 / d, "diagonal of particle", i)?;
        let mass = if system.pinned()[i] {
            0.0
        } else {
            to_f32(system.masses()[i], "mass of particle", i)?
        };
        bd_init.push([0.0; 4]);
        bd_init.push([inv, inv, inv, mass]);
    }
    Ok((sf_init, bd_init))
}
