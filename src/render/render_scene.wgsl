// Offscreen drawing of particles and springs (src/render). Vertex inputs are the solver's
// own buffers: positions as vec4<f32> (xyz, w = 1), stride 16, and for colouring by
// speed the velocities (xyz), stride 16; for colouring by charge a per-particle vec4
// whose x is the charge. Colours are computed in sRGB and converted to linear, since the
// target is an sRGB texture.

struct Frame {
    view: mat4x4<f32>,
    proj: mat4x4<f32>,
    // Target size in pixels.
    viewport: vec2<f32>,
    // Particle radius: pixels when size_in_pixels != 0, else metres.
    particle_size: f32,
    size_in_pixels: u32,
    // 0: charge (diverging, x / max |q|); 1: speed (sequential, |v| / max |v|).
    color_mode: u32,
    charge_scale: f32,
    speed_scale: f32,
    _pad: f32,
    // Springs' colour, sRGB.
    spring_color: vec4<f32>,
}

@group(0) @binding(0) var<uniform> frame: Frame;

fn srgb_to_linear(c: vec3<f32>) -> vec3<f32> {
    let lo = c / 12.92;
    let hi = pow((c + 0.055) / 1.055, vec3<f32>(2.4));
    return select(hi, lo, c <= vec3<f32>(0.04045));
}

// Moreland's cool-warm diverging map: blue (negative), light grey (zero), red (positive).
fn diverging(t: f32) -> vec3<f32> {
    let blue = vec3<f32>(59.0, 76.0, 192.0) / 255.0;
    let mid = vec3<f32>(221.0, 221.0, 221.0) / 255.0;
    let red = vec3<f32>(180.0, 4.0, 38.0) / 255.0;
    let s = clamp(t, -1.0, 1.0);
    if s < 0.0 {
        return mix(mid, blue, -s);
    }
    return mix(mid, red, s);
}

// Viridis from 0.2 up (its darkest fifth would vanish on a dark background), five
// stops, piecewise linear.
fn sequential(t: f32) -> vec3<f32> {
    var stops = array<vec3<f32>, 5>(
        vec3<f32>(68.0, 1.0, 84.0) / 255.0,
        vec3<f32>(59.0, 82.0, 139.0) / 255.0,
        vec3<f32>(33.0, 145.0, 140.0) / 255.0,
        vec3<f32>(94.0, 201.0, 98.0) / 255.0,
        vec3<f32>(253.0, 231.0, 37.0) / 255.0,
    );
    let s = (0.2 + 0.8 * clamp(t, 0.0, 1.0)) * 4.0;
    let k = min(u32(floor(s)), 3u);
    return mix(stops[k], stops[k + 1u], s - f32(k));
}

struct ParticleOut {
    @builtin(position) clip: vec4<f32>,
    // Corner of the quad in [-1, 1]^2.
    @location(0) uv: vec2<f32>,
    @location(1) color: vec3<f32>,
    // The particle's centre in eye space, and its radius there.
    @location(2) center: vec3<f32>,
    @location(3) radius: f32,
}

@vertex
fn vs_particle(
    @builtin(vertex_index) corner: u32,
    @location(0) position: vec4<f32>,
    @location(1) value: vec4<f32>,
) -> ParticleOut {
    // Triangle strip over the quad's 4 corners.
    let uv = vec2<f32>(select(-1.0, 1.0, (corner & 1u) != 0u), select(-1.0, 1.0, (corner & 2u) != 0u));
    let eye = frame.view * vec4<f32>(position.xyz, 1.0);
    var radius = frame.particle_size;
    if frame.size_in_pixels != 0u {
        // Pixels to eye-space units at this depth: 2 px / height in NDC, times w / P11.
        let w = (frame.proj * eye).w;
        radius = frame.particle_size * 2.0 / frame.viewport.y * w / frame.proj[1][1];
    }
    // A quad facing the camera, through the centre.
    let clip = frame.proj * vec4<f32>(eye.xy + uv * radius, eye.z, 1.0);
    var c: vec3<f32>;
    if frame.color_mode == 1u {
        c = sequential(length(value.xyz) * frame.speed_scale);
    } else {
        c = diverging(value.x * frame.charge_scale);
    }
    var out: ParticleOut;
    out.clip = clip;
    out.uv = uv;
    out.color = c;
    out.center = eye.xyz;
    out.radius = radius;
    return out;
}

struct Fragment {
    @location(0) color: vec4<f32>,
    @builtin(frag_depth) depth: f32,
}

@fragment
fn fs_particle(in: ParticleOut) -> Fragment {
    let r2 = dot(in.uv, in.uv);
    if r2 > 1.0 {
        discard;
    }
    // A sphere impostor lit from the upper left, with a darker rim; its depth is the
    // sphere's front surface, so springs pass behind the near half of each particle.
    let n = vec3<f32>(in.uv.x, in.uv.y, sqrt(1.0 - r2));
    let light = normalize(vec3<f32>(-0.4, 0.6, 0.7));
    let shade = 0.45 + 0.55 * max(dot(n, light), 0.0);
    let rim = select(1.0, 0.6, r2 > 0.82);
    let surface = frame.proj * vec4<f32>(in.center + n * in.radius, 1.0);
    var out: Fragment;
    out.color = vec4<f32>(srgb_to_linear(in.color * shade * rim), 1.0);
    out.depth = clamp(surface.z / surface.w, 0.0, 1.0);
    return out;
}

@vertex
fn vs_spring(@location(0) position: vec4<f32>) -> @builtin(position) vec4<f32> {
    return frame.proj * frame.view * vec4<f32>(position.xyz, 1.0);
}

@fragment
fn fs_spring() -> @location(0) vec4<f32> {
    return vec4<f32>(srgb_to_linear(frame.spring_color.rgb), 1.0);
}
