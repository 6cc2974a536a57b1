#!/usr/bin/env bash
# Training throughput, side by side on the same data, threads and torch: the Python reference
# (bench/seq2seq_reference.py, the notebook's model and loop) and `luong train` with the identical
# configuration (same split, vocabularies and batch order, the notebook's per-step loss average, no
# dev split). Prints both tokens/s (over every epoch after the first), the ratio, both losses per epoch and the
# model's GFLOP/s on each side (bench/seq2seq_reference.py counts the operations). Extra
# arguments go to both (--hidden, --embed, --batch, --layers, --bidirectional, --train-size ...).
# SPM_VOCAB=N tokenizes both sides with the sentencepiece models (N pieces per side) that luong trains
# on the split; LUONG_ARGS / PYTHON_ARGS go to one side only (say, --precision bf16 / --bf16).
# ROUNDS=N runs the two sides N times in turn (luong, Python, luong, ...) and prints every round's
# speed-up and their median: on a machine whose speed drifts by 10-20% between neighbouring runs,
# one round's ratio says little.
#
#   bench/train_vs_python.sh [EPOCHS=3] [THREADS=2] [-- EXTRA ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/luong_log.sh
source bench/luong_log.sh
positional=()  # the leading arguments before "--" (at most 2)
while (($# > 0)) && [[ $1 != -- ]] && ((${#positional[@]} < 2)); do positional+=("$1"); shift; done
[[ ${1:-} == -- ]] && shift
epochs=${positional[0]:-3}
threads=${positional[1]:-2}
luong=$(realpath "${LUONG:-build/luong}")
python=${LUONG_BENCH_PYTHON:-.venv/bin/python}
corpus=$(realpath ../shared/data/tatoeba-ara-eng/ara-eng.tsv)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

rounds=${ROUNDS:-1}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "train_vs_python.sh: ROUNDS must be a positive integer, not '$rounds'" >&2; exit 2; }
luong_tokenizer=()
[[ -z ${SPM_VOCAB:-} ]] || luong_tokenizer=(--tokenizer spm --spm-vocab "$SPM_VOCAB")
ratios=()
for ((round = 1; round <= rounds; ++round)); do
  run="$work/run$round"
  python_tokenizer=()  # the sentencepiece models that this round's luong run trained
  [[ -z ${SPM_VOCAB:-} ]] || python_tokenizer=(--spm-source "$run/spm.source.model" --spm-target "$run/spm.target.model")
  # shellcheck disable=SC2086
  "$luong" train --data "$corpus" --epochs "$epochs" --threads "$threads" --no-shuffle --dev-size 0 \
    --loss-average step "${luong_tokenizer[@]}" "$@" ${LUONG_ARGS:-} --out "$run" 2> "$work/cpp.log"
  # shellcheck disable=SC2086
  "$python" bench/seq2seq_reference.py --data "$corpus" --epochs "$epochs" --threads "$threads" \
    "${python_tokenizer[@]}" "$@" ${PYTHON_ARGS:-} > "$work/py.log"
  py_rate=$(reference_rates "$work/py.log" | steady_rate)
  cpp_rate=$(luong_steady_rate "$work/cpp.log")
  ratios+=("$(echo "$cpp_rate / $py_rate" | bc -l)")
  ((rounds == 1)) || printf 'round %d: python %s, luong %s target tok/s, speed-up %.2fx\n' "$round" "$py_rate" "$cpp_rate" "${ratios[-1]}"
done

echo "configuration: $* ${SPM_VOCAB:+(spm $SPM_VOCAB) }luong: ${LUONG_ARGS:-} python: ${PYTHON_ARGS:-} (epochs $epochs, threads $threads)"
echo "epoch  python-loss  luong-loss"
paste <(sed -nE 's/^epoch ([0-9]+): loss ([0-9.]+).*/\1 \2/p' "$work/py.log") \
      <(sed -nE 's/^epoch [0-9]+\/[0-9]+: train loss ([0-9.]+).*/\1/p' "$work/cpp.log") |
  awk '{printf "%5d  %11.4f  %10.4f\n", $1, $2, $3}'
span="epochs 2-$epochs"
((epochs > 1)) || span="epoch 1"
((rounds == 1)) || span="$span, the last round"
echo "python reference: $py_rate target tok/s ($span)"
echo "luong train     : $cpp_rate target tok/s ($span)"
if ((rounds == 1)); then
  printf 'speed-up: %.2fx\n' "${ratios[0]}"
else
  read -r middle lowest highest < <(printf '%s\n' "${ratios[@]}" | median_and_range)
  printf 'speed-up: %.2fx, the median of %d rounds in turn (%.2f-%.2fx)\n' "$middle" "$rounds" "$lowest" "$highest"
fi
# Both trained the same tokens, so the model's operations per epoch (the reference's count) over each
# side's epoch time: the rate of useful arithmetic.
flops=$(sed -nE 's/^flops: ([0-9.e+]+) per epoch \([0-9]+ source, ([0-9]+) target tokens\)$/\1 \2/p' "$work/py.log")
if [[ -n $flops ]]; then
  read -r per_epoch tokens <<<"$flops"
  awk -v f="$per_epoch" -v n="$tokens" -v p="$py_rate" -v c="$cpp_rate" \
    'BEGIN {printf "model arithmetic: %.3g GFLOP per epoch; python %.1f GFLOP/s, luong %.1f GFLOP/s\n", f / 1e9, f * p / n / 1e9, f * c / n / 1e9}'
fi
