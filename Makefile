# Lodestar build, test and local fleet.
#
# Every tool is built from the Go module proxy into bin/, keyed by version, and
# reused on the next run: a second `make test` builds nothing it already has.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:

# Pinned versions. The binaries that tests, benchmarks and the quick start run
# (Kubernetes, etcd, kwok, helm) are pinned in one tools module,
# hack/tools/kube/go.mod, and read from it: one module graph, one `go build`, so
# the Kubernetes libraries they share are compiled once.
TOOLS_MOD                := hack/tools/kube/go.mod
modversion                = $(shell sed -n 's|^[[:space:]]*$(1) \(v[^ ]*\).*|\1|p' $(TOOLS_MOD) | head -1)
KUBE_VERSION             := $(call modversion,k8s.io/kubernetes)
ETCD_VERSION             := $(call modversion,go.etcd.io/etcd/server/v3)
KWOK_VERSION             := $(call modversion,sigs.k8s.io/kwok)
HELM_VERSION             := $(call modversion,helm.sh/helm/v3)
# helm v4 is built on a newer Kubernetes minor: its own tools module.
HELM4_MOD                := hack/tools/helm4/go.mod
HELM4_VERSION            := $(shell sed -n 's|^require helm.sh/helm/v4 \(v[^ ]*\).*|\1|p' $(HELM4_MOD))
CONTROLLER_TOOLS_VERSION ?= v0.21.0
GOLANGCI_LINT_VERSION    ?= v2.15.0

LOCALBIN       := $(CURDIR)/bin
KUBE_BIN_DIR   := $(LOCALBIN)/k8s-$(KUBE_VERSION)-etcd-$(ETCD_VERSION)-kwok-$(KWOK_VERSION)-helm-$(HELM_VERSION)
KUBE_STAMP     := $(KUBE_BIN_DIR)/.complete
KWOK           := $(KUBE_BIN_DIR)/kwok
KWOK_STAGES_FILE := $(KUBE_BIN_DIR)/stages.yaml
CONTROLLER_GEN := $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)/controller-gen
GOLANGCI_LINT  := $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint
KUBECTL        := $(KUBE_BIN_DIR)/kubectl
HELM           := $(KUBE_BIN_DIR)/helm
HELM4          := $(LOCALBIN)/helm-$(HELM4_VERSION)/helm

# The SIG-Multicluster API packages whose CRDs we ship, generated from the pinned modules.
SIGMC_API_PACKAGES := sigs.k8s.io/work-api/pkg/apis/v1alpha1 \
                      sigs.k8s.io/cluster-inventory-api/apis/v1alpha1 \
                      sigs.k8s.io/about-api/pkg/apis/v1alpha1

# The MCS API module ships its CRDs (both versions, v1beta1 stored) as it releases them.
MCS_API_CRDS = $(shell go list -m -f '{{.Dir}}' sigs.k8s.io/mcs-api)/config/crd

# The about-api module ships no API-review annotation for its protected group; we say so.
ABOUT_API_APPROVAL := unapproved, KEP-2149 ClusterProperty as published in sigs.k8s.io/about-api

