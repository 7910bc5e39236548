#!/bin/bash
B=/work/main/bin
export KUBEBUILDER_ASSETS=$(ls -d $B/k8s-*) LODESTAR_KWOK=$(ls -d $B/k8s-*)/kwok
OUT=bench/results/ab-2026-11-29-speed
mkdir -p $OUT
for run in "1 base" "2 head" "3 head" "4 base"; do
  set -- $run
  dir=$OUT/r$1-$2
  (cd /tmp/ab/$2 && go run ./test/bench --only p1,p2 --out $dir --bin /tmp/ab/$2/bin --readme "" > $dir.log 2>&1)
  echo "run $1 $2 rc=$? $(date +%T)" >> $OUT/progress
done
