#!/bin/bash
# An A/B of `make bench` groups, in both orders: base, head, head, base, one
# after the other on this machine. Run from the repository root:
#
#   BASE=<worktree of the base> HEAD=<worktree of the head> hack/bench-ab.sh <out dir> <groups>
#
# Each worktree has its own bin/ with its lodestar-hub, lodestar-agent and
# lodestar-credentials built (`make build`); the envtest binaries come from
# this checkout's bin/. Each run writes <out dir>/r<n>-<base|head>/ and its log.
set -u
out=$1 groups=$2
B=bin
export KUBEBUILDER_ASSETS=$(realpath $(ls -d $B/k8s-*)) LODESTAR_KWOK=$(realpath $(ls -d $B/k8s-*))/kwok
mkdir -p "$out"
out=$(realpath "$out")
for run in "1 base" "2 head" "3 head" "4 base"; do
  set -- $run
  dir=$out/r$1-$2
  tree=$BASE; [ $2 = head ] && tree=$HEAD
  (cd "$tree" && go run ./test/bench --only "$groups" --out "$dir" --bin "$tree/bin" --readme "" > "$dir.log" 2>&1)
  echo "run $1 $2 rc=$? $(date +%T)"
done
