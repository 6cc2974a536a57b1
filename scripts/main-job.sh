#!/usr/bin/env bash
# The main job: the notebook's model (GRU encoder, scaled dot attention, LuongDecoder with input
# feeding; hidden 64, embedding 28, batch 32, 3000 training pairs of <= 12 words) trained on the
# shared Tatoeba corpus, then test BLEU, a few translations and one attention trace with a heat map.
# Without the corpus it says where to get one and uses the built-in numbers corpus instead.
set -euo pipefail
cd "$(dirname "$0")/.."
luong=${LUONG:-build/luong}
out=${OUT:-runs/main}
corpus=../shared/data/tatoeba-ara-eng/ara-eng.tsv

if [[ -f $corpus ]]; then
  data=$corpus
  epochs=15
  samples=("I love you." "Tom is here." "Where is the station?" "My father does not eat much fruit.")
  sentence="We have to do this by ourselves."
else
  cat >&2 <<'MSG'
main-job: ../shared/data/tatoeba-ara-eng/ara-eng.tsv is not here. For real data, download the
  Tatoeba English-Arabic pairs (the "ara-eng" file of the Anki/Tatoeba sentence-pair exports,
  english<TAB>arabic<TAB>attribution) or OPUS-100 ar-en (opus.ar-en-train.en / .ar, use --format opus)
  and pass --data. Using the built-in corpus (English number words -> Arabic digits) now.
MSG
  data=builtin:numbers
  epochs=10
  samples=("three hundred forty-two" "nineteen" "seven thousand one hundred five")
  sentence="two thousand six hundred eighty-one"
fi

rm -rf "$out"
echo "== train: $data -> $out" >&2
"$luong" train --data "$data" --attention dot --decoder luong --hidden 64 --embed 28 --batch 32 \
  --epochs "$epochs" --max-len 12 --train-size 3000 --test-size 300 --dev-size 300 --out "$out"
echo "== evaluate (greedy, then beam 5) on the test split" >&2
"$luong" evaluate --model "$out"
"$luong" evaluate --model "$out" --beam 5
echo "== translate" >&2
printf '%s\n' "${samples[@]}" | "$luong" translate --model "$out" --beam 5 | paste <(printf '%s\n' "${samples[@]}") -
echo "== trace" >&2
"$luong" trace --model "$out" --sentence "$sentence" --heatmap "$out/attention.png" --csv "$out/attention.csv"
echo "== done: $out/{model.pt,loss.csv,loss.png,attention.png}" >&2
