#!/usr/bin/env bash
# GPU benchmark run for a machine with an NVIDIA GPU and no network: a prebuilt `msc bench`
# over cloth 1K..1M, Coulomb 4K..1M (and 20K) and DDEF 16K..1M, batched worlds, adjoint
# gradients of the 64K cloth, the peers the machine already has (a CUDA all-pairs kernel
# built with nvcc, JAX all-pairs), then one markdown table with the percentages of peak,
# the ratios and the targets. Runs end to end on a software adapter too (use --quick),
# skipping what needs CUDA or JAX with the reason.
#
# usage: benches/gpu.sh [--quick] [--only PARTS] [--msc PATH] [--out DIR] [--no-peers]
#                       [--peak-tflops X] [--bandwidth-gbs Y] [--rounds N] [--shapes LIST]
#                       [--variants DIR] [PATH_TO_MSC]
# --only takes a comma-separated subset of cloth,coulomb,ddef,worlds,adjoint,peers (all by
# default): `--only coulomb,ddef` is the DDEF targets and their all-pairs crossover.
# `--only gather` (not in the default) times the shapes of the DDEF near gather and far
# field (`msc bench --ddef-gather`, `--ddef-far`; not the 64-lane ones, 1.4-2.2x slower on
# an H100; cell/128/dual: two targets per invocation; auto: the default, the shape picked
# by the cells' load, cell/128/unrolled or cell/256/unrolled) and the default shapes under
# the `paper` variant (`--ddef-variant paper`: no `corrected` sums, so the difference is
# their cost) at 256K and 1M charges, m auto, rounds interleaved (--rounds N, default 3),
# and prints their table (benches/gather_table.py) instead of the main one; `--shapes`
# takes a comma-separated subset of its shapes (cell/256/unrolled always runs: the ratios
# are to it). `--only crowded` (not in the default either) runs the default shapes at 256K
# and 1M, m auto, on the charges uniform in the cube and crowded onto a sphere, a torus
# and a wavy sheet (`msc bench --cloud`), rounds interleaved, with the gather's time per
# near pair beside each (the same table).
# `--variants DIR` (alone, it implies `--only variants`) times variants of kernels against
# the built-in ones: each folder V of DIR holds <kernel>.wgsl bodies (as `MSC_KERNEL_FILES`
# reads them), run at 256K and 1M, m auto, the default shapes, once per round with the
# built-in kernels in between, rounds interleaved; the table marks them files:V[kernels].
# It needs msc built with `--features kernel-files` (a development build; the records then
# name the folder, `kernel_files`), and pipeline_stats reports the variants' registers.
# Beside `msc info` and nvidia-smi it writes kernel-stats.txt, the driver's register count
# and workgroup memory for every kernel (examples/pipeline_stats.rs, when built next to msc:
# `cargo build --release --example pipeline_stats`).
# Results go to $OUT if set, else to bench-results/<UTC date and time>; the table is printed
# and written to table.md there. $PYTHON picks the Python that has JAX (default python3);
# nvcc is taken from PATH, else $CUDA_HOME/bin or /usr/local/cuda/bin.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
quick=0
peers=1
only=cloth,coulomb,ddef,worlds,adjoint,peers
rounds=3
all_shapes=cell/256,packed/256,cell/128,packed/128,cell/256/unrolled,cell/128/unrolled
all_shapes+=,cell/128/dual,auto
all_shapes+=,far:direct/1,far:direct/2,far:direct/4,variant:paper
shapes=$all_shapes
msc=""
variants=""
out="${OUT:-}"
peak=()
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --no-peers) peers=0 ;;
        --msc) msc="$2"; shift ;;
        --out) out="$2"; shift ;;
        --peak-tflops|--bandwidth-gbs) peak+=("$1" "$2"); shift ;;
        --only) only="$2"; shift ;;
        --rounds) rounds="$2"; shift ;;
        --shapes) shapes="$2"; shift ;;
        --variants) variants="$2"; shift ;;
        -h|--help) sed -n '2,/^set -euo/{/^#/p}' "$0"; exit 0 ;;
        -*) echo "gpu.sh: unknown option $1" >&2; exit 2 ;;
        *) msc="$1" ;;
    esac
    shift
