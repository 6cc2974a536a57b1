# Reading `luong train`'s log (its "epoch E/N: train loss L, ..., R tok/s" lines). Sourced by the
# bench scripts.

# The last epoch's training tokens/s.
luong_last_rate() { sed -nE 's/^epoch [0-9]+\/[0-9]+: .*, ([0-9.]+) tok\/s.*/\1/p' "$1" | tail -1; }

# The train loss of every epoch, on one line.
luong_losses() { sed -nE 's/^epoch [0-9]+\/[0-9]+: train loss ([0-9.]+).*/\1/p' "$1" | paste -sd' '; }
