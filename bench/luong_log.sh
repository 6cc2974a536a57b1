# shellcheck shell=bash
# Reading `luong train`'s log (its "epoch E/N: train loss L, ..., R tok/s" lines) and the Python
# reference's, and the median the scripts that repeat their runs report. Sourced by the bench scripts.

# The last epoch's training tokens/s.
luong_last_rate() { sed -nE 's/^epoch [0-9]+\/[0-9]+: .*, ([0-9.]+) tok\/s.*/\1/p' "$1" | tail -1; }

# Tokens/s over every epoch after the first (the first alone where there is one): at the notebook's
# sizes an epoch takes under a second, and one epoch's rate varies by 20% from run to run.
luong_steady_rate() {
  sed -nE 's/^epoch [0-9]+\/[0-9]+: .*, ([0-9.]+) tok\/s, ([0-9.]+) s(, .*)?$/\1 \2/p' "$1" | steady_rate
}
# "rate seconds" lines, one per epoch -> the rate over all but the first: their tokens over their
# seconds, or the mean rate where the log rounds every one of those epochs to "0.0 s".
steady_rate() {
  awk '{r[NR] = $1; s[NR] = $2}
       END {f = NR > 1 ? 2 : 1; for (i = f; i <= NR; ++i) {n += r[i] * s[i]; t += s[i]; m += r[i]}
            if (t > 0) printf "%.0f\n", n / t; else if (NR > 0) printf "%.0f\n", m / (NR - f + 1)}'
}

# The Python reference's epochs (bench/seq2seq_reference.py: "epoch E: loss L, S s, R tok/s") as
# "rate seconds" lines, for steady_rate or the last epoch's rate.
reference_rates() { sed -nE 's/^epoch [0-9]+: .*, ([0-9.]+) s, ([0-9.]+) tok\/s$/\2 \1/p' "$1"; }

# The train loss of every epoch, on one line.
luong_losses() { sed -nE 's/^epoch [0-9]+\/[0-9]+: train loss ([0-9.]+).*/\1/p' "$1" | paste -sd' '; }

# The median of numbers, one a line (the mean of the middle two for an even count).
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# "median lowest highest" of numbers, one a line.
median_and_range() {
  local numbers
  numbers=$(sort -g)
  echo "$(median <<<"$numbers") $(head -1 <<<"$numbers") $(tail -1 <<<"$numbers")"
}
