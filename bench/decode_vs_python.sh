#!/usr/bin/env bash
# Decoding throughput on a run's 300-sentence test split (repeated REPEAT times): `luong translate`
# greedy and beam 5 against the Python reference model's greedy loop (bench/reference_greedy.py) with
# the same weights. Also checks that greedy C++ and Python produce the same translations.
#
#   bench/decode_vs_python.sh RUN_DIR [REPEAT=10] [THREADS=2] [luong binary]
set -euo pipefail
cd "$(dirname "$0")/.."
run=$(realpath "$1")
repeat=${2:-10}
threads=${3:-2}
luong=$(realpath "${4:-build/luong}")
python=${LUONG_BENCH_PYTHON:-$PWD/.venv/bin/python}   # the torch that luong links (not realpath: a venv's python is a symlink)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cut -f1 "$run/test.tsv" > "$work/test.src"
for ((i = 0; i < repeat; i++)); do cat "$work/test.src"; done > "$work/src"
n=$(wc -l < "$work/src")

# The reference loads the run's best model, which only a run with a dev split writes.
[[ -f "$run/best_model.pt" ]] || { echo "decode_vs_python: $run has no best_model.pt (train it with a dev split)" >&2; exit 1; }
"$python" bench/reference_greedy.py "$run" "$threads" < "$work/test.src" > "$work/py.txt" 2> "$work/py.log" ||
  { echo "decode_vs_python: the Python reference failed:" >&2; tail -3 "$work/py.log" >&2; exit 1; }
"$luong" translate --model "$run" --threads "$threads" < "$work/test.src" > "$work/cpp.txt"
# luong's output is detokenised and truecased; compare both as the notebook's tokens.
same=$("$python" -c '
import re, sys
tokens = lambda line: re.findall(r"[\w'"'"']+|[^\w\s]", line.lower())
py, cpp = (open(f, encoding="utf-8").read().split("\n") for f in sys.argv[1:3])
print(sum(tokens(a) == tokens(b) for a, b in zip(py, cpp) if a or b))' "$work/py.txt" "$work/cpp.txt")
echo "greedy translations identical to Python's: $same of $(wc -l < "$work/test.src")"

timed() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
"$python" bench/reference_greedy.py "$run" "$threads" < "$work/src" > /dev/null 2> "$work/py.log"
py=$(sed -nE 's/.* ([0-9]+) sentences\/s/\1/p' "$work/py.log")
# luong twice: its own --stats line times the translation as Python's loop is timed (tokenising,
# search, detokenising; after loading), and the wall clock of the whole process adds start-up
# (loading LibTorch, about a second with Debian's build) and model loading.
stats() { sed -nE 's/.* ([0-9]+) sentences\/s.*/\1/p' "$1"; }
greedy=$(timed "$luong" translate --model "$run" --threads "$threads" --stats < "$work/src" 2> "$work/greedy.log")
beam=$(timed "$luong" translate --model "$run" --threads "$threads" --beam 5 --stats < "$work/src" 2> "$work/beam.log")
printf 'python greedy : %6d sentences/s (decoding loop)\n' "$py"
printf 'luong greedy  : %6d sentences/s (decoding loop), %6.0f (whole process, %d sentences)\n' \
  "$(stats "$work/greedy.log")" "$(echo "$n / $greedy" | bc -l)" "$n"
printf 'luong beam 5  : %6d sentences/s (decoding loop), %6.0f (whole process)\n' \
  "$(stats "$work/beam.log")" "$(echo "$n / $beam" | bc -l)"
printf 'greedy speed-up: %.1fx (decoding loops), %.1fx (luong whole process)\n' \
  "$(echo "$(stats "$work/greedy.log") / $py" | bc -l)" "$(echo "$n / $greedy / $py" | bc -l)"
