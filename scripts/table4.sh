#!/usr/bin/env bash
# The shape of Luong et al.'s Table 4 at the recipe's sizes: every score (dot, general, concat,
# location) with global, local-m and local-p attention, for both decoders, everything else the recipe
# (scripts/recipe.sh), per direction and seed. Prints the grid of test BLEU / chrF (beam 5, best
# dev-BLEU weights; the mean over the seeds that have run, with the BLEU's standard deviation over
# them) as Markdown. Cells not run yet print "-".
#
#   scripts/table4.sh [SEEDS="1"] [DIRECTIONS="ar-en en-ar"] [DECODERS="luong bahdanau"]
#
# Every finished cell appends one line (its scores, the commit luong was built from, the date) to a
# ledger kept in git, docs/table4/<protocol>.tsv, and a cell with a line there is not run again: the
# grid fills over several sittings and machines (runs/ is not kept), and the printed grid is the
# ledger's. Two protocols, each with its own ledger and run directory:
#   TABLE4_EPOCHS=N  every cell trains exactly N epochs, as the paper compares its variants (after the
#                    same training, whatever each costs); the result does not depend on the machine's
#                    speed or load, so TABLE4_JOBS=J runs J cells at once, each on nproc / J threads.
#   otherwise        every cell trains for RECIPE_SECONDS (default 450, the recipe's budget) on all
#                    cores, one at a time: what each variant reaches in the same time.
# TABLE4_PRINT_ONLY=1 prints the ledger's grid without training.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-1}
directions=${2:-ar-en en-ar}
decoders=${3:-luong bahdanau}
scores=(dot general concat location)
attentions=(global local-m local-p)
parallel=1 threads="" budget=()
if [[ -n ${TABLE4_EPOCHS:-} ]]; then
  protocol=${TABLE4_EPOCHS}ep
  parallel=${TABLE4_JOBS:-1}
  threads=$(( $(nproc) / parallel > 0 ? $(nproc) / parallel : 1 ))
  budget=(--epochs "$TABLE4_EPOCHS" --max-time 0 --threads "$threads")
else
  protocol=${RECIPE_SECONDS:-450}s
fi
root=runs/table4-$protocol
ledger=docs/table4/$protocol.tsv
mkdir -p "$root" docs/table4
if [[ ! -s $ledger ]]; then
  printf 'direction\tseed\tdecoder\tattention\tscore\tbleu\tchrf\tbuild\tdate\n' > "$ledger"
fi
# The source luong was built from (LUONG=path for another binary: say which in TABLE4_BUILD): the last
# commit that changed it, "-dirty" when the working tree differs.
sources=(CMakeLists.txt cmake include src models training evaluation data_pipeline run util)
build=${TABLE4_BUILD:-$(git log -1 --format=%h -- "${sources[@]}")}
[[ -n ${TABLE4_BUILD:-} ]] || git diff --quiet HEAD -- "${sources[@]}" || build+=-dirty

in_ledger() {  # DIRECTION SEED DECODER ATTENTION SCORE -> status 0 when the cell has a line
  awk -F'\t' -v key="$1 $2 $3 $4 $5" '$1" "$2" "$3" "$4" "$5 == key { found = 1 } END { exit !found }' "$ledger"
}

record() {  # EVALUATION_JSON DIRECTION SEED DECODER ATTENTION SCORE: appends the cell's line
  local scores
  scores=$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print("%.2f\t%.2f" % (r["bleu"], r["chrf"]))' "$1")
  # One short write per line: the cells that run at once append without interleaving.
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$2" "$3" "$4" "$5" "$6" "$scores" "$build" "$(date -u +%F)" >> "$ledger"
}

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
            in_ledger "$direction" "$seed" "$decoder" "$attention" "$score" && continue
            # The recipe itself is the Luong decoder's global/general cell (scripts/recipe-seeds.sh).
            if [[ -z ${TABLE4_EPOCHS:-} && $decoder/$attention/$score == luong/global/general &&
                  ${RECIPE_SECONDS:-450} == 450 && -s runs/recipe/$direction-s$seed.json ]]; then
              record "runs/recipe/$direction-s$seed.json" "$direction" "$seed" "$decoder" "$attention" "$score"
              continue
            fi
            while (($(jobs -rp | wc -l) >= parallel)); do wait -n || true; done
            (
              # shellcheck disable=SC2046
              LUONG_THREADS=$threads scripts/recipe.sh "$direction" "$seed" "$out" --decoder "$decoder" \
                $(attention_flags "$attention" "$score") "${budget[@]}" > "$out.json.tmp" &&
                mv "$out.json.tmp" "$out.json" &&
                record "$out.json" "$direction" "$seed" "$decoder" "$attention" "$score" &&
                echo "table4: $out done" >&2
            ) &
          done
        done
      done
    done
  done
  wait
fi

python3 - "$ledger" "$seeds" "$directions" "$decoders" <<'PY'
import csv, statistics, sys
ledger, seeds, directions, decoders = sys.argv[1], *[a.split() for a in sys.argv[2:5]]
scores = ["dot", "general", "concat", "location"]
cells = {}
with open(ledger) as lines:
    for row in csv.DictReader((l for l in lines if not l.startswith("#")), delimiter="\t"):
        if row["seed"] in seeds:
            key = (row["direction"], row["decoder"], row["attention"], row["score"])
            cells.setdefault(key, []).append((float(row["bleu"]), float(row["chrf"])))
for direction in directions:
    print(f"\n{direction}, {ledger}, test BLEU (± its standard deviation over the seeds) / chrF, "
          f"means over the seeds run of {', '.join(seeds)}:\n")
    print("| decoder | attention | " + " | ".join(scores) + " |")
    print("|---|---|" + "---|" * len(scores))
    for decoder in decoders:
        for attention in ["global", "local-m", "local-p"]:
            row = []
            for score in scores:
                results = cells.get((direction, decoder, attention, score), [])
                if not results:
                    row.append("-")
                    continue
                bleu = statistics.mean(b for b, _ in results)
                chrf = statistics.mean(c for _, c in results)
                spread = f" ± {statistics.stdev(b for b, _ in results):.2f}" if len(results) > 1 else ""
                missing = f" ({len(results)} of {len(seeds)} seeds)" if len(results) != len(seeds) else ""
                row.append(f"{bleu:.2f}{spread} / {chrf:.2f}{missing}")
            print(f"| {decoder} | {attention} | " + " | ".join(row) + " |")
PY
