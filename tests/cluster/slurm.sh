#!/bin/bash
# A one-machine Slurm cluster from Debian's packages (slurmctld, slurmd, slurm-client, munge;
# scripts/deps.sh installs them), for tests/cli/slurm.bats and for trying pipelines/slurm/ by hand.
#
#   tests/cluster/slurm.sh up DIR [OWNER_PID]   start; prints `export SLURM_CONF=DIR/slurm.conf`
#   tests/cluster/slurm.sh down DIR             stop everything started by `up DIR`; always exit 0
#
# Everything lives under DIR (created when missing): slurm.conf, mpi.conf, cgroup.conf, a munge
# key made for this run, munged's socket, state, spool, PMIx, pid and log files. The daemons
# listen on free ports of 127.0.0.1 only (CommunicationParameters=NoCtldInAddrAny,NoInAddrAny).
# One node, "swift0", with the machine's CPUs (at least 2: config_overrides), one partition
# "debug". Processes are tracked with proctrack/linuxproc and tasks are bound with task/affinity
# (sched_setaffinity): no cgroups are needed, which a container may not allow.
# AuthInfo=cred_expire=5: a requeued job may start again 6 s later (Slurm's default is 121 s).
# Run as root (slurmd starts jobs as their user; SlurmUser=root).
#
# With OWNER_PID, a watchdog runs `down DIR` as soon as that process is gone (a killed test run
# leaves nothing behind). `down` cancels the jobs, stops slurmd, slurmctld and munged by their pid
# files, then kills whatever still carries SWIFT_SLURM_DIR=DIR in its environment (the daemons,
# slurmstepd and the job processes of jobs submitted with that variable set).
set -Eeuo pipefail # -E: the ERR trap of `up` also fires inside functions

die() {
    echo "slurm.sh: $*" >&2
    exit 1
}

