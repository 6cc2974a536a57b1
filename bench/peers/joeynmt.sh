#!/usr/bin/env bash
# JoeyNMT 2.3.0 (RNN encoder-decoder, Luong attention with input feeding) on a luong run's exact
# split and sentencepiece models, with the recipe's sizes: bidirectional GRU encoder, GRU decoder,
# hidden and embeddings 256, dropout 0.3, label smoothing 0.1, Adam 2e-3 (constant: JoeyNMT's
# plateau scheduler passes `verbose`, which torch 2.11 removed; luong's plateau never halved within
# the budget either), batch 64, clip 5, best dev-BLEU checkpoint; beam 5, alpha 0.6 on the test split. Its own environment: .peers/joeynmt
# (scripts in bench/peers/install.sh). Prints one JSON line: BLEU and chrF by sacreBLEU on the
# detokenised test output, training target tokens/s, epochs, seconds.
#
#   bench/peers/joeynmt.sh LUONG_RUN_DIR DIRECTION(en-ar|ar-en) SEED EPOCHS OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
run=$(realpath "$1") direction=$2 seed=$3 epochs=$4 out=$5
python=${JOEYNMT_PYTHON:-.peers/joeynmt/bin/python}
corpus=$(realpath ../shared/data/tatoeba-ara-eng/ara-eng.tsv)
case $direction in
  en-ar) src=en trg=ar reverse=0 ;;
  ar-en) src=ar trg=en reverse=1 ;;
  *) echo "joeynmt.sh: direction must be en-ar or ar-en" >&2; exit 2 ;;
esac
max_len=$(sed -nE 's/^ *"max_len": ([0-9]+).*/\1/p' "$run/config.json")
rm -rf "$out"
mkdir -p "$out/data"
out=$(realpath "$out")
"$python" bench/peers/make_splits.py "$corpus" "$run" "$max_len" "$reverse" "$out/data" "$src" "$trg" >&2
steps_per_epoch=$(( ($(wc -l < "$out/data/train.$src") + 63) / 64 ))
steps_per_epoch=$(( (steps_per_epoch + 24) / 25 * 25 ))  # validation_freq must be a multiple of logging_freq

cat > "$out/config.yaml" <<YAML
name: "luong-peer-$direction"
joeynmt_version: "2.3.0"
data:
  train: "$out/data/train"
  dev: "$out/data/dev"
  test: "$out/data/test"
  dataset_type: "plain"
  src: {lang: "$src", level: "bpe", lowercase: False, max_length: 200, voc_min_freq: 1,
        tokenizer_type: "sentencepiece", tokenizer_cfg: {model_file: "$run/spm.source.model"}}
  trg: {lang: "$trg", level: "bpe", lowercase: False, max_length: 200, voc_min_freq: 1,
        tokenizer_type: "sentencepiece", tokenizer_cfg: {model_file: "$run/spm.target.model"}}
testing:
  beam_size: 5
  beam_alpha: 0.6
  batch_size: 64
  batch_type: "sentence"
  max_output_length: 60
  eval_metrics: ["bleu", "chrf"]
  sacrebleu_cfg: {tokenize: "13a"}
training:
  random_seed: $seed
  optimizer: "adam"
  learning_rate: 0.002
  learning_rate_min: 1.0e-6
  clip_grad_norm: 5.0
  batch_size: 64
  batch_type: "sentence"
  scheduling: "exponential"  # with decrease_factor 1: constant (its "plateau" passes verbose=, which torch 2.11 removed)
  decrease_factor: 1.0
  early_stopping_metric: "bleu"
  epochs: $epochs
  validation_freq: $steps_per_epoch
  logging_freq: 25
  label_smoothing: 0.1
  normalization: "tokens"
  model_dir: "$out/model"
  overwrite: True
  shuffle: True
  use_cuda: False
  print_valid_sents: []
  keep_best_ckpts: 1
model:
  initializer: "xavier_uniform"
  embed_initializer: "normal"
  embed_init_weight: 0.1
  bias_initializer: "zeros"
  tied_embeddings: False
  encoder:
    type: "recurrent"
    rnn_type: "gru"
    embeddings: {embedding_dim: 256, scale: False, dropout: 0.3}
    hidden_size: 256
    bidirectional: True
    dropout: 0.3
    num_layers: 1
  decoder:
    type: "recurrent"
    rnn_type: "gru"
    embeddings: {embedding_dim: 256, scale: False, dropout: 0.3}
    hidden_size: 256
    dropout: 0.3
    hidden_dropout: 0.3
    num_layers: 1
    input_feeding: True
    init_hidden: "bridge"
    attention: "luong"
YAML

export OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
start=$(date +%s.%N)
"$python" -m joeynmt train "$out/config.yaml" > "$out/train.stdout" 2>&1 || { tail -20 "$out/train.stdout" >&2; exit 1; }
trained=$(date +%s.%N)
"$python" -m joeynmt test "$out/config.yaml" --output-path "$out/hyp" > "$out/test.stdout" 2>&1 || { tail -20 "$out/test.stdout" >&2; exit 1; }
"$python" - "$out" "$src" "$trg" "$start" "$trained" <<'PY'
import json, re, sys
import sacrebleu
out, src, trg, start, trained = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
hyp = open(f"{out}/hyp.test", encoding="utf-8").read().split("\n")[:-1]
ref = open(f"{out}/data/test.{trg}", encoding="utf-8").read().split("\n")[:-1]
assert len(hyp) == len(ref), (len(hyp), len(ref))
log = open(f"{out}/model/train.log", encoding="utf-8").read()
epochs = re.findall(r"Epoch +(\d+), total training loss: [\d.]+, num\. of seqs: \d+, num\. of tokens: (\d+), ([\d.]+)\[sec\]", log)
# Each epoch's line carries that epoch's tokens and training seconds (validation excluded).
tokens = sum(int(t) for _, t, _ in epochs)
seconds = sum(float(s) for _, _, s in epochs)
print(json.dumps({"peer": "joeynmt-2.3.0", "bleu": round(sacrebleu.corpus_bleu(hyp, [ref]).score, 2),
                  "chrf": round(sacrebleu.corpus_chrf(hyp, [ref]).score, 2), "epochs": len(epochs),
                  "train_tokens_per_second": round(tokens / seconds, 1), "train_seconds": round(seconds, 1),
                  "wall_seconds_with_validation": round(trained - start, 1)}))
PY
