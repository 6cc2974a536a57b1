#!/usr/bin/env bash
# --precision bf16 against float32 for the same model, data and threads: PAIRS runs of each, in turn
# (float32, bf16, float32, ...), so that a drift in this shared machine's speed falls on both. Prints
# each run's last-epoch training tokens/s, each pair's ratio and the median ratio, and each run's
# train loss per epoch (the two start from the same weights and batches). Default model: the
# performance issue's (hidden 512, embed 512, 2-layer bidirectional encoder, 2-layer decoder,
# sentencepiece 8k per side) on 3000 pairs; extra arguments go to both runs.
#
#   bench/bf16_vs_float32.sh [PAIRS=3] [EPOCHS=2] [THREADS=2] [-- EXTRA TRAIN ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
positional=()  # the leading arguments before "--" (at most 3)
while (($# > 0)) && [[ $1 != -- ]] && ((${#positional[@]} < 3)); do positional+=("$1"); shift; done
[[ ${1:-} == -- ]] && shift
pairs=${positional[0]:-3}
epochs=${positional[1]:-2}
threads=${positional[2]:-2}
luong=$(realpath "${LUONG:-build/luong}")
corpus=$(realpath ../shared/data/tatoeba-ara-eng/ara-eng.tsv)
model=(--hidden 512 --embed 512 --layers 2 --bidirectional --tokenizer spm --spm-vocab 8000)
(($# > 0)) && model=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# shellcheck source=bench/luong_log.sh
source bench/luong_log.sh
ratios=()
for ((i = 1; i <= pairs; i++)); do
  for precision in float32 bf16; do
    "$luong" train --data "$corpus" --epochs "$epochs" --threads "$threads" --no-shuffle --dev-size 0 \
      --precision "$precision" "${model[@]}" --out "$work/$precision-$i" 2> "$work/$precision-$i.log" ||
      { tail -3 "$work/$precision-$i.log" >&2; exit 1; }
  done
  a=$(luong_last_rate "$work/float32-$i.log") b=$(luong_last_rate "$work/bf16-$i.log")
  ratios+=("$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", b / a}')")
  echo "pair $i: float32 $a tok/s, bf16 $b tok/s, bf16/float32 ${ratios[-1]}" \
    "(train loss per epoch: float32 $(luong_losses "$work/float32-$i.log"); bf16 $(luong_losses "$work/bf16-$i.log"))"
done
echo "configuration: ${model[*]} (epochs $epochs, threads $threads, $("$luong" --version | sed -n 's/^CPU: //p'))"
read -r middle lowest highest < <(printf '%s\n' "${ratios[@]}" | median_and_range)
printf 'bf16 / float32: median %.2fx (min %.2fx, max %.2fx, %d pairs)\n' "$middle" "$lowest" "$highest" "$pairs"
