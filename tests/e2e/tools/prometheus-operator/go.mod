// Pinned only for prometheus-operator's ServiceMonitor CustomResourceDefinition
// (example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml
// of the module), which tests/e2e/test_chart.py applies to the e2e control
// plane before the chart's ServiceMonitor. No code is built or imported from
// it; it is not `go mod tidy`'d (tidy would drop the unused requirement).
// tests/e2e/build-tools.sh runs `go mod download` here (checked against
// go.sum) and copies the file into its cache.
module gpugate.local/tests/e2e/tools/prometheus-operator

go 1.26.0

require github.com/prometheus-operator/prometheus-operator v0.85.0
