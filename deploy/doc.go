// Package deploy holds what an operator runs beside Sekali: Prometheus'
// alert rules and their unit tests (prometheus/), Alertmanager's
// configuration (alertmanager/), and the Grafana dashboard with its
// provisioning (grafana/), which docker-compose.yml's observability
// profile mounts. It has no code: its test checks those files against
// promtool and against the series the server exports
// (docs/operations.md).
package deploy
