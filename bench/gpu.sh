#!/usr/bin/env bash
# GPU benchmarks, luong beside the Python reference (bench/seq2seq_reference.py) on the same GPU, in
# the same run, on the same data: training target tokens/s at the notebook's sizes with batch 32 and
# 512, and at hidden 512 / embedding 512 with batch 256 in float32 and in bf16 (luong --precision bf16,
# the reference under torch.autocast), luong's with CUDA graphs (its default) and, where it says
# "eager", without; then greedy and beam-5 decoding sentences/s. Each training figure is the last epoch's (the first pays for cuDNN's and the
# allocator's warm-up). After the batch-512 pair, the profile of a few of its steps (--profile-steps).
#
#   bench/gpu.sh [luong binary] [device=cuda]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
luong=$(realpath "${1:-build/luong}")
device=${2:-cuda}
python=${LUONG_BENCH_PYTHON:-python3}
corpus=${LUONG_DATA:-}
for candidate in .gpu-data/ara-eng.tsv ../shared/data/tatoeba-ara-eng/ara-eng.tsv; do
  [[ -z $corpus && -f $candidate ]] && corpus=$(realpath "$candidate")
done
[[ -n $corpus ]] || { echo "bench/gpu.sh: no corpus (set LUONG_DATA or copy it to .gpu-data/ara-eng.tsv)"; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# shellcheck source=bench/luong_log.sh
source bench/luong_log.sh
table=()
luong_only=() python_only=()  # flags for one side only
luong_train() {  # ARGS...: luong's training as the pairs and the eager runs run it
  "$luong" train --data "$corpus" --device "$device" --no-shuffle --dev-size 0 --loss-average step --threads 16 "$@"
}
train_pair() {  # NAME EPOCHS ARGS...
  local name=$1 epochs=$2
  shift 2
  "$python" bench/seq2seq_reference.py --data "$corpus" --device "$device" --epochs "$epochs" "$@" "${python_only[@]}" \
    >"$work/$name.py.log" 2>&1
  luong_train --epochs "$epochs" "$@" "${luong_only[@]}" --out "$work/$name" >"$work/$name.luong.log" 2>&1
  local py cpp
  py=$(reference_rates "$work/$name.py.log" | tail -1 | cut -d" " -f1)
  cpp=$(luong_last_rate "$work/$name.luong.log")
  local ratio="?"
  [[ -n $py && -n $cpp ]] && ratio=$(awk -v a="$cpp" -v b="$py" 'BEGIN {printf "%.2fx", a / b}')
  table+=("$(printf '%-34s luong %10s tok/s   python %10s tok/s   %s' "$name" "${cpp:-?}" "${py:-?}" "$ratio")")
  echo "${table[-1]}"
  tail -n 2 "$work/$name.luong.log" "$work/$name.py.log"
  grep -h "CUDA graph" "$work/$name.luong.log" | head -3
}

# luong's training without CUDA graphs (--no-cuda-graphs: LibTorch's eager launches), for the table
eager_run() {  # NAME EPOCHS ARGS...
  local name=$1 epochs=$2
  shift 2
  luong_train --epochs "$epochs" --no-cuda-graphs "$@" --out "$work/$name" >"$work/$name.luong.log" 2>&1
  local cpp
  cpp=$(luong_last_rate "$work/$name.luong.log")
  table+=("$(printf '%-34s luong %10s tok/s   (no CUDA graphs)' "$name" "${cpp:-?}")")
  echo "${table[-1]}"
}

notebook=(--hidden 64 --embed 28)
train_pair "notebook-batch32" 2 "${notebook[@]}" --batch 32 --train-size 3000
eager_run "notebook-batch32-eager" 2 "${notebook[@]}" --batch 32 --train-size 3000
train_pair "notebook-batch512" 3 "${notebook[@]}" --batch 512 --train-size 10000
eager_run "notebook-batch512-eager" 3 "${notebook[@]}" --batch 512 --train-size 10000
# Where a batch-512 notebook step goes (the 1,000,000 tok/s target): the host's operations, then the
# GPU's kernels and its busy time against the step's.
luong_train --epochs 1 "${notebook[@]}" --batch 512 --train-size 10000 --profile-steps 6 --out "$work/profile512" \
  >"$work/profile512.log" 2>&1
grep -E "^profile|^ +[0-9.]+%" "$work/profile512.log" | head -45
train_pair "hidden512-embed512-batch256" 2 --hidden 512 --embed 512 --batch 256 --train-size 10000
luong_only=(--precision bf16) python_only=(--bf16)
train_pair "hidden512-embed512-batch256-bf16" 2 --hidden 512 --embed 512 --batch 256 --train-size 10000
eager_run "hidden512-embed512-batch256-bf16-eager" 2 --hidden 512 --embed 512 --batch 256 --train-size 10000 \
  --precision bf16
luong_only=() python_only=()

# Decoding: the notebook model trained above, over its 3000 training sources.
cut -f1 "$corpus" | head -3000 >"$work/sources.txt"
for beam in 1 5; do
  "$luong" translate --model "$work/notebook-batch32" --device "$device" --beam "$beam" --batch 256 --stats \
    <"$work/sources.txt" >/dev/null 2>"$work/decode.$beam.log"
  rate=$(sed -nE 's/.* ([0-9]+) sentences\/s.*/\1/p' "$work/decode.$beam.log")
  table+=("$(printf '%-34s luong %10s sentences/s' "decode beam $beam" "${rate:-?}")")
  echo "${table[-1]}"
done
echo
echo "== bench/gpu.sh on $device: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo cpu)"
printf '%s\n' "${table[@]}"
