#!/usr/bin/env bash
# OpenNMT-py 3.5.1 (RNN encoder-decoder, global attention with input feeding) on a luong run's exact
# split and sentencepiece models, with the recipe's sizes as far as OpenNMT-py has them, and the run's
# cell (GRU or LSTM, from its config.json): bidirectional encoder ("brnn": OpenNMT-py splits
# hidden_size between the two directions, 128 each, because its attention needs encoder and decoder
# of one size), a decoder of 256 with input feeding, general
# attention, embeddings 256, dropout 0.3, label smoothing 0.1, Adam 2e-3 (constant), clip 5, batch 64
# sentences, the last checkpoint; beam 5 with alpha 0.6 (its GNMT length penalty, as luong's) on the
# test split. Its own environment: .peers/opennmt (bench/peers/install.sh). Prints one JSON line: BLEU
# and chrF by sacreBLEU on the detokenised test output, training target tokens/s, epochs, seconds.
#
#   bench/peers/opennmt.sh LUONG_RUN_DIR DIRECTION(en-ar|ar-en) SEED EPOCHS OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
run=$(realpath "$1") direction=$2 seed=$3 epochs=$4 out=$5
python=${OPENNMT_PYTHON:-.peers/opennmt/bin/python}
corpus=$(realpath ../shared/data/tatoeba-ara-eng/ara-eng.tsv)
case $direction in
  en-ar) src=en trg=ar reverse=0 ;;
  ar-en) src=ar trg=en reverse=1 ;;
  *) echo "opennmt.sh: direction must be en-ar or ar-en" >&2; exit 2 ;;
esac
[[ -x $python ]] || { echo "opennmt.sh: $python is missing: run bench/peers/install.sh" >&2; exit 2; }
max_len=$(sed -nE 's/^ *"max_len": ([0-9]+).*/\1/p' "$run/config.json")
# The luong run's cell (GRU or LSTM), so that both sides train the same kind of model, unless
# OPENNMT_RNN_TYPE names the other.
rnn_type=${OPENNMT_RNN_TYPE:-$(sed -nE 's/^ *"cell": "([a-z]+)".*/\1/p' "$run/config.json" | tr a-z A-Z)}
[[ $rnn_type == GRU || $rnn_type == LSTM ]] || { echo "opennmt.sh: no cell in $run/config.json" >&2; exit 2; }
rm -rf "$out"
mkdir -p "$out/data"
out=$(realpath "$out")
"$python" bench/peers/make_splits.py "$corpus" "$run" "$max_len" "$reverse" "$out/data" "$src" "$trg" >&2

# luong's own pieces, applied once (OpenNMT-py's sentencepiece transform would do the same per batch).
"$python" - "$out/data" "$src" "$trg" "$run" <<'PY'
import sys
import sentencepiece as spm
data, src, trg, run = sys.argv[1:5]
models = {src: spm.SentencePieceProcessor(model_file=f"{run}/spm.source.model"),
          trg: spm.SentencePieceProcessor(model_file=f"{run}/spm.target.model")}
for split in ("train", "dev", "test"):
    for lang, model in models.items():
        with open(f"{data}/{split}.{lang}", encoding="utf-8") as f, \
             open(f"{data}/{split}.sp.{lang}", "w", encoding="utf-8") as g:
            for line in f:
                g.write(" ".join(model.encode(line.rstrip("\n"), out_type=str)) + "\n")
PY
sentences=$(wc -l < "$out/data/train.$src")
steps_per_epoch=$(( (sentences + 63) / 64 ))

cat > "$out/config.yaml" <<YAML
save_data: $out/run
src_vocab: $out/vocab.src
tgt_vocab: $out/vocab.tgt
src_vocab_size: 100000
tgt_vocab_size: 100000
src_seq_length: 200
tgt_seq_length: 200
overwrite: true
data:
  corpus_1: {path_src: $out/data/train.sp.$src, path_tgt: $out/data/train.sp.$trg}
  valid: {path_src: $out/data/dev.sp.$src, path_tgt: $out/data/dev.sp.$trg}
