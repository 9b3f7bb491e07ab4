// The adjoint kernels' (gpu::kernels::adjoint, adjoint_kicks, adjoint_lg) mode bits. The
// physics of each kernel stays in its own file.

// disp.mode bits (gpu::kernels::adjoint::AdjointBit).
const ADJ_STIFFNESS: u32 = 1u;
const ADJ_MASSES: u32 = 2u;
const ADJ_CHARGES: u32 = 4u;
const ADJ_EXTERNALS: u32 = 8u;
const ADJ_FIELD: u32 = 16u;
const ADJ_HALF_KICK: u32 = 32u;
const ADJ_LATER: u32 = 64u;

// Whether row i (props pr) has the field's transposed Jacobian in bd: with ADJ_FIELD, on
// charged rows (tangent_coulomb's transposed mode wrote it there).
fn has_field_transpose(pr: vec4<f32>) -> bool {
    return (disp.mode & ADJ_FIELD) != 0u && pr.y != 0.0;
}
