"""The Python PyTorch reference model, for side-by-side benchmarks: a copy of
../shared/reference/seq2seq_reference.py (the seed notebook's model and training loop) extended with
what the comparisons need, so that both sides train the same model:

  --device cuda            run on the GPU (the loop is the notebook's: one decoder call per step)
  --layers N               stacked GRUs in the encoder and the decoder (luong's --layers)
  --bidirectional          a bidirectional encoder bridged to the decoder size by tanh(W [fw; bw])
                           (luong's --bidirectional)
  --bf16                   matrix products in bfloat16 under torch.autocast, float32 master weights
  --spm-source/--spm-target  sentencepiece models (luong's spm.source.model / spm.target.model)
  --max-batches N          stop each epoch after N batches (timing runs)

    python bench/seq2seq_reference.py --data ../shared/data/tatoeba-ara-eng/ara-eng.tsv --epochs 1 --threads 2

Prints one line per epoch, the model's floating-point operations per epoch, and a last line:
    flops: <per epoch> per epoch (<source tokens> source, <target tokens> target tokens)
    reference: <sec/epoch> s/epoch, <target tokens/s> tok/s, final loss <x>
"""

import argparse
import contextlib
import random
import re
import time

import torch
import torch.nn as nn
import torch.nn.utils.rnn as rnn_utils

PAD, SOS, EOS, UNK = "<pad>", "<sos>", "<eos>", "<unk>"


def tokenize(text):
    return re.findall(r"[\w']+|[^\w\s]", text.lower())


def load_pairs(path, max_len, n_train, n_test, seed, reverse):
    pairs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) < 2:
                continue
            en, ar = cols[0], cols[1]
            if reverse:
                en, ar = ar, en
            if 0 < len(tokenize(en)) <= max_len and 0 < len(tokenize(ar)) <= max_len:
                pairs.append((en, ar))
    random.Random(seed).shuffle(pairs)
    return pairs[:n_train], pairs[n_train:n_train + n_test]


def build_vocab(sentences):
    itos = [PAD, SOS, EOS, UNK] + sorted({w for s in sentences for w in s})
    return {w: i for i, w in enumerate(itos)}, itos


def batches(pairs, src_v, tgt_v, batch_size, device):
    for i in range(0, len(pairs), batch_size):
        chunk = pairs[i:i + batch_size]
        src = [torch.tensor([src_v.get(w, 3) for w in en] + [2]) for en, _ in chunk]
        tgt = [[tgt_v.get(w, 3) for w in ar] for _, ar in chunk]
        dec_in = [torch.tensor([1] + t) for t in tgt]
        dec_out = [torch.tensor(t + [2]) for t in tgt]
        yield (rnn_utils.pad_sequence(src, batch_first=True).to(device),
               rnn_utils.pad_sequence(dec_in, batch_first=True).to(device),
               rnn_utils.pad_sequence(dec_out, batch_first=True).to(device),
               torch.tensor([len(s) for s in src]))


class Encoder(nn.Module):
    def __init__(self, vocab, hidden, layers, bidirectional):
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden, padding_idx=0)
        self.gru = nn.GRU(hidden, hidden, num_layers=layers, batch_first=True, bidirectional=bidirectional)
        self.layers, self.hidden, self.bidirectional = layers, hidden, bidirectional
        if bidirectional:
            self.bridge = nn.Linear(2 * hidden, hidden)

    def forward(self, src, lengths):
        packed = rnn_utils.pack_padded_sequence(
            self.embedding(src), lengths, batch_first=True, enforce_sorted=False)
        out, hidden = self.gru(packed)
        out, _ = rnn_utils.pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        if self.bidirectional:
            batch = src.size(0)
            hidden = hidden.view(self.layers, 2, batch, self.hidden).permute(0, 2, 1, 3).reshape(
                self.layers, batch, 2 * self.hidden)
            out = torch.tanh(self.bridge(out)) * src.ne(0).unsqueeze(-1).to(out.dtype)
            hidden = torch.tanh(self.bridge(hidden))
        return out, hidden


class DotAttention(nn.Module):
    def forward(self, enc, h):
        scores = torch.bmm(h.unsqueeze(1), enc.transpose(1, 2)).squeeze(1) / enc.size(2) ** 0.5
        w = torch.softmax(scores, dim=1)
        return w, torch.bmm(w.unsqueeze(1), enc).squeeze(1)


class LuongDecoder(nn.Module):
    def __init__(self, vocab, embed, hidden, layers):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed, padding_idx=0)
        self.gru = nn.GRU(embed + hidden, hidden, num_layers=layers, batch_first=True)
        self.attention = DotAttention()
        self.Wc = nn.Linear(2 * hidden, hidden)
        self.fc = nn.Linear(hidden, vocab)

    def forward(self, prev_word, prev_hidden, prev_htilde, enc):
        x = torch.cat((self.embedding(prev_word).unsqueeze(1), prev_htilde.unsqueeze(1)), dim=2)
        out, hidden = self.gru(x, prev_hidden)
        h_t = out.squeeze(1)
        _, context = self.attention(enc, h_t)
        htilde = torch.tanh(self.Wc(torch.cat((context, h_t), dim=1)))
        return self.fc(htilde), hidden, htilde