seed: $seed
model_type: text
encoder_type: brnn
decoder_type: rnn
rnn_type: $rnn_type
enc_layers: 1
dec_layers: 1
hidden_size: 256
word_vec_size: 256
global_attention: general
input_feed: 1
bridge: false
dropout: [0.3]
attention_dropout: [0.0]
label_smoothing: 0.1
param_init: 0.1
optim: adam
learning_rate: 0.002
start_decay_steps: 100000000
max_grad_norm: 5
batch_size: 64
batch_type: sents
# One bucket per pass over the corpus (the default, 262,144 examples, reads this corpus 24 times first).
bucket_size: $sentences
valid_batch_size: 64
normalization: tokens
accum_count: [1]
train_steps: $(( epochs * steps_per_epoch ))
valid_steps: $steps_per_epoch
save_checkpoint_steps: $(( epochs * steps_per_epoch ))
report_every: 25
save_model: $out/model
world_size: 1
num_workers: 0
YAML

export OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
# OpenNMT-py 3.5.1 predates torch 2.6, whose torch.load refuses pickled objects by default: its own
# checkpoints (vocabularies, options) need the old behaviour.
export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1
"$python" -m onmt.bin.build_vocab -config "$out/config.yaml" -n_sample -1 > "$out/vocab.stdout" 2>&1 ||
  { tail -20 "$out/vocab.stdout" >&2; exit 1; }
start=$(date +%s.%N)
"$python" -m onmt.bin.train -config "$out/config.yaml" > "$out/train.stdout" 2>&1 || { tail -20 "$out/train.stdout" >&2; exit 1; }
trained=$(date +%s.%N)
"$python" -m onmt.bin.translate -model "$out/model_step_$(( epochs * steps_per_epoch )).pt" -src "$out/data/test.sp.$src" \
  -output "$out/hyp.sp" -beam_size 5 -length_penalty wu -alpha 0.6 -max_length 60 -batch_size 64 \
  > "$out/test.stdout" 2>&1 || { tail -20 "$out/test.stdout" >&2; exit 1; }
"$python" - "$out" "$src" "$trg" "$run" "$start" "$trained" "$steps_per_epoch" "$rnn_type" <<'PY'
import json, re, sys
import sacrebleu
import sentencepiece as spm
out, src, trg, run, start, trained, steps_per_epoch = sys.argv[1:8]
start, trained, steps_per_epoch = float(start), float(trained), int(steps_per_epoch)
decoder = spm.SentencePieceProcessor(model_file=f"{run}/spm.target.model")
hyp = [decoder.decode(line.split()) for line in open(f"{out}/hyp.sp", encoding="utf-8").read().split("\n")[:-1]]
ref = open(f"{out}/data/test.{trg}", encoding="utf-8").read().split("\n")[:-1]
assert len(hyp) == len(ref), (len(hyp), len(ref))
with open(f"{out}/hyp.test", "w", encoding="utf-8") as f:
    f.write("\n".join(hyp) + "\n")
log = open(f"{out}/train.stdout", encoding="utf-8").read()
# "Step 25/ 870; acc: ...; xent: ...; lr: ...; sents: ...; bsz: ...; 123/ 456 tok/s; 12 sec;"
reports = [(int(step), int(tgt)) for step, tgt in re.findall(r"Step +(\d+)/ *\d+;.*?\d+/ *(\d+) tok/s", log)]
train_tokens = sum(len(line.split()) + 1 for line in open(f"{out}/data/train.sp.{trg}", encoding="utf-8"))
epochs = reports[-1][0] // steps_per_epoch if reports else 0
seconds = trained - start
validation = sum(float(s) for s in re.findall(r"Validation .*?took ([\d.]+) s", log))
print(json.dumps({"peer": "opennmt-py-3.5.1", "rnn_type": sys.argv[8], "bleu": round(sacrebleu.corpus_bleu(hyp, [ref]).score, 2),
                  "chrf": round(sacrebleu.corpus_chrf(hyp, [ref]).score, 2), "epochs": epochs,
                  "train_tokens_per_epoch": train_tokens,
                  "train_tokens_per_second_reported": round(sum(t for _, t in reports[1:]) / max(1, len(reports) - 1), 1),
                  "wall_seconds_with_validation": round(seconds, 1)}))
PY
