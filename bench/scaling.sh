#!/usr/bin/env bash
# Training throughput for batch 32/128/512 x hidden 64/256/1024 (embedding 28, dot attention,
# LuongDecoder, the 3000-pair Tatoeba split, 1 epoch each after the first batch, 2 threads), with an
# estimate of achieved GFLOP/s against the measured rate of a large float32 product (the faster of
# MKL and oneDNN).
#
# FLOPs per target token, forward (multiply-add = 2): encoder GRU 12 H^2 per source token (x the
# source/target length ratio), decoder GRU 6 H (E + 2H), dot attention 4 S H, W_c 4 H^2, output
# 2 H V; training counts 3x forward. Padding is not counted, so the figures are lower bounds.
#
#   bench/scaling.sh [luong binary]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/luong_log.sh
source bench/luong_log.sh
luong=$(realpath "${1:-build/luong}")
python=${LUONG_BENCH_PYTHON:-$PWD/.venv/bin/python}   # the torch that luong links (not realpath: a venv's python is a symlink)
corpus=$(realpath ../shared/data/tatoeba-ara-eng/ara-eng.tsv)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The 2048x2048 float32 product on 2 threads through each library this LibTorch carries (MKL's sgemm,
# oneDNN's inner product on its own tensors, as luong's products use on AMD), timed by
# bench/matmul_rate.py's rate(); the faster is the peak.
read -r mkl_rate onednn_rate < <(cd bench && "$python" -c "
import torch, matmul_rate
onednn = matmul_rate.rate(2048, 2048, 2048, torch.float32, 2, 'onednn') if torch.backends.mkldnn.is_available() else 0.0
print(f'{matmul_rate.rate(2048, 2048, 2048, torch.float32, 2, \"mkl\"):.1f} {onednn:.1f}')")
peak=$(echo "if ($onednn_rate > $mkl_rate) $onednn_rate else $mkl_rate" | bc -l)
# Average lengths (with <eos>) of the training split, from the reference's own loader.
read -r src tgt < <(cd ../shared/reference && "$python" -c "
import seq2seq_reference as r
train, _ = r.load_pairs('$corpus', 12, 3000, 300, 0)
print(sum(len(e) + 1 for e, _ in train) / len(train), sum(len(a) + 1 for _, a in train) / len(train))")
echo "training split: $src source and $tgt target tokens per sentence (with <eos>)"
printf '2048x2048 float32 product through the same LibTorch, 2 threads: MKL %s, oneDNN %s GFLOP/s (the peak: %.1f)\n' "$mkl_rate" "$onednn_rate" "$peak"
echo
echo "| batch | hidden | target tok/s | GFLOP/s (est.) | % of the peak |"
echo "|---|---|---|---|---|"
for hidden in 64 256 1024; do
  for batch in 32 128 512; do
    out="$work/h$hidden-b$batch"
    "$luong" train --data "$corpus" --hidden "$hidden" --batch "$batch" --epochs 1 --dev-size 0 --threads 2 \
      --out "$out" 2> "$out.log"
    rate=$(luong_last_rate "$out.log")
    vocab=$(wc -l < "$out/target.vocab")
    gflops=$(echo "$rate * 3 * ($src / $tgt * 12 * $hidden^2 + 6 * $hidden * (28 + 2 * $hidden) + 4 * $src * $hidden + 4 * $hidden^2 + 2 * $hidden * $vocab) / 10^9" | bc -l)
    printf '| %d | %d | %.0f | %.1f | %.0f%% |\n' "$batch" "$hidden" "$rate" "$gflops" "$(echo "100 * $gflops / $peak" | bc -l)"
  done
done
