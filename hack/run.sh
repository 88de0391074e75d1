#!/usr/bin/env bash
# Starts a local root relay for `make run` and tells the user what to type.
set -euo pipefail
: "${BIN:?}" "${DATA:?}" "${KUBECTL:=kubectl}"
dir="$DATA/root"
mkdir -p "$dir"
"$BIN/relay" --role=root --name=root --data-dir="$dir" \
  --api-addr=127.0.0.1:6443 --link-addr=127.0.0.1:7443 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null' INT TERM EXIT
for _ in $(seq 1 100); do
  if [[ -s "$dir/admin.kubeconfig" ]] && "$KUBECTL" --kubeconfig="$dir/admin.kubeconfig" get --raw=/readyz >/dev/null 2>&1; then
    break
  fi
  if ! kill -0 $pid 2>/dev/null; then echo "relay exited; see the log above" >&2; exit 1; fi
  sleep 0.1
done
cat <<MSG

Canopy root relay is running (pid $pid, data in $dir).

  export KUBECONFIG=$dir/admin.kubeconfig
  kubectl get namespaces                      # the 'default' space
  kubectl --context=inventory get namespaces  # the 'inventory' space
  kubectl api-resources
  kubectl create configmap hello --from-literal=greeting=hi && kubectl get cm -o yaml hello

Stop it with Ctrl-C; 'make run' again resumes with everything kept.
MSG
wait $pid
