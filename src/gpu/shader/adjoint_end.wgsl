// The end of a reversal at a particle row, as the adjoint's per-particle kernels
// (adjoint_gather, adjoint_kick_gather, adjoint_lg_start) share it: Dirichlet rows and the
// field's transposed Jacobian. Reads its kernel's `props` and `bd`, writes its `lx` and
// `lv`.

// Whether row i is a free particle's. A pinned row is Dirichlet: its cotangents are
// dropped (lx_i = lv_i = 0) and its kernel does nothing more.
fn free_row(i: u32) -> bool {
    if (!is_row(i)) {
        return false;
    }
    if (is_pinned(props[i])) {
        lx[i] = vec4<f32>(0.0);
        lv[i] = vec4<f32>(0.0);
        return false;
    }
    return true;
}

// h (dF_field/dx)^T mu at row i, from bd[bd_b(i)] (where `adjoint`'s has_field_transpose).
fn field_transpose(i: u32) -> vec3<f32> {
    return world_dt(world_of(i)) * bd[bd_b(i)].xyz;
}
