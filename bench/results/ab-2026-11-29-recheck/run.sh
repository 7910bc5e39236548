#!/bin/bash
# How this A/B ran (see hack/bench-ab.sh for BASE and HEAD).
exec hack/bench-ab.sh bench/results/ab-2026-11-29-recheck p1,p2
