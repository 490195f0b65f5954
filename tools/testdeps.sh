#!/usr/bin/env bash
# make test-deps: the programs the tests run besides Go, installed through
# apt-get when one is missing, so that `make test` is the whole set-up on a
# fresh machine. What needs each:
#   chromium      the console's browser tests (cmd/sekali), at /usr/bin/chromium
#   pgbouncer     the PgBouncer tests (cmd/sekali, app/store)
#   node, npm     make loadtest-typecheck (the k6 scripts' types)
#   redis-server  every test that uses Redis starts a private one
#   prometheus    for its promtool: the alert rules' checks and unit tests
#                 (deploy); the server it also brings is stopped and
#                 disabled where systemd started it, since it would take
#                 :9090, a Sekali process's METRICS_ADDR
# It installs as root, or through sudo (which may ask for the password when
# run from a terminal). Otherwise, or without apt-get, or with
# TEST_DEPS=check, it stops at once and prints the one command to run.
set -euo pipefail

missing=() # Debian packages
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
[ -x /usr/bin/chromium ] || missing+=(chromium)
have pgbouncer || missing+=(pgbouncer)
have node || missing+=(nodejs)
have npm || missing+=(npm)
have redis-server || missing+=(redis-server)
have promtool || missing+=(prometheus)
[ ${#missing[@]} -eq 0 ] && exit 0

install="apt-get install -y ${missing[*]}"
stop() {
	echo "make test needs ${missing[*]}, which $1. Run:" >&2
	echo "  $2" >&2
	echo "then make test again." >&2
	exit 1
}
command -v apt-get >/dev/null 2>&1 ||
	stop "this machine lacks, and it has no apt-get" "your package manager's install of Chromium (at /usr/bin/chromium), PgBouncer, Node.js with npm, redis-server and promtool (Prometheus)"
if [ "$(id -u)" -eq 0 ]; then
	sudo=()
elif ! command -v sudo >/dev/null 2>&1; then
	stop "this machine lacks, and installing needs root" "su -c 'apt-get update && $install'"
elif [ -t 0 ] || sudo -n true 2>/dev/null; then
	sudo=(sudo)
else
	stop "this machine lacks, and sudo needs a password here" "sudo apt-get update && sudo $install"
fi
[ "${TEST_DEPS:-}" = check ] &&
	stop "this machine lacks (TEST_DEPS=check: not installing)" "${sudo[*]:+sudo }apt-get update && ${sudo[*]:+sudo }$install"

echo "make test needs ${missing[*]}: installing with apt-get"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y "${missing[@]}"
if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null 2>&1 &&
	systemctl is-active --quiet prometheus 2>/dev/null; then
	echo "stopping and disabling the Prometheus server the package started (only its promtool is needed)"
	"${sudo[@]}" systemctl disable --now prometheus
fi