done

if [ -n "$variants" ]; then
    if [ "$only" = cloth,coulomb,ddef,worlds,adjoint,peers ]; then only=variants; fi
    if ! compgen -G "$variants/*/*.wgsl" > /dev/null; then
        echo "gpu.sh: --variants $variants holds no folder with a <kernel>.wgsl file" >&2
        exit 2
    fi
    variants="$(cd "$variants" && pwd)"
fi
for part in ${only//,/ }; do
    case "$part" in
        cloth|coulomb|ddef|worlds|adjoint|peers|gather|crowded) ;;
        variants) [ -n "$variants" ] || { echo "gpu.sh: --only variants needs --variants DIR" >&2; exit 2; } ;;
        *) echo "gpu.sh: --only takes cloth,coulomb,ddef,worlds,adjoint,peers,gather,crowded,variants, not '$part'" >&2
           exit 2 ;;
    esac
done
for shape in ${shapes//,/ }; do
    if [[ ",$all_shapes," != *",$shape,"* ]]; then
        echo "gpu.sh: --shapes takes a subset of $all_shapes, not '$shape'" >&2
        exit 2
    fi
done
[[ ",$shapes," == *",cell/256/unrolled,"* ]] || shapes="cell/256/unrolled,$shapes"
want() { [[ ",$only," == *",$1,"* ]]; }
want peers || peers=0

# --- msc --------------------------------------------------------------------------------
if [ -z "$msc" ]; then
    msc="$root/target/release/msc"
fi
if [ ! -x "$msc" ]; then
    echo "gpu.sh: no msc binary at $msc (build with 'cargo build --release' or pass its path)" >&2
    exit 1
fi
msc="$(cd "$(dirname "$msc")" && pwd)/$(basename "$msc")"
if [ -z "$out" ]; then
    out="$root/bench-results/$(date -u +%Y-%m-%dT%H%M%SZ)"
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
log="$out/run.log"
: > "$log"
say() { echo "$@" | tee -a "$log" >&2; }

# --- Vulkan loader and NVIDIA ICD -------------------------------------------------------
has_loader() { ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1'; }
if ! has_loader; then
    debs=("$root"/.gl/*.deb)
    if [ -e "${debs[0]}" ] && [ "$(id -u)" = 0 ]; then
        say "installing the Vulkan loader from .gl/"
        for f in "${debs[@]}"; do dpkg -x "$f" /; done
        ldconfig
    elif [ -e "${debs[0]}" ]; then
        say "no libvulkan.so.1 and not root: cannot unpack .gl/*.deb (run as root)"
    else
        say "no libvulkan.so.1 and no .gl/*.deb: msc may find no Vulkan adapter"
    fi
fi
info="$("$msc" info 2>&1 || true)"
nvidia_vulkan='^adapter [0-9]+: .*nvidia.*\(vulkan'
if ! grep -qiE "$nvidia_vulkan" <<<"$info"; then
    for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json \
               /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
        if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$icd" ]; then
            say "no NVIDIA adapter listed: retrying with VK_DRIVER_FILES=$icd"
            export VK_DRIVER_FILES="$icd"
            info="$("$msc" info 2>&1 || true)"
            break
        fi
    done
fi
if ! grep -qiE "$nvidia_vulkan" <<<"$info" && command -v nvidia-smi > /dev/null \
    && ! ldconfig -p 2>/dev/null | grep -q 'libGLdispatch\.so\.0'; then
    # NVIDIA's Vulkan driver (libGLX_nvidia) needs libglvnd; without it the loader reports
    # "Could not get 'vkCreateInstance'" and lists no NVIDIA adapter.
    say "no NVIDIA Vulkan adapter and no libGLdispatch.so.0: put libglvnd0 libegl1 libopengl0" \
        "libgl1 libglx0 libgles2 (.deb) in .gl/ beside libvulkan1"
fi
hardware=0
if grep -qiE "$nvidia_vulkan" <<<"$info"; then
    hardware=1
    # Never let msc fall back to a software adapter next to the GPU.
    export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}"
    export WGPU_ADAPTER_NAME="${WGPU_ADAPTER_NAME:-NVIDIA}"
elif grep -qi '^adapter [0-9]*: .*nvidia' <<<"$info"; then
    hardware=1
    say "warning: the NVIDIA adapter is not offered through Vulkan; msc picks its adapter itself"
fi

{
    echo "## msc info"
    echo "$info"
    echo "## nvidia-smi"
    if command -v nvidia-smi > /dev/null; then
        nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.max.sm,clocks.mem,memory.total,power.limit \
            --format=csv 2>&1 || nvidia-smi 2>&1 || true
    else
        echo "no nvidia-smi"
    fi
    echo "## date $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(uname -srm)"
} | tee "$out/machine.txt" | tee -a "$log" >&2
# --- what the driver compiled each kernel to (registers, workgroup memory) -------------
stats="$(dirname "$msc")/examples/pipeline_stats"
if [ -x "$stats" ]; then
    adapter=""
    [ "$hardware" = 1 ] && adapter=NVIDIA
    if MSC_STATS_ADAPTER="$adapter" MSC_STATS_VARIANTS="$variants" "$stats" \
            > "$out/kernel-stats.txt" 2>&1; then
        say "kernel statistics: kernel-stats.txt ($(head -n 1 "$out/kernel-stats.txt"))"
    else
        say "pipeline_stats failed: see kernel-stats.txt"
    fi
else
    say "no $stats (cargo build --release --example pipeline_stats): no kernel statistics"
fi
if [ "$hardware" = 0 ] && [ "$quick" = 0 ]; then
    say "warning: no NVIDIA adapter; a software adapter runs the full sizes for a long time" \
        "(--max-seconds skips the largest); --quick is meant for it"
fi

# --- msc bench --------------------------------------------------------------------------
if [ "$quick" = 1 ]; then
    cloth_sizes=1K,4K; coulomb_sizes=4K; k20=""; worlds=1,16; ddef_sizes=4K; ddef_samples=auto
    common=(--steps 3 --warmup 1 --profile-steps 1 --max-seconds 60)
    coulomb_common=("${common[@]}")
else
    cloth_sizes=1K,4K,16K,64K,256K,1M; coulomb_sizes=4K,16K,64K,256K,1M; k20=20K
    worlds=1,16,64,256,1024
    # DDEF at m = 1000 (the far field's sites) and at the scenes' default m (`auto`, which
    # the 256K and 1M targets are judged at): from 16K, where it must beat all-pairs.
    ddef_sizes=16K,64K,256K,1M; ddef_samples=auto,1000
    common=(--steps 20 --warmup 3 --profile-steps 5 --max-seconds 120)
    # A 1M Coulomb step is ~1e12 interactions: fewer timed steps and blocks keep it in minutes.
    coulomb_common=(--steps 5 --repeats 3 --warmup 2 --profile-steps 3 --max-seconds 120)
fi
bench() {
    local name="$1"; shift
    say "msc bench $* -> $name.jsonl"
    local rc=0
    "$msc" bench "$@" ${peak[@]+"${peak[@]}"} --out "$out/$name.jsonl" \
        > /dev/null 2> "$out/$name.stderr" || rc=$?
    if [ "$rc" != 0 ]; then
        say "msc bench failed (exit $rc): see $out/$name.stderr"
        tail -n 5 "$out/$name.stderr" >&2
        return 1
    fi
}
status=0
if want cloth; then
    bench msc-cloth --workload cloth --sizes "$cloth_sizes" --sweeps 20 "${common[@]}" || status=1
fi
if want coulomb; then
    bench msc-coulomb --workload coulomb --sizes "$coulomb_sizes" "${coulomb_common[@]}" || status=1
    if [ -n "$k20" ]; then
        bench msc-coulomb-20k --workload coulomb --sizes "$k20" "${common[@]}" || status=1
    fi
fi
# DDEF (every stage on the device) at the Coulomb cloud's sizes: the crossover with the
# all-pairs rows above, and the 256K and 1M targets.
if want ddef; then
    bench msc-ddef --workload ddef --sizes "$ddef_sizes" --samples "$ddef_samples" \
        "${coulomb_common[@]}" || status=1
fi
# The near gather's and far field's shapes against each other (each far shape with the
# default gather): every shape once per round, the rounds interleaved, so a drifting
# clock moves all shapes alike.
if want gather; then
    if [ "$quick" = 1 ]; then gather_sizes=4K; rounds=1; else gather_sizes=256K,1M; fi
    for round in $(seq 1 "$rounds"); do
        for shape in ${shapes//,/ }; do
            case "$shape" in
                far:*) flag=(--ddef-far "${shape#far:}") ;;
                variant:*) flag=(--ddef-variant "${shape#variant:}") ;;
                *) flag=(--ddef-gather "$shape") ;;
            esac
            name="${shape//\//-}"
            bench "gather-${name//:/-}-r$round" --workload ddef --sizes "$gather_sizes" \
                --samples auto "${flag[@]}" "${coulomb_common[@]}" || status=1
        done
    done
    "${PYTHON:-python3}" "$here/gather_table.py" "$out"/gather-*.jsonl | tee "$out/gather.md"
fi
# Crowded cells: the same charges uniform in the cube and on three surfaces (the default
# shapes), every cloud once per round, the rounds interleaved.
if want crowded; then
    if [ "$quick" = 1 ]; then crowded_sizes=4K; rounds=1; else crowded_sizes=256K,1M; fi
    for round in $(seq 1 "$rounds"); do
        for cloud in cube sphere torus sheet; do
            bench "crowded-$cloud-r$round" --workload ddef --sizes "$crowded_sizes" \
                --samples auto --cloud "$cloud" "${coulomb_common[@]}" || status=1
        done
    done
    "${PYTHON:-python3}" "$here/gather_table.py" "$out"/crowded-*.jsonl | tee "$out/crowded.md"
fi
# Variants of kernels (folders of <kernel>.wgsl bodies) against the built-in kernels: the
# built-in ones and each variant once per round, the rounds interleaved.
if want variants; then
    if [ "$quick" = 1 ]; then variant_sizes=4K; rounds=1; else variant_sizes=256K,1M; fi
    for round in $(seq 1 "$rounds"); do
        for v in main "$variants"/*/; do
            v="${v%/}"
            name="$(basename "$v")"
            if [ "$v" = main ]; then
                (unset MSC_KERNEL_FILES; bench "variant-main-r$round" --workload ddef \
                    --sizes "$variant_sizes" --samples auto "${coulomb_common[@]}") || status=1
                continue
            fi
            compgen -G "$v/*.wgsl" > /dev/null || continue
            MSC_KERNEL_FILES="$v" bench "variant-$name-r$round" --workload ddef \
                --sizes "$variant_sizes" --samples auto "${coulomb_common[@]}" || status=1
            if ! grep -q '"kernel_files":"' "$out/variant-$name-r$round.jsonl" 2>/dev/null; then
                say "msc ran its built-in kernels for variant $name: build it with" \
                    "'cargo build --release --features kernel-files'"
                exit 1
            fi
        done
    done
    "${PYTHON:-python3}" "$here/gather_table.py" "$out"/variant-*.jsonl | tee "$out/variants.md"
fi
# Only the shape, crowding or variant tables asked for: no main table.
if ! want cloth && ! want coulomb && ! want ddef && ! want worlds && ! want adjoint \
        && [ "$peers" = 0 ]; then
    echo "results: $out"
    exit "$status"
fi
# Batched worlds (torus and small cloth): batched against one solver per world in turn.
if want worlds; then
    bench msc-worlds --workload worlds --worlds "$worlds" "${common[@]}" || status=1
fi
# Adjoint gradients: the cloth's stiffness scale, 1000 block scales and every spring's
# stiffness over T steps (two-level checkpointing), each against a forward run, interleaved.
if [ "$quick" = 1 ]; then
    adjoint=(--sizes 1K --horizon 20 --repeats 1)
else
    adjoint=(--sizes 64K --horizon 200 --repeats 3)
fi
if want adjoint; then
    bench msc-adjoint --workload adjoint --checkpoint two-level "${adjoint[@]}" || status=1
fi

# --- peers ------------------------------------------------------------------------------
peer_sizes="$coulomb_sizes${k20:+,$k20}"
skip_peer() {  # name, reason
    say "$1 peer skipped: $2"
    local n
    for n in ${peer_sizes//,/ }; do
        printf '{"peer":"%s","workload":"coulomb","status":"skipped","n":%s,"reason":"%s"}\n' \
            "$1" "$(size_of "$n")" "$2"
    done > "$out/$1.jsonl"
}
size_of() {
    case "$1" in
        *K) echo $(( ${1%K} * 1024 )) ;;
        *M) echo $(( ${1%M} * 1048576 )) ;;
        *) echo "$1" ;;
    esac
}
if [ "$peers" = 0 ]; then
    skip_peer cuda "--no-peers"
    skip_peer jax "--no-peers"
else
    nvcc="$(command -v nvcc || true)"
    for c in "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" /usr/local/cuda/bin/nvcc; do
        if [ -z "$nvcc" ] && [ -x "$c" ]; then nvcc="$c"; fi
    done
    if [ -z "$nvcc" ]; then
        skip_peer cuda "no nvcc"
    elif [ "$hardware" = 0 ] && ! nvidia-smi > /dev/null 2>&1; then
        skip_peer cuda "no NVIDIA GPU"
    else
        cc="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')"
        arch="${cc:+-arch=sm_$cc}"
        say "$nvcc -O3 ${arch:--arch=native} benches/peers/nbody_cuda.cu"
        if "$nvcc" -O3 "${arch:--arch=native}" -o "$out/nbody_cuda" "$here/peers/nbody_cuda.cu" \
                >> "$log" 2>&1; then
            say "CUDA peer --sizes $peer_sizes"
            "$out/nbody_cuda" --sizes "$peer_sizes" > "$out/cuda.jsonl" 2>> "$log" \
                || { say "CUDA peer failed: see $log"; status=1; }
            "$out/nbody_cuda" --sizes 16K --check 8 > "$out/cuda-check.jsonl" 2>> "$log" \
                || { say "CUDA force check failed: see $log"; status=1; }
        else
            skip_peer cuda "nvcc failed (see run.log)"
            status=1
        fi
    fi
    py="${PYTHON:-$(command -v python3 || command -v python || true)}"
    if [ -z "$py" ]; then
        skip_peer jax "no python"
    else
        say "JAX peer --sizes $peer_sizes"
        "$py" "$here/peers/jax_coulomb.py" --sizes "$peer_sizes" > "$out/jax.jsonl" 2>> "$log" \
            || { say "JAX peer failed: see $log"; status=1; }
        if grep -q '"status": "ok"' "$out/jax.jsonl"; then
            "$py" "$here/peers/jax_coulomb.py" --sizes 16K --check 8 > "$out/jax-check.jsonl" \
                2>> "$log" || { say "JAX force check failed: see $log"; status=1; }
        else
            grep -h 'skipped' "$log" | tail -n 1 >&2 || true
        fi
    fi
fi

# --- table ------------------------------------------------------------------------------
table_py="${PYTHON:-$(command -v python3 || command -v python || true)}"
if [ -z "$table_py" ]; then
    echo "gpu.sh: no python3 for the table; the JSON lines are in $out" >&2
    exit 1
fi
files=("$out"/msc-*.jsonl "$out"/cuda.jsonl "$out"/jax.jsonl "$out"/cuda-check.jsonl "$out"/jax-check.jsonl)
existing=()
for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done
"$table_py" "$here/table.py" "${existing[@]}" ${peak[@]+"${peak[@]}"} | tee "$out/table.md"
echo
echo "results: $out"
exit "$status"
