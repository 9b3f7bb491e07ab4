// DDEF step 2 (LatticePlan::frame and ::drifted): one workgroup per world reduces its
// source workgroups' bounds, then one invocation rounds them outward to quanta (a thin
// axis: a box `quanta.z` quanta wide centred on the charges' middle rounded to the fine
// quantum), sets the cell edges and raises the drift flag (sticky) when the box left the
// plan. All box arithmetic is on integers and powers of two (ldexp): exact.

@group(0) @binding(1) var<storage, read> bounds: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> ddef_worlds: array<DdefWorld>;

var<workgroup> lo: array<vec4<f32>, WG>;
var<workgroup> hi: array<vec4<f32>, WG>;

// Bounds and extents in quanta past these raise the drift flag (plan::MIN_QUANTA,
// MAX_QUANTA, MAX_COORD_QUANTA, DRIFT_ASPECT).
const MIN_QUANTA: i32 = 16;
const MAX_QUANTA: i32 = 4096;
const MAX_COORD_QUANTA: i32 = 8388608;
const DRIFT_ASPECT: i32 = 2;
// plan::quanta's clamp.
const QUANTA_CLAMP: f32 = 536870912.0;

fn floor_quanta(v: f32, e: i32) -> i32 {
    return i32(clamp(floor(ldexp(v, -e)), -QUANTA_CLAMP, QUANTA_CLAMP));
}

fn ceil_quanta(v: f32, e: i32) -> i32 {
    return i32(clamp(ceil(ldexp(v, -e)), -QUANTA_CLAMP, QUANTA_CLAMP));
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let w = wid.x;
    let world = ddef_worlds[w];
    let g0 = world.base.w / WG;
    let g1 = (world.cap.w + WG - 1u) / WG;
    let inf = bitcast<f32>(0x7f800000u);
    var a = vec4<f32>(inf);
    var b = vec4<f32>(-inf);
    for (var g = g0 + lid; g < g1; g = g + WG) {
        a = min(a, bounds[2u * g]);
        b = max(b, bounds[2u * g + 1u]);
    }
    lo[lid] = a;
    hi[lid] = b;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) {
            lo[lid] = min(lo[lid], lo[lid + s]);
            hi[lid] = max(hi[lid], hi[lid + s]);
        }
        workgroupBarrier();
    }
    if (lid != 0u) {
        return;
    }
    var bl = lo[0].xyz;
    var bh = hi[0].xyz;
    if (!all(bl <= bh)) {
        // No charge in this world: a one-quantum box at the origin, never evaluated.
        bl = vec3<f32>(0.0);
        bh = vec3<f32>(0.0);
    }
    let e = world.quanta.x;
    let ef = world.quanta.y;
    let thin = world.quanta.z;
    var f = world;
    for (var k = 0u; k < 3u; k = k + 1u) {
        f.lo_q[k] = floor_quanta(bl[k], e);
        f.hi_q[k] = ceil_quanta(bh[k], e);
        let is_thin = ((world.dims.w >> k) & 1u) != 0u;
        if (!is_thin || f.hi_q[k] - f.lo_q[k] >= thin) {
            f.hi_q[k] = max(f.hi_q[k], f.lo_q[k] + 1);
            f.ext_q[k] = f.hi_q[k] - f.lo_q[k];
            f.lo[k] = ldexp(f32(f.lo_q[k]), e);
            f.hi[k] = ldexp(f32(f.hi_q[k]), e);
        } else {
            let c2 = floor_quanta(bl[k], ef) + ceil_quanta(bh[k], ef);
            let width = thin << u32(e - ef);
            f.ext_q[k] = thin;
            f.lo[k] = ldexp(f32(c2 - width), ef - 1);
            f.hi[k] = ldexp(f32(c2 + width), ef - 1);
        }
        let cells = f32(world.dims[k] - 1u);
        f.h[k] = (f.hi[k] - f.lo[k]) / cells;
        f.inv_h[k] = cells / (f.hi[k] - f.lo[k]);
    }
    // LatticePlan::drifted.
    let ext = f.ext_q.xyz;
    let largest = max(ext.x, max(ext.y, ext.z));
    let corner = max(max(abs(f.lo_q.xyz), abs(f.hi_q.xyz)), vec3<i32>(0));
    var drift = largest < MIN_QUANTA || largest > MAX_QUANTA
        || max(corner.x, max(corner.y, corner.z)) > MAX_COORD_QUANTA;
    if (!drift) {
        let p = world.planned.xyz;
        for (var i = 0u; i < 3u; i = i + 1u) {
            for (var j = 0u; j < 3u; j = j + 1u) {
                drift = drift || ext[i] * p[j] > DRIFT_ASPECT * ext[j] * p[i];
            }
        }
    }
    f.flags.x = f.flags.x | select(0u, 1u, drift);
    ddef_worlds[w] = f;
}
