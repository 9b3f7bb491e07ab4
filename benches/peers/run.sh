#!/usr/bin/env bash
# Peer benchmarks: msc (GPU and CPU backends) and other solvers on the very same `msc bench`
# workloads, one table. Creates a Python venv (in the cargo target dir) with the peers'
# packages (Taichi, NVIDIA Warp, numpy), builds msc and the workload exporter, then runs
# peers.py. Arguments go to peers.py (see --help), e.g.
#   benches/peers/run.sh --rounds 5 --workloads coulomb:4K,coulomb:16K,cloth:16K,cloth:64K
#   benches/peers/run.sh --msc-backends cpu --peers taichi-cpu,warp-cpu
# Without network the packages already in the venv are used; a peer whose package or
# device is missing is skipped with the reason in the table.
# Threads: RAYON_NUM_THREADS for msc, PEER_THREADS for the peers (Taichi's
# cpu_max_num_threads; Warp's CPU launches have no thread setting).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
venv="$target/peers-venv"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
stamp="$venv/.peers-installed"
if [ ! -e "$stamp" ]; then
    if "$venv/bin/pip" install --quiet --upgrade pip &&
        "$venv/bin/pip" install --quiet "taichi==1.7.*" warp-lang numpy; then
        touch "$stamp"
    else
        echo "note: pip could not install the peers (no network?); using what the venv has," \
            "missing peers are skipped" >&2
    fi
fi
if ! "$venv/bin/python" -c "import numpy" 2>/dev/null; then
    echo "error: the venv $venv has no numpy and pip could not install it" >&2
    exit 1
fi
(cd "$root" && cargo build --quiet --release --bin msc --example peer_workload)
exec "$venv/bin/python" "$root/benches/peers/peers.py" \
    --msc "$target/release/msc" --exporter "$target/release/examples/peer_workload" "$@"
