#!/usr/bin/env bash
# Local Lodestar fleet: `make quickstart` runs `hack/quickstart.sh up`,
# `make quickstart-down` runs `hack/quickstart.sh down`.
#
# Expects from the Makefile: QUICKSTART_DIR, KUBECTL, LODESTAR_BIN, KUBEBUILDER_ASSETS, LODESTAR_KWOK.
set -euo pipefail

dir=${QUICKSTART_DIR:?}
pidfile="$dir/devfleet.pid"

running() { [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

up() {
  local kubectl=${KUBECTL:?} bin=${LODESTAR_BIN:?}
  if running; then
    say "A quick-start fleet is already running (pid $(cat "$pidfile")); reusing it"
  else
    [[ -d "$dir" ]] && rm -rf "$dir"
    mkdir -p "$dir"
    say "Starting a local hub (kube-apiserver, etcd, and kube-controller-manager without workload controllers: docs/hub.md) with the lodestar-hub chart installed by helm, and two members (kube-apiserver, etcd, kube-controller-manager, kube-scheduler, a kwok node each), each joined with kubectl lodestar join and given the lodestar-agent chart; the hub manager (the chart's two replicas, one leading) and the agents run as local processes with the arguments, configuration and ServiceAccounts of the Deployments the charts installed"
    # A session of its own, so that quickstart-down can stop every process it starts.
    setsid "$bin/lodestar-devfleet" --dir "$dir" --bin "$bin" --helm "${LODESTAR_HELM:?}" --charts charts >"$dir/devfleet.log" 2>&1 < /dev/null &
    echo $! > "$pidfile"
    for _ in $(seq 1 240); do
      [[ -f "$dir/ready" ]] && break
      if ! running; then
        echo "The fleet did not start:"; cat "$dir/devfleet.log"; exit 1
      fi
      sleep 0.5
    done
    [[ -f "$dir/ready" ]] || { echo "The fleet did not become ready in 2 minutes:"; cat "$dir/devfleet.log"; exit 1; }
  fi

  local hub=(--kubeconfig "$dir/hub.kubeconfig")
  say "Charts installed"
  "${LODESTAR_HELM:?}" list -A --kubeconfig "$dir/hub.kubeconfig" 2>/dev/null || true
  say "Clusters joined to the hub"
  "$kubectl" "${hub[@]}" get clusterprofiles -A -L env,region

  say "Applying config/samples/ to the hub"
  "$kubectl" "${hub[@]}" apply --server-side --force-conflicts -f config/samples/demo-app.yaml
  "$kubectl" "${hub[@]}" apply --server-side --force-conflicts -f config/samples/placement.yaml
  "$kubectl" "${hub[@]}" apply --server-side --force-conflicts -f config/samples/staged-rollout.yaml
  "$kubectl" "${hub[@]}" apply --server-side --force-conflicts -f config/samples/member-access-grant.yaml

  say "Waiting for the sample app to be available on its clusters"
  if ! "$kubectl" "${hub[@]}" -n demo wait placement/web --for=condition=Available --timeout=180s; then
    "$kubectl" "${hub[@]}" -n demo get placement web -o yaml
    echo "The Placement did not become available; logs are in $dir/logs"; exit 1
  fi
  "$kubectl" "${hub[@]}" -n demo wait placement/web --timeout=60s \
    --for=jsonpath='{.status.conditions[?(@.type=="Progressing")].reason}'=RolloutComplete >/dev/null
  # The staged sample too: the tour's approvals are for the revisions it makes.
  "$kubectl" "${hub[@]}" -n demo wait placement/release --timeout=120s \
    --for=jsonpath='{.status.conditions[?(@.type=="Progressing")].reason}'=RolloutComplete >/dev/null

  say "The Placement on the hub"
  "$kubectl" "${hub[@]}" -n demo get placement web -o wide
  echo
  # The conditions in the order the work flows (the API server keeps them in the order written).
  "$kubectl" "${hub[@]}" -n demo get placement web \
    -o jsonpath='{range .status.conditions[*]}{.type}{"\t"}{.status}{"\t"}{.message}{"\n"}{end}' |
    awk -F'\t' 'BEGIN { n = split("Reconciling Stalled Scheduled Rendered WorkSynchronized Progressing Applied Available StatusReflected", o, " "); for (i = 1; i <= n; i++) rank[o[i]] = i }
      { print ((rank[$1] ? rank[$1] : 99) "\t" $0) }' | sort -n -k1,1 | cut -f2- | column -t -s $'\t'
  echo
  say "Per cluster"
  "$kubectl" "${hub[@]}" -n demo get placement web \
    -o jsonpath='{range .status.clusters[*]}{.name}{"\tapplied="}{.applied}{"\tavailable="}{.available}{"\t"}{.message}{"\n"}{end}' | column -t -s $'\t'
  echo
  say "The member clusters (kubectl lodestar get clusters)"
  "${LODESTAR_BIN:?}/kubectl-lodestar" get clusters -L env,region --kubeconfig "$dir/hub.kubeconfig"
  echo
  say "Status from the hub: per cluster and object, feedback, summaries (kubectl lodestar status)"
  "${LODESTAR_BIN:?}/kubectl-lodestar" status web -n demo --kubeconfig "$dir/hub.kubeconfig"
  echo
  say "The hub's own Deployment shows both members (reporting.reflection: Aggregate)"
  "$kubectl" "${hub[@]}" -n demo get deploy web
  echo
  say "What member-2's copy changes (the sample's overrides; kubectl lodestar render)"
  "${LODESTAR_BIN:?}/kubectl-lodestar" render web -n demo --cluster member-2 -o diff --kubeconfig "$dir/hub.kubeconfig"
  for m in member-1 member-2; do
    echo
    say "On $m"
    "$kubectl" --kubeconfig "$dir/$m.kubeconfig" -n demo get deployments,pods,services,configmaps -l app=web -o wide
  done
  echo
  say "Member access (docs/member-access.md): member-1's agent has it on; the sample grant copies its credential to platform-tools"
  "$kubectl" "${hub[@]}" wait memberaccessgrant/platform-tools --for=condition=Ready --timeout=60s >/dev/null || true
  "$kubectl" "${hub[@]}" get memberaccessgrants
  "$kubectl" "${hub[@]}" -n platform-tools get secrets -l placement.lodestar.dev/member-access=copy
  echo
  say "Metrics (docs/metrics.md): each process serves /metrics on its own loopback port, listed in $dir/metrics"
  cat "$dir/metrics"
  echo
  say "Debug from the hub (docs/debugging.md): the app's pods and logs on both members, through the agents' tunnels"
  # Both agents' tunnels to this hub replica, not only the first to come up.
  local web
  for _ in $(seq 1 60); do
    web=$("${LODESTAR_BIN:?}/kubectl-lodestar" pods web -n demo --kubeconfig "$dir/hub.kubeconfig" 2>&1 || true)
    [[ "$web" == *member-1* && "$web" == *member-2* && "$web" != *error:* && "$web" != *"no tunnel"* ]] && break
    sleep 1
  done
  "${LODESTAR_BIN:?}/kubectl-lodestar" pods web -n demo --kubeconfig "$dir/hub.kubeconfig"
  echo
  "${LODESTAR_BIN:?}/kubectl-lodestar" logs web -n demo --tail 2 --kubeconfig "$dir/hub.kubeconfig"
  echo
  say "A chart installed on the hub with helm install --wait: helm returns once the fleet runs it (docs/hub.md#tools-on-the-hub)"
  "$kubectl" "${hub[@]}" apply --server-side --force-conflicts -f docs/examples/hub-tools/namespace.yaml
  HELM_CONFIG_HOME="$dir/helm/config" HELM_CACHE_HOME="$dir/helm/cache" HELM_DATA_HOME="$dir/helm/data" \
    "${LODESTAR_HELM:?}" --kubeconfig "$dir/hub.kubeconfig" upgrade --install shop docs/examples/hub-tools/shop -n shop \
    --wait --wait-for-jobs --timeout 3m
  "$kubectl" "${hub[@]}" -n shop rollout status deployment/shop-web --timeout=60s
  "$kubectl" "${hub[@]}" -n shop get deployments,replicasets,services,placements
  echo
  # Each agent lets the namespace's users in (debug.tenantAccess) once it placed there.
  local pods
  for _ in $(seq 1 60); do
    pods=$("${LODESTAR_BIN:?}/kubectl-lodestar" pods shop -n shop --kubeconfig "$dir/hub.kubeconfig" 2>&1 || true)
    [[ "$pods" == *member-1* && "$pods" == *member-2* && "$pods" != *error:* ]] && break
    sleep 1
  done
  "${LODESTAR_BIN:?}/kubectl-lodestar" pods shop -n shop --kubeconfig "$dir/hub.kubeconfig"
  cat <<MSG

The fleet keeps running. Look further with:
  export KUBECONFIG=$dir/hub.kubeconfig
  $kubectl get placements,placementdecisions -A
  $kubectl get works -A
  $kubectl --kubeconfig $dir/member-1.kubeconfig get appliedworks
  ${LODESTAR_BIN:?}/kubectl-lodestar logs web -n demo -f
  ${LODESTAR_BIN:?}/kubectl-lodestar events web -n demo
Logs: $dir/logs. Stop everything with: make quickstart-down
MSG
}

down() {
  if running; then
    local pid; pid=$(cat "$pidfile")
    say "Stopping the quick-start fleet (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    # Whatever is left of its session (for example after a crash) goes too.
    pkill -KILL -s "$pid" 2>/dev/null || true
  else
    say "No quick-start fleet is running"
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
