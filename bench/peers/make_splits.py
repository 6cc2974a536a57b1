"""Writes a luong run's exact split for a peer toolkit: RUN/test.tsv and RUN/dev.tsv hold the held-out
pairs (source, target, corpus line); the training split is every other corpus pair that passes luong's
length filter (the notebook's word tokenizer, 1..MAX_LEN tokens on both sides). Prints the sizes.

  python make_splits.py CORPUS RUN_DIR MAX_LEN REVERSE(0|1) OUT_DIR SRC_LANG TRG_LANG
"""
import os
import re
import sys

corpus, run, max_len, reverse, out, src_lang, trg_lang = sys.argv[1:8]
max_len, reverse = int(max_len), reverse == "1"
word = re.compile(r"[\w']+|[^\w\s]")


def length(text):
    return len(word.findall(text.lower()))


def held_out(name):
    with open(os.path.join(run, name), encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t") for line in f]


os.makedirs(out, exist_ok=True)
splits = {"test": held_out("test.tsv"), "dev": held_out("dev.tsv")}
taken = {int(row[2]) for rows in splits.values() for row in rows}
train = []
with open(corpus, encoding="utf-8") as f:
    for number, line in enumerate(f, start=1):
        fields = line.rstrip("\n").split("\t")
        if len(fields) < 2 or number in taken:
            continue
        english, arabic = fields[0], fields[1]
        if not (1 <= length(english) <= max_len and 1 <= length(arabic) <= max_len):
            continue
        train.append((arabic, english) if reverse else (english, arabic))
splits["train"] = train
for name, rows in splits.items():
    with open(os.path.join(out, f"{name}.{src_lang}"), "w", encoding="utf-8") as s, \
         open(os.path.join(out, f"{name}.{trg_lang}"), "w", encoding="utf-8") as t:
        for row in rows:
            s.write(row[0] + "\n")
            t.write(row[1] + "\n")
print(" ".join(f"{name} {len(rows)}" for name, rows in splits.items()))
