// Explicit integrators' kicks and drifts, a = (f_spring + f_other) / m with every force
// explicit (springs from spring_assemble in mode 1, the rest from coulomb_tiled).
// Pinned particles are not kicked; they drift with their prescribed velocity.

// disp.mode (gpu::kernels::steps::KickMode).
// Symplectic Euler: v += h a; x += h v; the clock advances.
const KICK_EULER: u32 = 0u;
// Verlet's first half: v += h/2 a; x += h v.
const KICK_VERLET_FIRST: u32 = 1u;
// Verlet's second kick: v += h/2 a; the clock advances.
const KICK_VERLET_SECOND: u32 = 2u;

@group(0) @binding(1) var<storage, read_write> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> v: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> props: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> force: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> sf: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> adj: array<u32>;
@group(0) @binding(7) var<storage, read_write> clock: array<u32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_index(wid, nwg, lid);
    let mode = disp.mode;
    if (i == 0u && mode != KICK_VERLET_FIRST) {
        let c = clock_tick(clock[0], clock[1]);
        clock[0] = c.x;
        clock[1] = c.y;
    }
    if (!is_row(i)) {
        return;
    }
    let dt = world_dt(world_of(i));
    let pr = props[i];
    var vi = v[i].xyz;
    if (!is_pinned(pr)) {
        var f = force[i].xyz;
        let row = adj_row(i);
        for (var at = row.at; at < row.end; at = at + row.step) {
            let k = adj_spring(at);
            let word = adj_word(row, at);
            let s0 = sf[params.n_springs + k];
            f = f + (entry_sign(word) * s0.w) * s0.xyz;
        }
        let kick = select(0.5 * dt, dt, mode == KICK_EULER);
        vi = vi + (kick / pr.x) * f;
        v[i] = vec4<f32>(vi, 0.0);
    }
    if (mode != KICK_VERLET_SECOND) {
        x[i] = vec4<f32>(x[i].xyz + dt * vi, 1.0);
    }
}
