#!/usr/bin/env bash
# Data-parallel training on this machine: N ranks of `luong train` meeting on 127.0.0.1.
#
#   scripts/launch-local.sh N [luong train options...]
#   scripts/launch-local.sh 2 --data ../shared/data/tatoeba-ara-eng/ara-eng.tsv --epochs 5 --out runs/dp
#
# Every rank gets torchrun's variables (WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT, LOCAL_RANK,
# LOCAL_WORLD_SIZE), so each takes an equal share of the cores; rank 0 writes the run directory and
# reports. If one rank fails, the others are stopped; Ctrl-C stops all of them at the same batch and
# rank 0 saves a checkpoint (continue with the same command plus --resume).
# LUONG names the binary (default: build/luong beside this script, else `luong` on PATH);
# MASTER_PORT picks the port (default: a free one).
set -euo pipefail

if [[ $# -lt 1 || ! $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 N [luong train options...]" >&2
  exit 2
fi
ranks=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
luong=${LUONG:-}
if [[ -z $luong ]]; then
  if [[ -x $root/build/luong ]]; then luong=$root/build/luong; else luong=$(command -v luong || true); fi
fi
if [[ -z $luong || ! -x $luong ]]; then
  echo "launch-local.sh: no luong binary (build it, or set LUONG=/path/to/luong)" >&2
  exit 2
fi

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 30000))
}
port=${MASTER_PORT:-$(free_port)}

pids=()
for ((rank = 0; rank < ranks; ++rank)); do
  WORLD_SIZE=$ranks RANK=$rank LOCAL_RANK=$rank LOCAL_WORLD_SIZE=$ranks MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$luong" train "$@" &
  pids+=($!)
done

stop_all() {
  for pid in "${pids[@]}"; do kill "-$1" "$pid" 2>/dev/null || true; done
}
trap 'stop_all INT' INT
trap 'stop_all TERM' TERM

# Wait for every rank; the first failure stops the rest and becomes the exit status.
status=0
live=("${pids[@]}")
while ((${#live[@]} > 0)); do
  set +e
  ended=
  wait -n -p ended "${live[@]}"
  code=$?
  set -e
  [[ -n ${ended:-} ]] || continue  # a trapped signal interrupted the wait
  remaining=()
  for pid in "${live[@]}"; do [[ $pid == "$ended" ]] || remaining+=("$pid"); done
  live=("${remaining[@]}")
  if ((code != 0 && status == 0)); then
    status=$code
    ((code == 130)) || stop_all TERM
  fi
done
exit $status
