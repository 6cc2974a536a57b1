#!/usr/bin/env bash
# The fused decoder kernels against the module path, per cell of the Table-4 grid at the recipe's
# sizes (scripts/recipe.sh: the whole corpus, Arabic -> English, seed 1, 2 threads): EPOCHS of the
# recipe for each cell, fused and then `--unfused`, in turn, so that a drift in this shared machine's
# speed falls on both. `--unfused` runs every module on LibTorch's ops (the encoder and the loss too),
# so its figure is the module path as a whole. Prints each run's last-epoch training tokens/s, the
# ratio, and each run's train loss per epoch (the same weights and batches on both sides).
# LUONG_BASELINE=PATH races another build of luong (say, the commit before a kernel change) instead:
# the second column is that binary's fused run.
#
#   bench/attention_kernels.sh [EPOCHS=1] [CELLS="luong/global/general luong/local-p/concat ..."]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/luong_log.sh
source bench/luong_log.sh
# shellcheck source=scripts/recipe.sh
source scripts/recipe.sh
epochs=${1:-1}
cells=${2:-luong/global/general luong/global/concat luong/global/location luong/local-m/general luong/local-p/general
              luong/local-p/concat bahdanau/global/general bahdanau/local-p/general}
luong=$(realpath "${LUONG:-build/luong}")
baseline=${LUONG_BASELINE:+$(realpath "$LUONG_BASELINE")}
second="module path"
[[ -n $baseline ]] && second="baseline ($LUONG_BASELINE)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

printf '| decoder | attention | score | fused tok/s | %s tok/s | ratio | train loss per epoch (fused; %s) |\n' "$second" "$second"
printf '|---|---|---|---|---|---|---|\n'
for cell in $cells; do
  IFS=/ read -r decoder attention score <<< "$cell"
  if [[ $attention == global ]]; then flags=(--attention "$score"); else flags=(--attention "$attention" --score "$score"); fi
  for path in fused unfused; do
    extra=() binary=$luong
    if [[ $path == unfused ]]; then
      if [[ -n $baseline ]]; then binary=$baseline; else extra=(--unfused); fi
    fi
    rm -rf "${work:?}/$path"
    "$binary" train --data "$recipe_corpus" --reverse "${recipe_flags[@]}" --seed 1 --threads 2 \
      --epochs "$epochs" --max-time 0 --decoder "$decoder" "${flags[@]}" "${extra[@]}" \
      --out "$work/$path" 2> "$work/$path.log" || { tail -3 "$work/$path.log" >&2; exit 1; }
  done
  a=$(luong_last_rate "$work/fused.log") b=$(luong_last_rate "$work/unfused.log")
  printf '| %s | %s | %s | %s | %s | %.2fx | %s; %s |\n' "$decoder" "$attention" "$score" "$a" "$b" \
    "$(awk -v a="$a" -v b="$b" 'BEGIN {print a / b}')" "$(luong_losses "$work/fused.log")" "$(luong_losses "$work/unfused.log")"
done
echo "(epochs $epochs, $("$luong" --version | sed -n 's/^CPU: //p'))"
