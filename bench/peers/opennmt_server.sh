#!/usr/bin/env bash
# OpenNMT-py 3.5.1's own REST server (onmt_server: Flask under waitress) serving the model that
# bench/peers/opennmt.sh trained, with the luong run's sentencepiece models for its input and output
# and the search bench/peers/opennmt.sh tests with (beam 5, GNMT length penalty 0.6, at most 60
# tokens), on 127.0.0.1:PORT/translator; runs in the foreground until killed.
#
#   bench/peers/opennmt_server.sh OPENNMT_OUT_DIR LUONG_RUN_DIR PORT
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(realpath "$1") run=$(realpath "$2") port=$3
python=${OPENNMT_PYTHON:-.peers/opennmt/bin/python}
model=$(cd "$out" && ls model_step_*.pt | sort -t_ -k3 -n | tail -1)
[[ -n $model ]] || { echo "opennmt_server.sh: no model_step_*.pt in $out" >&2; exit 2; }
cat > "$out/server.json" <<JSON
{"models_root": "$out",
 "models": [{"id": 100, "model": "$model", "load": true, "timeout": -1,
             "opt": {"gpu": -1, "beam_size": 5, "length_penalty": "wu", "alpha": 0.6, "max_length": 60, "batch_size": 64},
             "tokenizer": {"src": {"type": "sentencepiece", "model": "$run/spm.source.model"},
                           "tgt": {"type": "sentencepiece", "model": "$run/spm.target.model"}}}]}
JSON
export OMP_NUM_THREADS=${THREADS:-2} MKL_NUM_THREADS=${THREADS:-2} TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1
exec "$python" -m onmt.bin.server --ip 127.0.0.1 --port "$port" --url_root /translator --model_config "$out/server.json"
