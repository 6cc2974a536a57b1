#!/usr/bin/env bash
# The recipe: the best configuration found on the shared Tatoeba corpus (docs/RESULTS.md says how it
# was found), declared once for the main job and the seed runs. Sourced, it defines recipe_flags;
# run, it trains one model and prints its test scores:
#
#   scripts/recipe.sh DIRECTION(en-ar|ar-en) SEED OUT [EXTRA TRAIN FLAGS...]
#   (LUONG_THREADS=N: the evaluation's threads, where the train flags set training's)
#
# The whole corpus: sentences of at most 25 words, 500 dev and 500 test pairs, every other pair for
# training; sentencepiece (unigram, 4000 pieces per side), a bidirectional LSTM encoder and a Luong
# decoder with input feeding (hidden 256), general attention, the paper's dropout 0.3, label
# smoothing 0.1, every weight drawn from U(-0.1, 0.1) (OpenNMT-py's initialisation), batches of
# sentences of similar length, Adam 2e-3 halved on a dev plateau, a budget of RECIPE_SECONDS
# (default 450) of training; test scores of the best dev-BLEU epoch's weights with beam 5 (alpha
# 0.6). What each choice gained is in docs/RESULTS.md.
recipe_corpus=${RECIPE_CORPUS:-../shared/data/tatoeba-ara-eng/ara-eng.tsv}
recipe_flags=(
  --max-len 25 --train-size 0 --dev-size 500 --test-size 500
  --tokenizer spm --spm-vocab 4000
  --cell lstm --bidirectional --hidden 256 --embed 256 --layers 1
  --attention general --decoder luong
  --dropout 0.3 --label-smoothing 0.1
  --param-init 0.1 --bucket
  --batch 64 --lr 0.002 --schedule plateau --plateau-patience 1 --clip 5
  --epochs 100 --max-time "${RECIPE_SECONDS:-450}"
)
recipe_search_flags=(--beam 5)

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  cd "$(dirname "$0")/.."
  (($# >= 3)) || { echo "usage: scripts/recipe.sh en-ar|ar-en SEED OUT [TRAIN FLAGS...]" >&2; exit 2; }
  direction=$1 seed=$2 out=$3
  shift 3
  case $direction in
    en-ar) reverse=() ;;
    ar-en) reverse=(--reverse) ;;
    *) echo "recipe: direction must be en-ar or ar-en, not '$direction'" >&2; exit 2 ;;
  esac
  luong=${LUONG:-build/luong}
  rm -rf "$out"
  mkdir -p "$(dirname "$out")"
  "$luong" train --data "$recipe_corpus" "${reverse[@]}" "${recipe_flags[@]}" --seed "$seed" --out "$out" "$@" \
    2> "$out.train.log" || { tail -5 "$out.train.log" >&2; exit 1; }
  threads=()
  [[ -n ${LUONG_THREADS:-} ]] && threads=(--threads "$LUONG_THREADS")
  "$luong" evaluate --model "$out" "${recipe_search_flags[@]}" "${threads[@]}" 2> "$out.eval.log"
fi
