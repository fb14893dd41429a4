#!/usr/bin/env bash
# The read commands' outputs on committed stores, to diff two versions of the code:
#   bash lab/golden_outputs.sh SRC_DIR OUT_DIR   (e.g. SRC_DIR from `git archive BASE src | tar -x -C out/base`)
set -u
SRC=$1; O=$2; mkdir -p $O; R=$(cd "$(dirname "$0")/.." && pwd)/results/h200
export PYTHONPATH=$SRC COLUMNS=100 TZ=UTC
ab() { python -m attnbench "$@"; }
W=$O/stores; rm -rf $W; mkdir -p $W
for n in quick-2026-11-30 quick-2026-11-30b libraries-2026-12-01 features-2026-12-01; do
  s=$(echo $n | tr -d '.-' ); 
  ab import $R/$n.jsonl.gz --db $W/$s.sqlite 2>/dev/null
  ab import $R/$n.runs.jsonl --table runs --db $W/$s.sqlite 2>/dev/null
done
ab show --db $W/quick20261130.sqlite --status > $O/show.txt 2>&1
ab show --db $W/quick20261130.sqlite --format json > $O/show.json 2>&1
ab show --db $W/quick20261130.sqlite --rank --format csv > $O/show-rank.csv 2>&1
ab show --db $W/quick20261130.sqlite --failures --format md > $O/show-fail.md 2>&1
ab analyze $W/quick20261130.sqlite $W/quick20261130b.sqlite --json $O/analyze.json --md $O/analyze.md > $O/analyze.txt 2>&1
ab analyze $W/quick20261130.sqlite --by launch --json $O/analyze-launch.json > $O/analyze-launch.txt 2>&1
ab analyze $W/libraries20261201.sqlite $W/features20261201.sqlite --json $O/analyze-lib.json > $O/analyze-lib.txt 2>&1
ab compare $W/quick20261130.sqlite $W/quick20261130b.sqlite --json $O/compare.json > $O/compare.txt 2>&1; echo "rc $?" >> $O/compare.txt
ab advise $W/quick20261130.sqlite $W/quick20261130b.sqlite --workload "prefill B=1 N=4096 Hq=32 Hkv=8 D=128 bf16 causal" > $O/advise.txt 2>&1
ab report $R/quick-2026-11-30.jsonl.gz $R/quick-2026-11-30b.jsonl.gz --out $O/site > $O/report.txt 2>&1
ab report $R/model-llama3.1-8b-2026-11-30.jsonl --out $O/site-model > $O/report-model.txt 2>&1
sed -i "s#$W#STORES#g; s#$O#OUT#g" $O/*.txt $O/*.md $O/*.json 2>/dev/null
rm -rf $W
echo golden done
