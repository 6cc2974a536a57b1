#!/usr/bin/env bash
# Training throughput, side by side on the same data, threads and torch: the Python reference
# (bench/seq2seq_reference.py, the notebook's model and loop) and `luong train` with the identical
# configuration (same split, vocabularies and batch order, the notebook's per-step loss average, no
# dev split). Prints both tokens/s (the last epoch's), the ratio, and both losses per epoch. Extra
# arguments go to both (--hidden, --embed, --batch, --layers, --bidirectional, --train-size ...).
#
#   bench/train_vs_python.sh [EPOCHS=3] [THREADS=2] [-- EXTRA ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-3}
threads=${2:-2}
shift 2 || true
[[ ${1:-} == -- ]] && shift
luong=$(realpath "${LUONG:-build/luong}")
python=${LUONG_BENCH_PYTHON:-.venv/bin/python}
corpus=$(realpath ../shared/data/tatoeba-ara-eng/ara-eng.tsv)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" bench/seq2seq_reference.py --data "$corpus" --epochs "$epochs" --threads "$threads" "$@" > "$work/py.log"
"$luong" train --data "$corpus" --epochs "$epochs" --threads "$threads" --no-shuffle --dev-size 0 \
  --loss-average step "$@" --out "$work/run" 2> "$work/cpp.log"

py_rate=$(sed -nE 's/^epoch [0-9]+: .* ([0-9.]+) tok\/s$/\1/p' "$work/py.log" | tail -1)
cpp_rate=$(sed -nE 's/^epoch [0-9]+\/[0-9]+: .*, ([0-9.]+) tok\/s.*/\1/p' "$work/cpp.log" | tail -1)
echo "configuration: $* (epochs $epochs, threads $threads)"
echo "epoch  python-loss  luong-loss"
paste <(sed -nE 's/^epoch ([0-9]+): loss ([0-9.]+).*/\1 \2/p' "$work/py.log") \
      <(sed -nE 's/^epoch [0-9]+\/[0-9]+: train loss ([0-9.]+).*/\1/p' "$work/cpp.log") |
  awk '{printf "%5d  %11.4f  %10.4f\n", $1, $2, $3}'
echo "python reference: $py_rate target tok/s (last epoch)"
echo "luong train     : $cpp_rate target tok/s (last epoch)"
printf 'speed-up: %.2fx\n' "$(echo "$cpp_rate / $py_rate" | bc -l)"
