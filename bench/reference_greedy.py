#!/usr/bin/python3
"""Greedy decoding with the Python reference's model (the notebook's Encoder, DotAttention and
LuongDecoder, as in ../shared/reference/seq2seq_reference.py), loading the weights of a luong run so
that both sides translate with the same parameters. Sentences are decoded one at a time, as the
notebook's trace cell does (its DotAttention has no padding mask, so batching would change results).

    bench/reference_greedy.py RUN_DIR < sources.txt > translations.txt
Prints "python greedy: N sentences in S s, R sentences/s" on stderr.
"""
import re
import sys
import time

import torch
import torch.nn as nn


def tokenize(text):
    return re.findall(r"[\w']+|[^\w\s]", text.lower())


class Encoder(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden, padding_idx=0)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)

    def forward(self, src):
        return self.gru(self.embedding(src))


class LuongDecoder(nn.Module):
    def __init__(self, vocab, embed, hidden):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed, padding_idx=0)
        self.gru = nn.GRU(embed + hidden, hidden, batch_first=True)
        self.Wc = nn.Linear(2 * hidden, hidden)
        self.fc = nn.Linear(hidden, vocab)

    def forward(self, prev_word, prev_hidden, prev_htilde, enc):
        x = torch.cat((self.embedding(prev_word).unsqueeze(1), prev_htilde.unsqueeze(1)), dim=2)
        out, hidden = self.gru(x, prev_hidden)
        h_t = out.squeeze(1)
        scores = torch.bmm(h_t.unsqueeze(1), enc.transpose(1, 2)).squeeze(1) / enc.size(2) ** 0.5
        context = torch.bmm(torch.softmax(scores, dim=1).unsqueeze(1), enc).squeeze(1)
        htilde = torch.tanh(self.Wc(torch.cat((context, h_t), dim=1)))
        return self.fc(htilde), hidden, htilde


def main():
    run = sys.argv[1]
    torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
    source_vocab = {w: i for i, w in enumerate(open(f"{run}/source.vocab", encoding="utf-8").read().split("\n")[:-1])}
    target_words = open(f"{run}/target.vocab", encoding="utf-8").read().split("\n")[:-1]
    state = torch.load(f"{run}/best_model.pt")
    hidden = state["encoder.gru.weight_hh_l0"].shape[1]
    embed = state["decoder.embedding.weight"].shape[1]
    encoder = Encoder(len(source_vocab), hidden)
    decoder = LuongDecoder(len(target_words), embed, hidden)
    encoder.load_state_dict({k[8:]: v for k, v in state.items() if k.startswith("encoder.")})
    decoder.load_state_dict({k[8:]: v for k, v in state.items() if k.startswith("decoder.")})
    encoder.eval()
    decoder.eval()
    lines = sys.stdin.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out = []
    start = time.perf_counter()
    with torch.no_grad():
        for line in lines:
            ids = [source_vocab.get(w, 3) for w in tokenize(line)] + [2]
            enc, h = encoder(torch.tensor([ids]))
            prev, htilde, words = torch.tensor([1]), torch.zeros(1, hidden), []
            for _ in range(50):
                logits, h, htilde = decoder(prev, h, htilde, enc)
                prev = logits.argmax(dim=1)
                if prev.item() == 2:
                    break
                words.append(target_words[prev.item()])
            out.append(" ".join(words))
    elapsed = time.perf_counter() - start
    sys.stdout.write("\n".join(out) + "\n")
    print(f"python greedy: {len(lines)} sentences in {elapsed:.2f} s, {len(lines) / elapsed:.0f} sentences/s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
