#!/usr/bin/env bash
# Generates the API module's typed clients, listers, informers and apply
# configurations (api/client/) with k8s.io/code-generator's binaries in $1.
set -euo pipefail
bin=$(cd "$1" && pwd)
cd "$(dirname "$0")/../api"
pkg=github.com/lodestar-dev/lodestar/api
header=../hack/boilerplate.go.txt
groups=(./placement/v1alpha1 ./work/v1alpha1 ./services/v1alpha1)
rm -rf client
"$bin/applyconfiguration-gen" --go-header-file "$header" \
	--output-dir client/applyconfiguration --output-pkg "$pkg/client/applyconfiguration" "${groups[@]}"
"$bin/client-gen" --go-header-file "$header" --clientset-name versioned \
	--input-base "$pkg" --input placement/v1alpha1,work/v1alpha1,services/v1alpha1 \
	--apply-configuration-package "$pkg/client/applyconfiguration" \
	--output-dir client/clientset --output-pkg "$pkg/client/clientset"
"$bin/lister-gen" --go-header-file "$header" \
	--output-dir client/listers --output-pkg "$pkg/client/listers" "${groups[@]}"
"$bin/informer-gen" --go-header-file "$header" \
	--versioned-clientset-package "$pkg/client/clientset/versioned" --listers-package "$pkg/client/listers" \
	--output-dir client/informers --output-pkg "$pkg/client/informers" "${groups[@]}"
