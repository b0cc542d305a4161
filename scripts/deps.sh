#!/bin/sh
# Install the Debian packages swift-tools needs; quick when they are all present.
# One list for the build, the tests, the demo and CI (README.md, docs/architecture.md).
# Slurm + munge: the one-machine cluster of tests/cluster/slurm.sh (tests/cli/slurm.bats);
# Slurm's PMIx plugin (srun --mpi=pmix) loads libpmix.so, which libpmix-dev provides. On a
# machine with systemd the packages enable munge/slurmd/slurmctld units: munged starts with
# Debian's own key and socket, the Slurm units do nothing without /etc/slurm/slurm.conf; the
# tests use neither.
set -eu
PKGS="gcc make pkg-config git ca-certificates
libjansson-dev zlib1g-dev libarchive-dev libcurl4-openssl-dev libssl-dev
libopenblas-dev libdnnl-dev libpcre2-dev libutf8proc-dev libyaml-dev libmicrohttpd-dev
libjpeg62-turbo-dev libpng-dev libwebp-dev
openmpi-bin libopenmpi-dev
slurmctld slurmd slurm-client munge libpmix-dev
libcmocka-dev bats perl jq python3 help2man bsdutils
openssl curl
iproute2 util-linux faketime"
missing=
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing:$missing" >&2
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >&2
