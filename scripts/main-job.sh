#!/usr/bin/env bash
# The main job: the recipe (scripts/recipe.sh: the whole shared Tatoeba corpus, sentencepiece, a
# bidirectional LSTM encoder and a Luong decoder at hidden 256 with the paper's dropout, label
# smoothing, OpenNMT-py's U(-0.1, 0.1) initialisation and length-bucketed batches) trained Arabic ->
# English for about 7.5 minutes on 2 cores, then its test BLEU and chrF (greedy, then beam 5, with the
# best dev-BLEU epoch's weights), the first test sentences as it translates them, and one attention
# trace with a heat map. Without the corpus it says where to get one and trains on
# the built-in numbers corpus instead. The notebook's configuration: --config experiments/notebook.json.
#
#   scripts/main-job.sh            (OUT=runs/main, RECIPE_SECONDS=450, SEED=1)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/recipe.sh
luong=${LUONG:-build/luong}
out=${OUT:-runs/main}
seed=${SEED:-1}

rm -rf "$out"
mkdir -p "$(dirname "$out")"
if [[ -f $recipe_corpus ]]; then
  echo "== train: the recipe on $recipe_corpus, Arabic -> English -> $out" >&2
  "$luong" train --data "$recipe_corpus" --reverse "${recipe_flags[@]}" --seed "$seed" --out "$out"
  search=("${recipe_search_flags[@]}")
  # Sentences written for this README (not from the corpus).
  samples=("أين المحطة؟" "أنا أحبك." "توم هنا." "أبي لا يأكل الكثير من الفاكهة." "علينا أن نفعل هذا بأنفسنا."
           "هل تتكلم الإنجليزية؟" "الجو بارد اليوم." "أريد أن أشرب الماء.")
else
  cat >&2 <<'MSG'
main-job: ../shared/data/tatoeba-ara-eng/ara-eng.tsv is not here. For real data, download the
  Tatoeba English-Arabic pairs (the "ara-eng" file of the Anki/Tatoeba sentence-pair exports,
  english<TAB>arabic<TAB>attribution) or OPUS-100 ar-en (opus.ar-en-train.en / .ar, use --format opus)
  and pass --data. Using the built-in corpus (English number words -> Arabic digits) now.
MSG
  "$luong" train --data builtin:numbers --epochs 10 --out "$out"
  search=(--beam 5)
  samples=("three hundred forty-two" "nineteen" "seven thousand one hundred five")
fi

echo "== evaluate on the test split: greedy, then ${search[*]}" >&2
"$luong" evaluate --model "$out"
"$luong" evaluate --model "$out" "${search[@]}"

echo "== translate: the first test sentences (source | reference | luong)" >&2
head -8 "$out/test.tsv" | cut -f1 > "$out/sample.src"
head -8 "$out/test.tsv" | cut -f2 > "$out/sample.ref"
"$luong" translate --model "$out" "${search[@]}" < "$out/sample.src" > "$out/sample.hyp"
paste -d'\n' "$out/sample.src" "$out/sample.ref" "$out/sample.hyp" | awk '{ printf "%s%s\n", (NR % 3 == 1 ? "\n  source: " : NR % 3 == 2 ? "  ref:    " : "  luong:  "), $0 }'

echo "== translate: a few sentences of our own" >&2
printf '%s\n' "${samples[@]}" | "$luong" translate --model "$out" "${search[@]}" | paste <(printf '%s\n' "${samples[@]}") - | sed 's/^/  /'

echo "== trace" >&2
"$luong" trace --model "$out" --sentence "${samples[4]:-${samples[0]}}" --heatmap "$out/attention.png" \
  --csv "$out/attention.csv" > "$out/trace.txt"
tail -3 "$out/trace.txt"
echo "== done: $out/{model.pt,best_model.pt,loss.csv,loss.png,attention.png}" >&2
