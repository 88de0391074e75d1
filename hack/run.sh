#!/usr/bin/env bash
# Starts a local Canopy tree for `make run`: a root, 2 regions under it and
# 3 edges with virtual clusters under each region, then tells the user what
# to type. Ctrl-C stops every relay; `make run` again resumes from $DATA
# (relays that joined need no token).
set -euo pipefail
: "${BIN:?}" "${DATA:?}" "${KUBECTL:=kubectl}"
relay="$BIN/relay"
root_dir="$DATA/root"
kubeconfig="$root_dir/admin.kubeconfig"
root_link=127.0.0.1:7443
mkdir -p "$DATA"
# Job control puts each relay in its own process group: Ctrl-C reaches this
# script only, and stop_all stops the relays with one SIGTERM each.
set -m

pids=()
stop_all() {
  trap - INT TERM EXIT
  if ((${#pids[@]})); then
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start NAME ARGS... starts a relay in the background, logging to
# $DATA/NAME.log.
start() {
  local name=$1
  shift
  "$relay" --name="$name" --data-dir="$DATA/$name" "$@" >>"$DATA/$name.log" 2>&1 &
  pids+=($!)
}

# wait_for WHAT SECONDS COMMAND... polls COMMAND until it succeeds, failing
# if a relay exits meanwhile.
wait_for() {
  local what=$1 tries=$(($2 * 10))
  shift 2
  for ((i = 0; i < tries; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    for pid in "${pids[@]}"; do
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "a relay exited while waiting for $what; see $DATA/*.log:" >&2
        tail -n 5 "$DATA"/*.log >&2
        exit 1
      fi
    done
    sleep 0.1
  done
  echo "timed out waiting for $what; see $DATA/*.log" >&2
  exit 1
}

has_context() { "$KUBECTL" --kubeconfig="$kubeconfig" config get-contexts -o name | grep -qx "$1"; }

start root --role=root --api-addr=127.0.0.1:6443 --link-addr=$root_link
wait_for "the root to be ready" 30 \
  "$KUBECTL" --kubeconfig="$kubeconfig" get --raw=/readyz

# A relay passes --join-token only until it has its certificate; a token
# is created only when some relay has not joined yet.
names=(region-1 edge-1-1 edge-1-2 edge-1-3 region-2 edge-2-1 edge-2-2 edge-2-3)
token=""
for name in "${names[@]}"; do
  if [[ ! -s "$DATA/$name/pki/relay.crt" ]]; then
    token=$("$relay" token create --data-dir="$root_dir")
    break
  fi
done
join() {
  if [[ -n $token && ! -s "$DATA/$1/pki/relay.crt" ]]; then echo "--join-token=$token"; fi
}

for r in 1 2; do
  region=region-$r
  link=127.0.0.1:$((7443 + r))
  # shellcheck disable=SC2046 # join prints one word or nothing
  start $region --role=region --parent=$root_link --link-addr=$link $(join $region)
  for e in 1 2 3; do
    edge=edge-$r-$e
    # shellcheck disable=SC2046
    start $edge --role=edge --parent=$link --virtual-cluster --labels=region=$region $(join $edge)
  done
done
wait_for "the regions' mailboxes" 60 \
  bash -c "$(declare -f has_context); KUBECTL='$KUBECTL' kubeconfig='$kubeconfig'; has_context mailbox-region-1 && has_context mailbox-region-2"

# A Location per region, and a demo workload to place (applied by the user).
for r in 1 2; do
  "$KUBECTL" --kubeconfig="$kubeconfig" --context=inventory apply -f - >/dev/null <<YAML
apiVersion: edge.canopy.dev/v1alpha1
kind: Location
metadata: {name: region-$r, labels: {region: region-$r}}
spec: {instanceSelector: {matchLabels: {region: region-$r}}}
YAML
done
cat >"$DATA/demo.yaml" <<'YAML'
apiVersion: v1
kind: Namespace
metadata: {name: demo}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: hello, namespace: demo, annotations: {edge.canopy.dev/customizer: per-edge}}
spec:
  replicas: 1
  selector: {matchLabels: {app: hello}}
  template:
    metadata: {labels: {app: hello}}
    spec: {containers: [{name: hello, image: hello:1}]}
---
apiVersion: edge.canopy.dev/v1alpha1
kind: Customizer
metadata: {name: per-edge, namespace: demo}
replacements:
- {path: /metadata/labels, value: '{"edge": "%(syncTargetName)"}'}
---
apiVersion: edge.canopy.dev/v1alpha1
kind: StatusCollector
metadata: {name: ready}
spec:
  combinedFields:
  - {name: edges, type: COUNT}
  - {name: ready, type: SUM, subject: "has(obj.status.readyReplicas) ? obj.status.readyReplicas : 0"}
---
apiVersion: edge.canopy.dev/v1alpha1
kind: EdgePlacement
metadata: {name: hello}
spec:
  locationSelectors: [{matchLabels: {region: region-1}}]
  downsync: [{apiGroup: apps, resources: [deployments], namespaces: [demo]}]
  statusCollectors: [ready]
YAML

cat <<MSG

A Canopy tree is running: root (API 127.0.0.1:6443, link $root_link),
region-1 (link 127.0.0.1:7444) with edge-1-1..3, region-2 (link 127.0.0.1:7445)
with edge-2-1..3; every edge has a virtual cluster. Data in $DATA.

  export KUBECONFIG=$kubeconfig
  kubectl get namespaces                  # the 'default' space
  kubectl config get-contexts             # every space, with mailbox-region-1 and mailbox-region-2
  kubectl --context=inventory get synctargets
                                          # every edge cluster: path in the tree, connected, last seen
  kubectl --context=inventory get locations   # region-1, region-2
  kubectl apply -f $DATA/demo.yaml        # a Deployment placed on region-1's three edges
  kubectl get edgeplacements              # MATCHED 3, then SYNCED 3 and READY True
  kubectl wait --for=condition=Synced edgeplacement/hello
  kubectl get combinedstatuses -n demo -o yaml   # 3 edges, the sum of their ready replicas
  $relay render --data-dir=$root_dir --destination=edge-1-2 -n demo deployments/hello
                                          # the Deployment as edge-1-2 applies it
  kubectl --context=mailbox-region-1 get deployments -A
                                          # region-1's mailbox: a read-only view of what it receives
  $relay kubeconfig --data-dir=$root_dir --destination=edge-1-2 > $DATA/edge-1-2.kubeconfig
  kubectl --kubeconfig=$DATA/edge-1-2.kubeconfig get pods -n demo
                                          # edge-1-2's own cluster, through the root and region-1
  kubectl --kubeconfig=$DATA/edge-1-2.kubeconfig logs -n demo deploy/hello
  kubectl --kubeconfig=$DATA/edge-1-2.kubeconfig exec -n demo deploy/hello -- hostname
  tail -f $DATA/*.log    # what each relay does

The console: https://127.0.0.1:6443/console/ (the root's certificate is signed by
$root_dir/pki/ca.crt), signed in with the admin token:
  $(cat "$root_dir/pki/admin.token")

Stop the tree with Ctrl-C; 'make run' again resumes with everything kept.
MSG
wait -n "${pids[@]}" || true
echo "a relay exited; stopping the tree (see $DATA/*.log)" >&2
exit 1