GO_TEST_FLAGS ?=
TEST_TIMEOUT  ?= 25m

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs (ours and the SIG-Multicluster ones) and RBAC.
	rm -rf config/crd/bases
	$(CONTROLLER_GEN) crd:allowDangerousTypes=false paths="./api/..." output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) crd $(addprefix paths=,$(SIGMC_API_PACKAGES)) output:crd:artifacts:config=config/crd/bases
	@# about.k8s.io is a protected group: the API server requires an API-review annotation.
	install -m 0644 $(MCS_API_CRDS)/multicluster.x-k8s.io_*.yaml config/crd/bases/
	sed -i '/controller-gen.kubebuilder.io\/version/a\    api-approved.kubernetes.io: "$(ABOUT_API_APPROVAL)"' config/crd/bases/about.k8s.io_clusterproperties.yaml
	$(CONTROLLER_GEN) rbac:roleName=lodestar-hub-manager paths="./controllers/hub/..." output:rbac:artifacts:config=config/rbac/hub
	$(CONTROLLER_GEN) rbac:roleName=lodestar-agent paths="{./controllers/agent/work/...,./controllers/agent/registration/...,./controllers/agent/services/...,./controllers/agent/debug/...}" output:rbac:artifacts:config=config/rbac/agent
	$(CONTROLLER_GEN) rbac:roleName=lodestar-agent-clusterprofile paths="./controllers/agent/profile/..." output:rbac:artifacts:config=config/rbac/agent-clusterprofile
	@# The charts ship exactly these (config/config_test.go checks that they do).
	rm -f charts/lodestar-hub/crds/*.yaml charts/lodestar-agent/crds/*.yaml
	cp config/crd/bases/placement.lodestar.dev_*.yaml config/crd/bases/multicluster.x-k8s.io_*.yaml config/crd/bases/services.lodestar.dev_*.yaml charts/lodestar-hub/crds/
	cp config/crd/bases/work.lodestar.dev_*.yaml config/crd/bases/about.k8s.io_*.yaml config/crd/bases/multicluster.x-k8s.io_service*.yaml charts/lodestar-agent/crds/
	cp config/rbac/hub/role.yaml charts/lodestar-hub/files/role.yaml
	cp config/admission/*.yaml charts/lodestar-hub/files/
	cp config/rbac/tenancy/roles.yaml charts/lodestar-hub/files/tenancy-roles.yaml
	mkdir -p charts/lodestar-agent/files && cp config/rbac/debug/member-roles.yaml charts/lodestar-agent/files/debug-member-roles.yaml
	cp config/optional-admission/cluster-names.yaml charts/lodestar-hub/files/cluster-names.yaml

.PHONY: fmt
fmt: ## Run gofmt.
	gofmt -s -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint.
	$(GOLANGCI_LINT) run ./...

.PHONY: verify
verify: generate manifests ## Fail when generated code or CRDs are stale, code is unformatted, or lint fails.
	@test -z "$$(gofmt -s -l $$(git ls-files '*.go'))" || { echo "gofmt would change:"; gofmt -s -l $$(git ls-files '*.go'); exit 1; }
	@git diff --exit-code -- api config || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@test -z "$$(git ls-files --others --exclude-standard -- api config)" || { echo "untracked generated files: run 'make generate manifests' and commit"; git ls-files --others --exclude-standard -- api config; exit 1; }
	go mod tidy -diff
	$(MAKE) vet lint agent-deps

# HUB_PACKAGES are what lodestar-agent never links (the depguard rule
# agent-links-only-agent checks each file; this checks the whole tree).
HUB_PACKAGES = github.com/lodestar-dev/lodestar/(controllers/hub|config|internal/(debugapi|division|fleet|fleetview|handlers|kubeconfig|lookup|mcs|overrides|pki|rbacguard|reflection|render|renderctl|requeue|rollout|rolloutctl|scheduling|selection|settled|summary|teardown|testenv))(/|$$)

.PHONY: agent-deps
agent-deps: ## Fail when lodestar-agent's dependency tree reaches a hub package.
	@! go list -deps ./cmd/lodestar-agent | grep -E '^$(HUB_PACKAGES)' || { echo "lodestar-agent links the hub packages above (docs/development.md)"; exit 1; }

##@ Build

.PHONY: build
build: ## Build the hub manager, the agent, the kubectl plugin, the tunnel's credential plugin, the local fleet runner and the secretreader plugin into bin/.
	go build -o $(LOCALBIN)/lodestar-hub ./cmd/lodestar-hub
	go build -o $(LOCALBIN)/lodestar-agent ./cmd/lodestar-agent
	go build -o $(LOCALBIN)/kubectl-lodestar ./cmd/kubectl-lodestar
	go build -o $(LOCALBIN)/lodestar-credentials ./cmd/lodestar-credentials
	@# kubectl completes `kubectl lodestar ...` by running kubectl_complete-lodestar.
	ln -sf kubectl-lodestar $(LOCALBIN)/kubectl_complete-lodestar
	go build -o $(LOCALBIN)/lodestar-devfleet ./hack/devfleet
	@# The upstream credential plugin that member-access consumers exec (docs/member-access.md).
	go build -o $(LOCALBIN)/secretreader-plugin sigs.k8s.io/cluster-inventory-api/plugins/secretreader/cmd/plugin

.PHONY: test-binaries
test-binaries: $(KUBE_STAMP) $(KWOK_STAGES_FILE) $(LOCALBIN)/kubectl $(HELM4) ## Build kube-apiserver, etcd, kubectl, kube-controller-manager, kube-scheduler, kwok, helm v3 and v4 (once per version).

.PHONY: test
test: test-binaries build ## Run every test (unit, charts, and on real API servers; the metrics test runs bin/'s binaries).
	KUBEBUILDER_ASSETS="$(KUBE_BIN_DIR)" LODESTAR_KWOK="$(KWOK)" LODESTAR_HELM="$(HELM)" LODESTAR_HELM4="$(HELM4)" LODESTAR_BIN="$(LOCALBIN)" \
		go test $(GO_TEST_FLAGS) -timeout $(TEST_TIMEOUT) -count=1 ./...

##@ Benchmarks

.PHONY: bench
bench: test-binaries build ## Run the benchmarks; write bench/results/ and the README's table.
	KUBEBUILDER_ASSETS="$(KUBE_BIN_DIR)" LODESTAR_KWOK="$(KWOK)" \
		go run ./test/bench --out bench/results --bin $(LOCALBIN) --readme README.md

##@ Local fleet

QUICKSTART_DIR := $(CURDIR)/.lodestar/quickstart

.PHONY: quickstart
quickstart: test-binaries build ## Start a local hub and two members, place the sample app, print its status.
	@KUBEBUILDER_ASSETS="$(KUBE_BIN_DIR)" LODESTAR_KWOK="$(KWOK)" LODESTAR_HELM="$(HELM)" KUBECTL="$(KUBECTL)" LODESTAR_BIN="$(LOCALBIN)" \
		QUICKSTART_DIR="$(QUICKSTART_DIR)" hack/quickstart.sh up

.PHONY: quickstart-down
quickstart-down: ## Stop the local fleet started by quickstart and remove its state.
	@QUICKSTART_DIR="$(QUICKSTART_DIR)" hack/quickstart.sh down

##@ Tools

# Stamp the Kubernetes binaries with their release, as the upstream build does.
KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_VERSION)))
KUBE_VERSION_LDFLAGS := $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(KUBE_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=$(KUBE_MINOR) -X $(p).gitTreeState=clean)

$(KUBE_STAMP):
	@echo ">> building Kubernetes $(KUBE_VERSION), etcd $(ETCD_VERSION), kwok $(KWOK_VERSION) and helm $(HELM_VERSION) from source into $(KUBE_BIN_DIR) (first time only: about 7 minutes on 2 cores from an empty build cache)"
	mkdir -p $(KUBE_BIN_DIR)
	cd hack/tools/kube && go build -trimpath -ldflags='-s -w $(KUBE_VERSION_LDFLAGS) -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)' -o $(KUBE_BIN_DIR)/ \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl \
		k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler ./etcd \
		sigs.k8s.io/kwok/cmd/kwok helm.sh/helm/v3/cmd/helm
	touch $@

$(KWOK) $(HELM) $(KUBECTL): $(KUBE_STAMP) ;

$(HELM4):
	@echo ">> building helm $(HELM4_VERSION) from source into $(dir $@) (first time only: about 2 minutes on 2 cores)"
	mkdir -p $(dir $@)
	cd hack/tools/helm4 && go build -trimpath -ldflags='-s -w -X helm.sh/helm/v4/internal/version.version=$(HELM4_VERSION)' -o $@ helm.sh/helm/v4/cmd/helm

# bin/kubectl: the kubectl of the pinned release, whatever directories older
# releases left in bin/ (the README's commands use it).
$(LOCALBIN)/kubectl: $(KUBE_STAMP)
	ln -sfn $(patsubst $(LOCALBIN)/%,%,$(KUBECTL)) $@

# kwok needs stages (what happens to fake nodes and pods): the "fast" set that the
# kwok module itself publishes, assembled from the module at the pinned version,
# and ours in hack/kwok/ (rebuilt when ours change).
KWOK_STAGES := node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
               pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml

$(KWOK_STAGES_FILE): $(wildcard hack/kwok/*.yaml)
	mkdir -p $(dir $@)
	dir=$$(go mod download -json sigs.k8s.io/kwok@$(KWOK_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
		{ for f in $(KWOK_STAGES); do echo "---"; cat "$$dir/kustomize/stage/$$f"; done; \
		  for f in $^; do echo "---"; cat "$$f"; done; } > $@

$(CONTROLLER_GEN):
	GOBIN=$(dir $@) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)

$(GOLANGCI_LINT):
	@echo ">> building golangci-lint $(GOLANGCI_LINT_VERSION)"
	GOBIN=$(dir $@) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
