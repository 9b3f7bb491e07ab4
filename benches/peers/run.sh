#!/usr/bin/env bash
# Peer benchmarks: msc and other solvers on the very same `msc bench` workloads, one table.
# Creates a Python venv (in the cargo target dir) with the peers' packages, builds msc and
# the workload exporter, then runs peers.py. Arguments go to peers.py (see --help), e.g.
#   benches/peers/run.sh --rounds 5 --workloads coulomb:4K,coulomb:16K,cloth:16K,cloth:64K
# Threads: RAYON_NUM_THREADS for msc, PEER_THREADS for the peers (Taichi's
# cpu_max_num_threads); set both to compare at a given thread count.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
venv="$target/peers-venv"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    "$venv/bin/pip" install --quiet "taichi==1.7.*" numpy
fi
(cd "$root" && cargo build --quiet --release --bin msc --example peer_workload)
exec "$venv/bin/python" "$root/benches/peers/peers.py" \
    --msc "$target/release/msc" --exporter "$target/release/examples/peer_workload" "$@"
