#!/usr/bin/env bash
# `luong translate` under load: 10k, 100k and 1M lines of mixed hostile input (empty lines, 1,000-word
# lines, punctuation only, scripts the model never saw, bidi controls, invalid UTF-8, control bytes,
# over-long lines past the 1 MiB cap, ordinary sentences) through one model, greedy. Checks that the
# output has exactly one line per input line and prints lines/s and peak resident memory per size.
#
#   bench/hostile_translate.sh RUN_DIR [SIZES="10000 100000 1000000"] [THREADS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
run=$1
sizes=${2:-10000 100000 1000000}
threads=${3:-2}
luong=$(realpath "${LUONG:-build/luong}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
largest=$(tr ' ' '\n' <<<"$sizes" | sort -n | tail -1)
python3 - "$largest" "$work/hostile" <<'PY'
import random, sys
count, path = int(sys.argv[1]), sys.argv[2]
rng = random.Random(7)
words = ["the", "station", "where", "is", "I", "love", "you", "Tom", "book", "."]
scripts = ["漢字かな交じり文", "Ελληνικά γράμματα", "देवनागरी लिपि", "😀🚀🔥", "𒀀𒀁𒀂", "\u202eevil\u202c", "مرحبا بالعالم"]
def line(i):
    kind = rng.randrange(10)
    if kind == 0: return b""
    if kind == 1: return " ".join(rng.choice(words) for _ in range(1000)).encode()
    if kind == 2: return "".join(rng.choice("!?.,;:()[]{}«»—") for _ in range(rng.randrange(1, 40))).encode()
    if kind == 3: return rng.choice(scripts).encode()
    if kind == 4: return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80))).replace(b"\n", b"")
    if kind == 5: return bytes(rng.choice([0, 1, 7, 8, 27, 127]) for _ in range(20))
    if kind == 6 and i % 5000 == 6: return b"a" * (1 << 20 | 5)   # past the 1 MiB cap, now and then
    return " ".join(rng.choice(words) for _ in range(rng.randrange(1, 12))).encode()
with open(path, "wb") as f:
    for i in range(count):
        f.write(line(i) + b"\n")
PY
echo "| input lines | output lines | seconds | lines/s | peak RSS (MiB) |"
echo "|---|---|---|---|---|"
for n in $sizes; do
  head -n "$n" "$work/hostile" > "$work/in"
  start=$(date +%s.%N)
  /usr/bin/time -f %M -o "$work/rss" "$luong" translate --model "$run" --threads "$threads" < "$work/in" > "$work/out" 2> "$work/err"
  end=$(date +%s.%N)
  out=$(wc -l < "$work/out")
  ((out == n)) || { echo "hostile_translate: $n lines in, $out out" >&2; exit 1; }
  awk -v n="$n" -v o="$out" -v s="$(echo "$end - $start" | bc)" -v r="$(cat "$work/rss")" \
    'BEGIN { printf "| %d | %d | %.1f | %.0f | %.0f |\n", n, o, s, n / s, r / 1024 }'
done
