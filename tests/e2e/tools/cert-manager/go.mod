// Pinned only for cert-manager's CustomResourceDefinitions
// (deploy/crds/*.yaml of the module), which tests/e2e/test_chart.py applies
// to the e2e control plane before the chart's Certificate and Issuers. No
// code is built or imported from it; it is not `go mod tidy`'d (tidy would
// drop the unused requirement). The test runs, in this directory,
//   GOWORK=off GOFLAGS=-mod=readonly go mod download -json github.com/cert-manager/cert-manager
// which checks the module zip against go.sum and prints its directory.
module gpugate.local/tests/e2e/tools/cert-manager

go 1.26.0

require github.com/cert-manager/cert-manager v1.21.2
