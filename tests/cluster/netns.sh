#!/bin/bash
# A simulated cluster on one machine: "nodes" as network namespaces on shaped links, OpenMPI
# across them over TCP on the links' addresses only (docs/distributed.md, "What we tested and
# how: nodes as network namespaces").
#
#   tests/cluster/netns.sh up STATE [NODES [RATE]]   namespaces, links, hostfile and agent in STATE
#   tests/cluster/netns.sh mpirun STATE ARGS...      mpirun -np NODES across them (one rank a node)
#   tests/cluster/netns.sh down STATE                remove all of it (also after a failed up)
#   tests/cluster/netns.sh with STATE NODES RATE CMD...  up, CMD, down (also on failure or ^C)
#   tests/cluster/netns.sh agent HOST CMD...         mpirun's launch agent (plm_rsh_agent)
#   tests/cluster/netns.sh check                     can this machine do it? (prints why not)
#   tests/cluster/netns.sh cpucheck                  can a node be CPU-limited (cgroup cpu)?
#
# Topology: a "switch" namespace with a bridge, and NODES namespaces node0..node{N-1}, each joined
# to the bridge by a veth pair; node i has 10.213.57.(i+1)/24 ($NETNS_SUBNET). Each link is
# shaped in both directions with a token bucket (`tc qdisc ... tbf rate RATE`, on the node's end
# and on the switch's end), so a node sends and receives at RATE (full duplex, like a NIC on a
# switch port). RATE is tc's syntax (1gbit, 20mbit); "none" leaves the links unshaped (veth
# speed). Per node, STATE/nodeI.rate overrides RATE before `up` (e.g. a slower node's NIC).
#
# mpirun runs inside node0 with a UTS namespace of its own (hostname node0), starts rank 0
# there and one orted per other node through `agent`, which enters that node's namespace (and
# its own UTS namespace: hostname nodeI). Entering is `nsenter --net`, not `ip netns exec`: the
# latter also remounts /sys, which hides /sys/fs/cgroup from the agent (a node's cgroup below). Transport: `--mca btl tcp,self` and
# `btl_tcp_if_include`/`oob_tcp_if_include` the subnet; a node's namespace holds only lo and its
# veth, so no other address can be used at all.
#
# Per node, before launching: STATE/nodeI.env (lines NAME=VALUE exported into that node's
# orted and ranks: e.g. FAKETIME for a skewed clock with libfaketime), STATE/nodeI.cpu_max
# ("QUOTA PERIOD" in microseconds: the node's processes run in a cgroup limited to that much
# CPU, a slower node). Node 0's env file applies to rank 0 too (mpirun is started with it).
#
# Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN), iproute2 with the sch_tbf qdisc, util-linux'
# unshare, OpenMPI. Names are prefixed with $NETNS_PREFIX (default sw<pid of up>), recorded in
# STATE, so parallel clusters do not collide.
set -Eeuo pipefail

SUBNET=${NETNS_SUBNET:-10.213.57}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() {
    echo "netns.sh: $*" >&2
    exit 1
}

addr() { echo "$SUBNET.$(($1 + 1))"; }

check() { # prints the reason and fails when namespaces, veth or tbf are not allowed here
    [ "$(id -u)" -eq 0 ] || {
        echo "not root (network namespaces need CAP_NET_ADMIN)"
        return 1
    }
    command -v ip >/dev/null || {
        echo "iproute2 (ip) not installed"
        return 1
    }
    command -v tc >/dev/null || {
        echo "tc (iproute2) not installed"
        return 1
    }
    command -v unshare >/dev/null && command -v nsenter >/dev/null || {
        echo "unshare/nsenter (util-linux) not installed"
        return 1
    }
    command -v mpirun >/dev/null || {
        echo "mpirun not installed (openmpi-bin)"
        return 1
    }
    local p="swchk$$" e
    if ! e=$(ip netns add "$p" 2>&1); then
        echo "ip netns add not allowed: $e"
        return 1
    fi
    local ok=0
    if ! e=$(ip -n "$p" link add "${p}a" type veth peer name "${p}b" 2>&1); then
        echo "veth not available: $e"
    elif ! e=$(ip -n "$p" link add "${p}br" type bridge 2>&1); then
        echo "bridge not available: $e"
    elif ! e=$(ip netns exec "$p" tc qdisc add dev "${p}a" root tbf rate 10mbit burst 16kb \
        latency 100ms 2>&1); then
        echo "tc tbf not available: $e"
    elif ! e=$(ip netns exec "$p" unshare --uts true 2>&1); then
        echo "unshare --uts not allowed: $e"
    else
        ok=1
    fi
    ip netns del "$p" 2>/dev/null || true
    [ $ok -eq 1 ]
}

