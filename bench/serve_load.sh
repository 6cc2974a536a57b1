#!/usr/bin/env bash
# luong serve under load (wrk from Debian, bench/serve_load.lua), beside luong translate on the same
# sentences: for 1, 4, 16 and 64 concurrent clients posting 1 sentence a request, and 16 posting 8,
# the sentences per second, p50 / p99 / max latency, errors and the server's peak RSS; then a soak
# of SOAK_SECONDS at 16 clients with the server's RSS sampled every 10 s. With PEER=DIR (an output
# directory of bench/peers/opennmt.sh on the same run's split), OpenNMT-py's own server
# (bench/peers/opennmt_server.sh) under the same load, after luong's.
#
#   bench/serve_load.sh RUN_DIR   (BEAM=5 THREADS=2 SECONDS_EACH=20 SOAK_SECONDS=600 PORT=18181 PEER=)
set -euo pipefail
cd "$(dirname "$0")/.."
run=${1:?usage: bench/serve_load.sh RUN_DIR}
luong=${LUONG:-build/luong}
beam=${BEAM:-5} threads=${THREADS:-2} seconds=${SECONDS_EACH:-20} soak=${SOAK_SECONDS:-600} port=${PORT:-18181}
command -v wrk > /dev/null || { echo "serve_load.sh: wrk is missing (apt install wrk)" >&2; exit 2; }
work=$(mktemp -d)
server=
trap '[[ -n $server ]] && kill "$server" 2> /dev/null; rm -rf "$work"' EXIT
cut -f1 "$run/test.tsv" > "$work/sources.txt"
sentences=$(wc -l < "$work/sources.txt")

# The batch rate the server should approach: luong translate over the same sentences, 4 times over,
# timed as its --stats times it (the translation, after loading).
for _ in 1 2 3 4; do cat "$work/sources.txt"; done > "$work/four.txt"
"$luong" translate --model "$run" --beam "$beam" --alpha 0.6 --length-penalty gnmt --max-len 60 --threads "$threads" \
  --stats < "$work/four.txt" 2> "$work/stats.txt" > /dev/null
translate_rate=$(sed -nE 's/.* ([0-9.]+) sentences\/s.*/\1/p' "$work/stats.txt")
printf 'luong translate: %d sentences, beam %d, %d threads: %s sentences/s (--stats: after loading)\n' \
  $((4 * sentences)) "$beam" "$threads" "$translate_rate"

wait_for() {  # wait_for LOG TEXT: until the server's log says TEXT (or it died)
  until grep -q "$2" "$1"; do
    kill -0 "$server" 2> /dev/null || { cat "$1" >&2; exit 1; }
    sleep 0.2
  done
}
rss() { awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$server/status"; }
load() {  # load CLIENTS SENTENCES_PER_REQUEST SECONDS [VAR=VALUE...]: wrk's JSON line
  local clients=$1 per=$2 duration=$3
  shift 3
  env SOURCES="$work/sources.txt" SENTENCES="$per" BEAM="$beam" "$@" wrk -t "$((clients < 2 ? 1 : 2))" -c "$clients" \
    -d "${duration}s" --timeout 30s -s bench/serve_load.lua "http://127.0.0.1:$port" | tail -1
}
table() {  # table NAME [VAR=VALUE...]: the load shapes against the server now running
  local name=$1
  shift
  load 4 1 5 "$@" > /dev/null  # warm-up
  printf '\n%s\n\n| clients | sentences/request | sentences/s | vs translate | p50 ms | p99 ms | max ms | errors | peak RSS MiB |\n' "$name"
  printf '|---|---|---|---|---|---|---|---|---|\n'
  for shape in "1 1" "4 1" "16 1" "64 1" "16 8"; do
    read -r clients per <<< "$shape"
    python3 - "$(load "$clients" "$per" "$seconds" "$@")" "$clients" "$per" "$translate_rate" "$(rss)" <<'PY'
import json, sys
r = json.loads(sys.argv[1]); clients, per, translate, rss = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
rate = r["requests"] * per / r["seconds"]; l = r["latency_ms"]; errors = sum(r["errors"].values())
print(f"| {clients} | {per} | {rate:.1f} | {rate / translate:.2f}x | {l['p50']:.0f} | {l['p99']:.0f} | {l['max']:.0f} | {errors} | {rss} |")
PY
  done
}

"$luong" serve --model "$run" --port "$port" --threads "$threads" --http-threads 80 --beam "$beam" --alpha 0.6 \
  --length-penalty gnmt --max-len 60 --max-queue 4096 2> "$work/server.log" &
server=$!
wait_for "$work/server.log" "luong serve: ready"
table "luong serve (beam $beam, --threads $threads)"

if ((soak > 0)); then
  printf '\nsoak: %d s at 16 clients, 1 sentence a request; RSS (MiB) every 10 s:' "$soak"
  (load 16 1 "$soak" > "$work/soak.json") &
  soaker=$!
  while kill -0 "$soaker" 2> /dev/null; do
    printf ' %s' "$(awk '/VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$server/status")"
    sleep 10
  done
  printf '\nsoak result: %s\n' "$(cat "$work/soak.json")"
fi
printf 'luong serve access log: %s requests answered 200, %s otherwise\n' "$(grep -c ' 200 ' "$work/server.log")" \
  "$(grep -E 'luong serve: (POST|GET) ' "$work/server.log" | grep -vc ' 200 ' || true)"
kill "$server"
wait "$server" 2> /dev/null || true

if [[ -n ${PEER:-} ]]; then
  port=$((port + 1))  # luong's closed connections linger in TIME_WAIT, and waitress binds without SO_REUSEADDR
  THREADS=$threads bench/peers/opennmt_server.sh "$PEER" "$run" "$port" > "$work/peer.log" 2>&1 &
  server=$!
  until curl -sf -o /dev/null "http://127.0.0.1:$port/translator/health"; do  # it loads the model first
    kill -0 "$server" 2> /dev/null || { cat "$work/peer.log" >&2; exit 1; }
    sleep 1
  done
  table "OpenNMT-py 3.5.1's onmt_server (waitress, beam 5, OMP_NUM_THREADS=$threads)" ONMT_ID=100
fi