def model_flops(args, src_tokens, tgt_tokens, attention_pairs, tgt_vocab):
    """Multiply-adds x 2 of one epoch's forward and backward (3x the forward: each product's input
    and weight gradients) on real tokens only: what the model needs, not what padding costs either
    side. GRU gates: 3 per unit."""
    h, e, layers = args.hidden, args.embed, args.layers
    directions = 2 if args.bidirectional else 1
    encoder = 0
    for layer in range(layers):
        inputs = h if layer == 0 else directions * h
        encoder += directions * (2 * inputs * 3 * h + 2 * h * 3 * h)
    encoder *= src_tokens
    if args.bidirectional:
        encoder += src_tokens * 2 * (2 * h) * h  # the bridge
    step = 2 * (e + h) * 3 * h + 2 * h * 3 * h + (layers - 1) * 2 * (2 * h * 3 * h) + 2 * (2 * h) * h
    decoder = tgt_tokens * (step + 2 * h * tgt_vocab) + attention_pairs * 4 * h
    return 3 * (encoder + decoder)


def spm_tokenizer(path):
    import sentencepiece  # only with --spm-source/--spm-target
    processor = sentencepiece.SentencePieceProcessor(model_file=path)
    return lambda text: processor.encode(text, out_type=str)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--embed", type=int, default=28)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-len", type=int, default=12)
    ap.add_argument("--train-size", type=int, default=3000)
    ap.add_argument("--test-size", type=int, default=300)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--bidirectional", action="store_true")
    ap.add_argument("--reverse", action="store_true")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--spm-source")
    ap.add_argument("--spm-target")
    ap.add_argument("--max-batches", type=int, default=0)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    train_text, _ = load_pairs(args.data, args.max_len, args.train_size, args.test_size, 0, args.reverse)
    tok_src = spm_tokenizer(args.spm_source) if args.spm_source else tokenize
    tok_tgt = spm_tokenizer(args.spm_target) if args.spm_target else tokenize
    train = [(tok_src(en), tok_tgt(ar)) for en, ar in train_text]
    src_v, _ = build_vocab([en for en, _ in train])
    tgt_v, _ = build_vocab([ar for _, ar in train])
    enc = Encoder(len(src_v), args.hidden, args.layers, args.bidirectional).to(device)
    dec = LuongDecoder(len(tgt_v), args.embed, args.hidden, args.layers).to(device)
    params = list(enc.parameters()) + list(dec.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)
    crit = nn.CrossEntropyLoss(ignore_index=0)
    autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if args.bf16 else contextlib.nullcontext

    total_time, total_tokens, loss_value = 0.0, 0, float("nan")
    counts = None
    for epoch in range(1, args.epochs + 1):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start, epoch_loss, n_batches, tokens = time.perf_counter(), 0.0, 0, 0
        src_tokens = attention_pairs = 0
        for src, dec_in, dec_out, lengths in batches(train, src_v, tgt_v, args.batch, device):
            opt.zero_grad()
            with autocast():
                enc_out, hidden = enc(src, lengths)
                htilde = torch.zeros(src.size(0), args.hidden, device=device, dtype=enc_out.dtype)
                loss = 0
                for t in range(dec_out.size(1)):
                    logits, hidden, htilde = dec(dec_in[:, t], hidden, htilde, enc_out)
                    loss = loss + crit(logits.float(), dec_out[:, t])
                loss = loss / dec_out.size(1)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            epoch_loss += loss.item()
            n_batches += 1
            tokens += int((dec_out != 0).sum())
            src_tokens += int(lengths.sum())
            attention_pairs += int((lengths * (dec_out != 0).sum(1).cpu()).sum())
            if args.max_batches and n_batches >= args.max_batches:
                break
        if device.type == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        total_time += elapsed
        total_tokens += tokens
        loss_value = epoch_loss / n_batches
        counts = (src_tokens, tokens, attention_pairs)
        print(f"epoch {epoch}: loss {loss_value:.4f}, {elapsed:.2f} s, {tokens / elapsed:.0f} tok/s", flush=True)
    flops = model_flops(args, *counts, len(tgt_v))
    print(f"flops: {flops:.6g} per epoch ({counts[0]} source, {counts[1]} target tokens)", flush=True)
    print(f"reference: {total_time / args.epochs:.3f} s/epoch, "
          f"{total_tokens / total_time:.0f} tok/s, final loss {loss_value:.4f}", flush=True)


if __name__ == "__main__":
    main()
