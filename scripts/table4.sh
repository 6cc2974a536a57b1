#!/usr/bin/env bash
# The shape of Luong et al.'s Table 4 at the recipe's sizes: every score (dot, general, concat,
# location) with global, local-m and local-p attention, for both decoders, everything else the recipe
# (scripts/recipe.sh), per direction and seed. Prints the grid of test BLEU / chrF (beam 5, best
# dev-BLEU weights; the mean over the seeds that have run) as Markdown. A run whose directory holds a
# finished evaluation is reused, so the grid can be filled over several sittings; cells not run yet
# print "-".
#
#   scripts/table4.sh [SEEDS="1"] [DIRECTIONS="ar-en en-ar"] [DECODERS="luong bahdanau"]
#
# Two protocols, each in its own directory so that their cells never share a grid:
#   TABLE4_EPOCHS=N  every cell trains exactly N epochs, as the paper compares its variants (after the
#                    same training, whatever each costs); the result does not depend on the machine's
#                    speed or load, so TABLE4_JOBS=J runs J cells at once, each on nproc / J threads.
#   otherwise        every cell trains for RECIPE_SECONDS (default 450, the recipe's budget) on all
#                    cores, one at a time: what each variant reaches in the same time.
# TABLE4_PRINT_ONLY=1 prints what has run without training.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-1}
directions=${2:-ar-en en-ar}
decoders=${3:-luong bahdanau}
scores=(dot general concat location)
attentions=(global local-m local-p)
parallel=1 threads="" budget=()
if [[ -n ${TABLE4_EPOCHS:-} ]]; then
  root=runs/table4-${TABLE4_EPOCHS}ep
  parallel=${TABLE4_JOBS:-1}
  threads=$(( $(nproc) / parallel > 0 ? $(nproc) / parallel : 1 ))
  budget=(--epochs "$TABLE4_EPOCHS" --max-time 0 --threads "$threads")
else
  root=runs/table4-${RECIPE_SECONDS:-450}s
fi
mkdir -p "$root"

attention_flags() {  # ATTENTION SCORE -> luong train flags
  if [[ $1 == global ]]; then echo "--attention $2"; else echo "--attention $1 --score $2"; fi
}

if [[ -z ${TABLE4_PRINT_ONLY:-} ]]; then
  for direction in $directions; do
    for seed in $seeds; do
      for decoder in $decoders; do
        for attention in "${attentions[@]}"; do
          for score in "${scores[@]}"; do
            out=$root/$direction-s$seed-$decoder-$attention-$score
            [[ -s $out.json ]] && continue
            # The recipe itself is the Luong decoder's global/general cell (scripts/recipe-seeds.sh).
            if [[ -z ${TABLE4_EPOCHS:-} && $decoder/$attention/$score == luong/global/general &&
                  ${RECIPE_SECONDS:-450} == 450 && -s runs/recipe/$direction-s$seed.json ]]; then
              cp "runs/recipe/$direction-s$seed.json" "$out.json"
              continue
            fi
            while (($(jobs -rp | wc -l) >= parallel)); do wait -n || true; done
            (
              # shellcheck disable=SC2046
              LUONG_THREADS=$threads scripts/recipe.sh "$direction" "$seed" "$out" --decoder "$decoder" \
                $(attention_flags "$attention" "$score") "${budget[@]}" > "$out.json.tmp" &&
                mv "$out.json.tmp" "$out.json" && echo "table4: $out done" >&2
            ) &
          done
        done
      done
    done
  done
  wait
fi

.venv/bin/python - "$root" "$seeds" "$directions" "$decoders" <<'PY'
import json, os, statistics, sys
root, seeds, directions, decoders = sys.argv[1], *[a.split() for a in sys.argv[2:5]]
scores = ["dot", "general", "concat", "location"]
for direction in directions:
    print(f"\n{direction}, {root}, test BLEU / chrF (mean over the seeds run of {', '.join(seeds)}):\n")
    print("| decoder | attention | " + " | ".join(scores) + " |")
    print("|---|---|" + "---|" * len(scores))
    for decoder in decoders:
        for attention in ["global", "local-m", "local-p"]:
            cells = []
            for score in scores:
                runs = [f"{root}/{direction}-s{seed}-{decoder}-{attention}-{score}.json" for seed in seeds]
                results = [json.load(open(r)) for r in runs if os.path.exists(r) and os.path.getsize(r) > 0]
                if not results:
                    cells.append("-")
                    continue
                bleu = statistics.mean(r["bleu"] for r in results)
                chrf = statistics.mean(r["chrf"] for r in results)
                cells.append(f"{bleu:.2f} / {chrf:.2f}" + (f" ({len(results)})" if len(results) != len(seeds) else ""))
            print(f"| {decoder} | {attention} | " + " | ".join(cells) + " |")
PY
