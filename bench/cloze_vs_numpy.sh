#!/usr/bin/env bash
# The cloze head, whole processes side by side: `luong cloze` (4000 updates) against the numpy seed
# (../shared/reference/cloze_seed.py), alternating, RUNS times each; prints median wall seconds and
# their ratio, luong's own GFLOP/s line, and whether the two runs' CSVs are byte-identical.
#
#   bench/cloze_vs_numpy.sh [RUNS=5] [luong binary]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/luong_log.sh
source bench/luong_log.sh
runs=${1:-5}
luong=$(realpath "${2:-build/luong}")
seed=$(realpath ../shared/reference/cloze_seed.py)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

now() { date +%s.%N; }

: > "$work/cpp"; : > "$work/py"
for ((i = 0; i <= runs; i++)); do   # run 0 is a warm-up
  t0=$(now); (cd "$work" && "$luong" cloze --out "$work/cpp_out" > "$work/cpp.log"); t1=$(now)
  (cd "$work" && /usr/bin/python3 "$seed" > "$work/py.log"); t2=$(now)
  if ((i > 0)); then
    echo "$t1 - $t0" | bc >> "$work/cpp"
    echo "$t2 - $t1" | bc >> "$work/py"
  fi
done
cpp=$(median < "$work/cpp"); py=$(median < "$work/py")
echo "numpy seed : $(grep B-train "$work/py.log")"
echo "luong cloze: $(grep 'B-train\] initial' "$work/cpp.log")"
echo "luong cloze: $(grep 'updates in' "$work/cpp.log" | sed 's/\[B-train\] //')"
for csv in attention_loss.csv attention_weights.csv; do
  if cmp -s "$work/$csv" "$work/cpp_out/$csv"; then same=identical; else same=DIFFERENT; fi
  echo "$csv: luong's is $same to the seed's"
done
printf 'median wall time over %d runs: numpy %.3f s, luong %.3f s, speed-up %.1fx\n' "$runs" "$py" "$cpp" "$(echo "$py / $cpp" | bc -l)"
