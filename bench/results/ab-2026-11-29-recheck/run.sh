#!/bin/bash
# The A/B's four runs, from the repository root. BASE and HEAD are worktrees of
# the two commits (each with its own bin/, as `make bench` sets up), named by
# the environment; the envtest binaries come from this checkout's bin/.
set -u
B=bin
export KUBEBUILDER_ASSETS=$(realpath $(ls -d $B/k8s-*)) LODESTAR_KWOK=$(realpath $(ls -d $B/k8s-*))/kwok
OUT=$(realpath bench/results/ab-2026-11-29-recheck)
mkdir -p $OUT
for run in "1 base" "2 head" "3 head" "4 base"; do
  set -- $run
  dir=$OUT/r$1-$2
  tree=$BASE; [ $2 = head ] && tree=$HEAD
  (cd $tree && go run ./test/bench --only p1,p2 --out $dir --bin $tree/bin --readme "" > $dir.log 2>&1)
  echo "run $1 $2 rc=$? $(date +%T)" >> $OUT/progress
done