shape() { # NS DEV RATE: token bucket on DEV's egress
    [ "$3" = none ] && return 0
    # burst: a few MTUs (a larger bucket lets a short exchange through above RATE); a queue of
    # up to 1 s at RATE (TCP's
    # window, not drops, should set the pace)
    ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$3" burst "${NETNS_BURST:-4kb}" latency 1s
}

up() {
    local st=$1 n=${2:-2} rate=${3:-1gbit}
    [ "$n" -ge 2 ] || die "up: at least 2 nodes"
    mkdir -p "$st"
    local p=${NETNS_PREFIX:-sw$$}
    echo "$p" >"$st/prefix"
    # a half-built cluster is removed (set -e exits after the trap)
    # shellcheck disable=SC2064 # expanded now: st is local
    trap "down $(printf %q "$st")" ERR
    echo "$n" >"$st/nodes"
    echo "$SUBNET" >"$st/subnet"
    ip netns add "${p}-sw"
    ip -n "${p}-sw" link add br0 type bridge
    ip -n "${p}-sw" link set br0 up
    ip -n "${p}-sw" link set lo up
    : >"$st/hostfile"
    local i r
    for i in $(seq 0 $((n - 1))); do
        r=$rate
        [ -f "$st/node$i.rate" ] && r=$(cat "$st/node$i.rate")
        ip netns add "${p}-n$i"
        # both ends created in the switch namespace, one moved: nothing in the caller's
        ip -n "${p}-sw" link add "p$i" type veth peer name "eth$i"
        ip -n "${p}-sw" link set "eth$i" netns "${p}-n$i"
        ip -n "${p}-sw" link set "p$i" master br0
        ip -n "${p}-sw" link set "p$i" up
        ip -n "${p}-n$i" link set lo up
        ip -n "${p}-n$i" addr add "$(addr "$i")/24" dev "eth$i"
        ip -n "${p}-n$i" link set "eth$i" up
        shape "${p}-n$i" "eth$i" "$r"  # node -> switch
        shape "${p}-sw" "p$i" "$r"     # switch -> node
        echo "$r" >"$st/node$i.link"
        echo "$(addr "$i") slots=1" >>"$st/hostfile"
    done
    cgroups "$st"
    trap - ERR
}

cgdir() { # STATE I: the node's cgroup directory (v2, else v1's cpu controller)
    local p
    p=$(cat "$1/prefix")
    if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        echo "/sys/fs/cgroup/${p}-n$2"
    else
        echo "/sys/fs/cgroup/cpu/${p}-n$2"
    fi
}

cpucheck() { # can a node be CPU-limited here (a cpu controller for cgroups)? Prints why not
    local d
    if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        if ! grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control; then
            # a fresh Debian 12 has it enabled by systemd; enable it for our children if not
            echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || {
                echo "cgroup v2 without the cpu controller (cannot enable +cpu at the root)"
                return 1
            }
        fi
        d=/sys/fs/cgroup/swchk$$
        mkdir "$d" 2>/dev/null && [ -f "$d/cpu.max" ] || {
            rmdir "$d" 2>/dev/null
            echo "cannot make a cgroup with cpu.max under /sys/fs/cgroup"
            return 1
        }
        rmdir "$d"
    elif [ -d /sys/fs/cgroup/cpu ]; then
        d=/sys/fs/cgroup/cpu/swchk$$
        mkdir "$d" 2>/dev/null && [ -f "$d/cpu.cfs_quota_us" ] || {
            rmdir "$d" 2>/dev/null
            echo "cannot make a cgroup (v1 cpu) under /sys/fs/cgroup/cpu"
            return 1
        }
        rmdir "$d"
    else
        echo "no cgroup cpu controller mounted"
        return 1
    fi
}

