#!/usr/bin/env bash
# Trains every attention x decoder combination of the README results table with the notebook's sizes
# (hidden 64, embed 28, batch 32, 3000 train / 300 dev / 300 test pairs of <= 12 tokens, Adam 1e-3,
# clip 1.0, 20 epochs) and prints the grid of docs/RESULTS.md's notebook section (also written to
# runs/experiments/table.md). experiments/*.json are these runs' configs.
#
#   scripts/run-experiments.sh [luong binary]      (about 15 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
luong=${1:-build/luong}
corpus=../shared/data/tatoeba-ara-eng/ara-eng.tsv
[[ -f $corpus ]] || { echo "run-experiments: $corpus not found" >&2; exit 2; }

mkdir -p runs/experiments
rows=()
for decoder in luong bahdanau; do
  for attention in dot general concat local-m local-p; do
    name="$attention-$decoder"
    out="runs/experiments/$name"
    rm -rf "$out"
    "$luong" train --data "$corpus" --attention "$attention" --decoder "$decoder" --epochs 20 --dev-size 300 \
      --out "$out" 2> "runs/experiments/$name.log" || { cat "runs/experiments/$name.log" >&2; exit 1; }
    sed "s|\"out\": \"runs/experiments/$name\"|\"out\": \"runs/$name\"|" "$out/config.json" > "experiments/$name.json"
    greedy=$("$luong" evaluate --model "$out" 2>/dev/null)
    beam=$("$luong" evaluate --model "$out" --beam 5 2>/dev/null)
    first=$(sed -n 2p "$out/loss.csv" | cut -d, -f2 | xargs printf %.4f)
    tenth=$(sed -n 11p "$out/loss.csv" | cut -d, -f2 | xargs printf %.4f)
    best=$(cut -d, -f4 "$out/loss.csv" | tail -n +2 | sort -g | tail -1)
    field() { sed -E "s/.*\"$1\":([-0-9.e]+).*/\1/" <<<"$2"; }
    rows+=("| $attention | $decoder | $first | $tenth | $best | $(printf %.2f "$(field bleu "$greedy")") | $(printf %.2f "$(field bleu "$beam")") | $(printf %.1f "$(field chrf "$greedy")") | $(printf %.1f "$(field perplexity "$greedy")") |")
    echo "run-experiments: $name done" >&2
  done
done

# The grid for docs/RESULTS.md's notebook section (the file holds other sections: it is not rewritten).
{
  echo "| attention | decoder | train loss ep. 1 | train loss ep. 10 | best dev BLEU | test BLEU greedy | test BLEU beam 5 | test chrF | test ppl |"
  echo "|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} > runs/experiments/table.md
cat runs/experiments/table.md
echo "run-experiments: wrote runs/experiments/table.md (the grid of docs/RESULTS.md's notebook section)" >&2