free_port() { # PORT= a TCP port nobody listens on (IPv4 or IPv6) nor in TAKEN, 20000-44999
    local used p _sl local_addr _rem st _rest
    used=$(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
        while read -r _sl local_addr _rem st _rest; do
            if [ "$st" = 0A ]; then echo $((16#${local_addr##*:})); fi
        done | sort -u)
    for _ in $(seq 200); do
        p=$((20000 + RANDOM % 25000))
        if ! grep -qx "$p" <<<"$used" && [[ " $TAKEN " != *" $p "* ]]; then
            TAKEN="$TAKEN $p"
            PORT=$p
            return 0
        fi
    done
    die "no free TCP port found"
}

marked_pids() { # pids whose environment holds SWIFT_SLURM_DIR=$1, except this shell's ancestry
    local e p self=" $$ $BASHPID " q=$$
    while [ "$q" -gt 1 ]; do
        q=$(sed 's/.*) //' "/proc/$q/stat" 2>/dev/null | cut -d' ' -f2) || break
        [ -n "$q" ] || break
        self="$self$q "
    done
    for e in /proc/[0-9]*/environ; do
        p=${e#/proc/}
        p=${p%/environ}
        case $self in *" $p "*) continue ;; esac
        if { tr "\\0" "\\n" <"$e"; } 2>/dev/null | grep -qxF "SWIFT_SLURM_DIR=$1"; then
            echo "$p"
        fi
    done
}

wait_gone() { # SECONDS PID...: until none of the pids runs; 1 when some still do
    local t=$1 p alive
    shift
    for _ in $(seq $((t * 10))); do
        alive=
        for p in "$@"; do
            if kill -0 "$p" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null
            then alive=1; fi
        done
        [ -z "$alive" ] && return 0
        sleep 0.1
    done
    return 1
}

stop_pidfile() { # FILE: TERM the daemon it names, wait up to 10 s, then KILL
    local p
    [ -s "$1" ] || return 0
    p=$(cat "$1")
    if kill -TERM "$p" 2>/dev/null; then
        wait_gone 10 "$p" || kill -KILL "$p" 2>/dev/null || true
    fi
    rm -f "$1"
}

down() {
    local d=$1 left
    unset SWIFT_SLURM_DIR # what this runs is not marked
    [ -d "$d" ] || return 0
    d=$(cd "$d" && pwd)
    if [ -f "$d/slurm.conf" ] && [ -s "$d/run/slurmctld.pid" ]; then
        # cancel the jobs first, so that slurmstepd ends them the normal way
        SLURM_CONF=$d/slurm.conf timeout 10 scancel --full --quiet --partition debug \
            2>/dev/null || true
        for _ in $(seq 50); do
            [ -z "$(SLURM_CONF=$d/slurm.conf timeout 5 squeue -h -t R,CG,S 2>/dev/null)" ] && break
            sleep 0.2
        done
    fi
    stop_pidfile "$d/run/slurmd.pid"
    stop_pidfile "$d/run/slurmctld.pid"
    stop_pidfile "$d/run/munged.pid"
    # job processes, slurmstepd, a daemon whose pid file was not written yet
    left=$(marked_pids "$d")
    if [ -n "$left" ]; then
        # shellcheck disable=SC2086
        kill -TERM $left 2>/dev/null || true
        # shellcheck disable=SC2086
        wait_gone 5 $left || kill -KILL $left 2>/dev/null || true
    fi
    if [ -s "$d/run/watchdog.pid" ] && [ "$(cat "$d/run/watchdog.pid")" != "$BASHPID" ]; then
        kill "$(cat "$d/run/watchdog.pid")" 2>/dev/null || true
        rm -f "$d/run/watchdog.pid"
    fi
    return 0
}

write_conf() { # DIR CTLD_PORT SLURMD_PORT (srun listens on ports the kernel picks)
    local d=$1 host cpus
    host=$(hostname -s)
    cpus=$(nproc)
    [ "$cpus" -ge 2 ] || cpus=2
    cat >"$d/slurm.conf" <<EOF
# written by tests/cluster/slurm.sh up $d
ClusterName=swift
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$2
SlurmdPort=$3
CommunicationParameters=NoAddrCache,NoCtldInAddrAny,NoInAddrAny
MailProg=/bin/true
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/munge.socket,cred_expire=5
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=600
KillWait=10
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
MessageTimeout=20
SchedulerParameters=sched_interval=1
JobRequeue=1
NodeName=swift0 NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=swift0 Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    # srun --mpi=pmix: the PMIx plugin's per-job directories under DIR too (not /tmp)
    printf 'PMIxCliTmpDirBase=%s/pmix\n' "$d" >"$d/mpi.conf"
    # read only by the cgroup plugins, which this configuration does not load
    printf 'CgroupPlugin=autodetect\nConstrainCores=no\nConstrainRAMSpace=no\n' >"$d/cgroup.conf"
}

up() {
    local d=$1 owner=${2:-} p
    for p in slurmctld slurmd munged sinfo sbatch; do
        command -v "$p" >/dev/null || die "$p not installed (scripts/deps.sh installs slurmctld," \
            "slurmd, slurm-client and munge)"
    done
    [ "$(id -u)" -eq 0 ] || die "run as root (slurmd starts jobs as their user)"
    mkdir -p "$d"
    d=$(cd "$d" && pwd)
    [ ! -s "$d/run/slurmctld.pid" ] || die "$d: a cluster is already up there (down first)"
    mkdir -p "$d/munge" "$d/state" "$d/spool/swift0" "$d/pmix" "$d/run" "$d/log"
    chmod 711 "$d/munge" # the socket is reached by every user, the key by root only
    export SWIFT_SLURM_DIR=$d SLURM_CONF=$d/slurm.conf
    trap 'trap - ERR; echo "slurm.sh: start-up failed; logs in $d/log:" >&2
          tail -n 5 "$d"/log/* >&2 || true; down "$d"' ERR
    # munge: a key for this run only, its own socket
    dd if=/dev/urandom of="$d/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$d/munge/munge.key"
    munged --force --key-file="$d/munge/munge.key" --socket="$d/munge/munge.socket" \
        --pid-file="$d/run/munged.pid" --log-file="$d/log/munged.log" \
        --seed-file="$d/munge/munged.seed" 2>>"$d/log/munged.log"
    for _ in $(seq 50); do [ -S "$d/munge/munge.socket" ] && break; sleep 0.1; done
    munge -n -S "$d/munge/munge.socket" | unmunge -S "$d/munge/munge.socket" >/dev/null
    # a port taken between the choice and the bind fails the start: three tries
    local try ctld slurmd state=
    for try in 1 2 3; do
        TAKEN=
        free_port
        ctld=$PORT
        free_port
        slurmd=$PORT
        write_conf "$d" "$ctld" "$slurmd"
        slurmctld -f "$d/slurm.conf" -i
        slurmd -f "$d/slurm.conf" -N swift0
        for _ in $(seq 300); do
            state=$(timeout 5 sinfo -h -N -o %t 2>/dev/null || true)
            [ "$state" = idle ] && break
            sleep 0.1
        done
        [ "$state" = idle ] && break
        echo "slurm.sh: node state '${state:-?}' after 30 s, not idle (try $try of 3)" >&2
        stop_pidfile "$d/run/slurmd.pid"
        stop_pidfile "$d/run/slurmctld.pid"
    done
    [ "$state" = idle ]
    trap - ERR
    if [ -n "$owner" ]; then
        # a watchdog outside the marked processes: `down` when the owner is gone
        (
            unset SWIFT_SLURM_DIR
            trap 'exit 0' TERM
            while kill -0 "$owner" 2>/dev/null; do sleep 1; done
            down "$d"
        ) </dev/null >/dev/null 2>&1 &
        echo $! >"$d/run/watchdog.pid"
    fi
    echo "slurm.sh: cluster up in $d: slurmctld :$ctld, slurmd :$slurmd (127.0.0.1)," \
        "node swift0 idle with $(sinfo -h -N -o %c) CPUs" >&2
    echo "export SLURM_CONF=$d/slurm.conf"
}

case ${1:-} in
up)
    [ $# -ge 2 ] || die "usage: slurm.sh up DIR [OWNER_PID]"
    up "$2" "${3:-}"
    ;;
down)
    [ $# -eq 2 ] || die "usage: slurm.sh down DIR"
    down "$2"
    ;;
*)
    echo "usage: slurm.sh up DIR [OWNER_PID] | down DIR" >&2
    exit 2
    ;;
esac
