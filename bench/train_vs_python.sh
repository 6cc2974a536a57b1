#!/usr/bin/env bash
# Training throughput, side by side on the same data and threads: the Python reference
# (../shared/reference/seq2seq_reference.py, at its best setting OPENBLAS_NUM_THREADS=1) and
# `luong train` with the identical configuration (same split, vocabularies and batch order, the
# notebook's per-step loss average, no dev split). Prints both tokens/s, the ratio, and both losses
# per epoch.
#
#   bench/train_vs_python.sh [EPOCHS=3] [THREADS=2] [luong binary]
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-3}
threads=${2:-2}
luong=$(realpath "${3:-build/luong}")
corpus=$(realpath ../shared/data/tatoeba-ara-eng/ara-eng.tsv)
reference=$(realpath ../shared/reference/seq2seq_reference.py)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

OPENBLAS_NUM_THREADS=1 /usr/bin/python3 "$reference" --data "$corpus" --epochs "$epochs" --threads "$threads" \
  > "$work/py.log"
"$luong" train --data "$corpus" --epochs "$epochs" --threads "$threads" --no-shuffle --dev-size 0 \
  --loss-average step --out "$work/run" 2> "$work/cpp.log"

py_rate=$(sed -nE 's/^reference: .* ([0-9.]+) tok\/s.*/\1/p' "$work/py.log")
cpp_rate=$(sed -nE 's/^epoch [0-9]+\/[0-9]+: .*, ([0-9.]+) tok\/s.*/\1/p' "$work/cpp.log" | awk '{s += $1} END {printf "%.0f", s / NR}')
echo "epoch  python-loss  luong-loss"
paste <(sed -nE 's/^epoch ([0-9]+): loss ([0-9.]+).*/\1 \2/p' "$work/py.log") \
      <(sed -nE 's/^epoch [0-9]+\/[0-9]+: train loss ([0-9.]+).*/\1/p' "$work/cpp.log") |
  awk '{printf "%5d  %11.4f  %10.4f\n", $1, $2, $3}'
echo "python reference: $py_rate target tok/s (mean over $epochs epochs, $threads threads, OPENBLAS_NUM_THREADS=1)"
echo "luong train     : $cpp_rate target tok/s (mean of per-epoch rates, $threads threads)"
printf 'speed-up: %.2fx\n' "$(echo "$cpp_rate / $py_rate" | bc -l)"
