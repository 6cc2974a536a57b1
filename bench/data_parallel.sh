#!/usr/bin/env bash
# Data-parallel training on this machine: one process with all the cores against N ranks
# (scripts/launch-local.sh, the cores split between them), the notebook's configuration on the
# shared corpus (built-in data when it is absent), the same global batch of 32. Prints tokens/s
# for each (over the epochs after the first), the ratio, the all-reduce time per step and both final
# losses.
#
#   bench/data_parallel.sh [EPOCHS=3] [RANKS=2] [luong binary]
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-3}
ranks=${2:-2}
luong=$(realpath "${3:-build/luong}")
corpus=../shared/data/tatoeba-ara-eng/ara-eng.tsv
[[ -f $corpus ]] && corpus=$(realpath "$corpus") || corpus=builtin:numbers
cores=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(--data "$corpus" --epochs "$epochs" --dev-size 0)

"$luong" train "${args[@]}" --threads "$cores" --out "$work/one" 2> "$work/one.log"
LUONG=$luong scripts/launch-local.sh "$ranks" "${args[@]}" --out "$work/many" 2> "$work/many.log"

# shellcheck source=bench/luong_log.sh
source bench/luong_log.sh
last_loss() { luong_losses "$1" | awk '{print $NF}'; }
allreduce=$(sed -nE 's/.*all-reduce ([0-9.]+) ms\/step.*/\1/p' "$work/many.log" | awk '{s += $1} END {printf "%.2f", s / NR}')
buckets=$(sed -nE 's/.*ms\/step \(([0-9]+) buckets?\).*/\1/p' "$work/many.log" | tail -1)
one=$(luong_steady_rate "$work/one.log")
many=$(luong_steady_rate "$work/many.log")
echo "corpus: $corpus, $epochs epochs, global batch 32, $cores cores"
echo "1 process, $cores threads      : $one target tok/s, final train loss $(last_loss "$work/one.log")"
echo "$ranks ranks, $((cores / ranks > 0 ? cores / ranks : 1)) thread(s) each : $many target tok/s, final train loss $(last_loss "$work/many.log")"
printf 'ratio %d ranks / 1 process: %.2fx\n' "$ranks" "$(echo "$many / $one" | bc -l)"
echo "all-reduce (gradients in $buckets bucket(s), plus waiting for the slower rank): $allreduce ms/step"