cgroups() { # a CPU-limited cgroup per node that has STATE/nodeI.cpu_max
    local st=$1 i q per d n
    n=$(cat "$st/nodes")
    for i in $(seq 0 $((n - 1))); do
        [ -f "$st/node$i.cpu_max" ] || continue
        read -r q per <"$st/node$i.cpu_max"
        d=$(cgdir "$st" "$i")
        mkdir -p "$d"
        if [ -f "$d/cpu.max" ]; then
            echo "$q $per" >"$d/cpu.max"
        elif [ -f "$d/cpu.cfs_quota_us" ]; then
            echo "$per" >"$d/cpu.cfs_period_us"
            echo "$q" >"$d/cpu.cfs_quota_us"
        else
            die "no cpu controller in $d (cgroup v2: enable +cpu in the parent's cgroup.subtree_control)"
        fi
    done
}

down() {
    local st=$1 p n i d
    [ -f "$st/prefix" ] || return 0
    p=$(cat "$st/prefix")
    n=$(cat "$st/nodes" 2>/dev/null || echo 0)
    for i in $(seq 0 $((n - 1))); do
        # processes left in a node (a killed job's orted): end them before the namespace goes
        for pid in $(ip netns pids "${p}-n$i" 2>/dev/null); do
            kill -KILL "$pid" 2>/dev/null || true
        done
        ip netns del "${p}-n$i" 2>/dev/null || true
        d=$(cgdir "$st" "$i")
        [ -d "$d" ] && rmdir "$d" 2>/dev/null || true
    done
    ip netns del "${p}-sw" 2>/dev/null || true
    rm -f "$st/prefix"
}

enter_node() { # STATE I: the exports and cgroup of node I, for the current shell
    local st=$1 i=$2 line d
    if [ -f "$st/node$i.cpu_max" ]; then
        d=$(cgdir "$st" "$i")
        echo $$ >"$d/cgroup.procs"
    fi
    if [ -f "$st/node$i.env" ]; then
        while IFS= read -r line; do
            [ -n "$line" ] && export "${line?}"
        done <"$st/node$i.env"
    fi
}

agent() { # HOST CMD...: run CMD (one shell command line, as ssh would) on HOST's node
    local host=$1
    shift
    local st=${NETNS_STATE:?agent: NETNS_STATE not set}
    local i=$((${host##*.} - 1)) p
    p=$(cat "$st/prefix")
    [ "$i" -ge 0 ] && [ -e "/run/netns/${p}-n$i" ] || die "agent: no node for host '$host'"
    enter_node "$st" "$i"
    exec nsenter --net="/run/netns/${p}-n$i" unshare --uts /bin/sh -c 'hostname "$1"; shift; eval "$*"' \
        agent "node$i" "$@"
}

run_mpirun() { # STATE ARGS...
    local st=$1
    shift
    local p n sub
    p=$(cat "$st/prefix")
    n=$(cat "$st/nodes")
    sub="$(cat "$st/subnet").0/24"
    export NETNS_STATE=$st
    enter_node "$st" 0
    # the environment a test may carry (mpi_env.bash) must not pick shared memory or other
    # interfaces: the command line below is the whole transport choice
    unset OMPI_MCA_btl OMPI_MCA_btl_vader_single_copy_mechanism
    exec nsenter --net="/run/netns/${p}-n0" unshare --uts /bin/sh -c 'hostname node0; shift; exec "$@"' \
        mpirun-node0 "" mpirun -np "$n" --hostfile "$st/hostfile" \
        --mca plm_rsh_agent "$here/netns.sh agent" --mca plm_rsh_no_tree_spawn 1 \
        --mca btl tcp,self --mca btl_tcp_if_include "$sub" --mca oob_tcp_if_include "$sub" \
        --mca pml ob1 --bind-to none --oversubscribe -x NETNS_STATE "$@"
}

with() { # STATE NODES RATE CMD...: up, CMD (mpirun is "netns.sh mpirun STATE"), down whatever
    local st=$1 n=$2 rate=$3 rc=0
    shift 3
    # shellcheck disable=SC2064 # expanded now: st is local
    trap "down $(printf %q "$st")" EXIT
    trap 'exit 130' INT TERM
    up "$st" "$n" "$rate"
    "$@" || rc=$?
    return $rc
}

cmd=${1:-}
shift || true
case "$cmd" in
check) check ;;
cpucheck) cpucheck ;;
up) up "$@" ;;
down) down "$@" ;;
agent) agent "$@" ;;
mpirun) run_mpirun "$@" ;;
with) with "$@" ;;
*)
    echo "usage: netns.sh check|cpucheck|up STATE [NODES [RATE]]|mpirun STATE ARGS...|down STATE|with STATE NODES RATE CMD..." >&2
    exit 2
    ;;
esac
