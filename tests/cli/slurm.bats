#!/usr/bin/env bats
# swift-train under a real Slurm: a one-machine cluster from Debian's packages
# (tests/cluster/slurm.sh: slurmctld, slurmd and munged on loopback, their own configuration and
# spool directories), started once for this file and stopped in teardown_file (a watchdog stops
# it too if this run is killed).
#
#   - `sbatch pipelines/slurm/train.sbatch` runs to the end: the job completes, the run
#     directory, checkpoints, one trace per rank and the analyzer's report land;
#   - preemption: the signal that the script's `#SBATCH --signal=B:TERM@120` sends (delivered
#     at once with `scancel --batch --signal=TERM`), and a plain `scancel --signal=TERM` to the
#     tasks: checkpoint on every rank, exit 75, the script requeues the job, the requeued run
#     resumes from the checkpoint and ends with the uninterrupted run's losses and weights;
#   - `srun -n 2 --mpi=pmix swift-train` (OpenMPI started through Slurm's PMIx plugin) gives
#     the losses and weights of `mpirun -np 2`.
#
# Skipped, saying why, when the Slurm packages are missing or this is not root; under CI=true
# (root on a fresh Debian 12 machine, scripts/deps.sh installed them) that is a failure instead.

M=tests/fixtures/model/llama
D=tests/fixtures/shards
T="$SWIFT_BIN/swift-train"
SB=pipelines/slurm/train.sbatch

cannot_run() { # why this machine cannot run the cluster; nothing when it can
    local p
    for p in slurmctld slurmd srun sbatch scontrol munged; do
        command -v "$p" >/dev/null ||
            { echo "$p not installed (scripts/deps.sh: slurmctld slurmd slurm-client munge)" &&
                return; }
    done
    [ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so ] || [ -n "$(find /usr/lib* \
        -name mpi_pmix.so -path '*slurm*' 2>/dev/null | head -1)" ] ||
        { echo "Slurm's PMIx plugin (mpi_pmix.so) not installed"; return; }
    command -v mpirun >/dev/null || { echo "mpirun not installed (openmpi-bin)"; return; }
    [ "$(id -u)" -eq 0 ] || echo "not root: slurmd starts jobs as their user"
}

setup_file() {
    local why
    why=$(cannot_run)
    if [ -n "$why" ]; then
        if [ "${CI:-}" = true ]; then
            echo "# CI: the Slurm tests must run here, but $why" >&3
            return 1
        fi
        skip "$why"
    fi
    cd "$BATS_TEST_DIRNAME/../.."
    # a short path: munged's socket lives under it (108 bytes at most)
    SLURM_DIR=$(mktemp -d /tmp/swift-slurm.XXXXXX)
    export SLURM_DIR
    SECONDS=0
    # the watchdog follows this file's bats process ($$): nothing outlives the run
    eval "$(bash tests/cluster/slurm.sh up "$SLURM_DIR" $$)" || {
        echo "# the cluster did not start; logs:" >&3
        tail -n 20 "$SLURM_DIR"/log/* | sed 's/^/# /' >&3
        bash tests/cluster/slurm.sh down "$SLURM_DIR"
        return 1
    }
    export SLURM_CONF
    echo "# slurm: one-node cluster up in ${SECONDS}s ($SLURM_DIR)" >&3
    # what the jobs' ranks inherit (sbatch and srun pass the environment on): mpirun as root,
    # shared memory between the ranks, the ASan build's suppressions
    . "$BATS_TEST_DIRNAME/mpi_env.bash"
    export SWIFT_BIN
}

teardown_file() {
    [ -n "${SLURM_DIR:-}" ] || return 0
    bash "$BATS_TEST_DIRNAME/../cluster/slurm.sh" down "$SLURM_DIR"
    # nothing of the cluster is left running
    local left
    left=$(for e in /proc/[0-9]*/environ; do
        { tr '\0' '\n' <"$e"; } 2>/dev/null | grep -qxF "SWIFT_SLURM_DIR=$SLURM_DIR" &&
            { p=${e#/proc/}; echo "${p%/environ}"; }
    done)
    rm -rf "$SLURM_DIR"
    [ -z "$left" ] || {
        for p in $left; do echo "# left running: $p $(tr "\0" " " </proc/$p/cmdline)" >&3; done
        return 1
    }
}

setup() {
    cd "$BATS_TEST_DIRNAME/../.."
    W=$BATS_FILE_TMPDIR
}

teardown() {
    if [ -n "${D2:-}" ]; then # the second cluster of the watchdog test
        bash tests/cluster/slurm.sh down "$D2"
        rm -rf "$D2"
    fi
}

losses() { # the "loss" values of a logging.jsonl or a stdout capture
    grep '"loss"' "$1" | sed 's/.*"loss":\([^,]*\),.*/\1/'
}

job_field() { # JOBID FIELD: the field of `scontrol show job` (one line)
    scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p"
}

wait_job() { # JOBID SECONDS: until the job has ended; prints its final state
    local s
    for _ in $(seq $(($2 * 5))); do
        s=$(job_field "$1" JobState)
        case $s in
        COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE)
            echo "$s"
            return 0
            ;;
        esac
        sleep 0.2
    done
    echo "still ${s:-unknown} after $2 s"
    scontrol show job "$1" >&2
    return 1
}

wait_logged() { # FILE N: until FILE has N loss records (60 s at most)
    local n
    for _ in $(seq 600); do
        n=$(grep -c '"loss"' "$1" 2>/dev/null || true)
        [ "${n:-0}" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}

submit() { # NAME [SBATCH OPTION]... -- [TRAIN OPTION]...: sbatch on 1 node x 2 tasks, the job id
    local name=$1 opts=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        opts+=("$1")
        shift
    done
    shift
    # SWIFT_SLURM_DIR marks the job's processes for `slurm.sh down` (sbatch passes it on)
    SWIFT_SLURM_DIR=$SLURM_DIR sbatch --parsable --job-name="$name" --nodes=1 \
        --ntasks-per-node=2 --cpus-per-task=1 --chdir="$W" --output="$W/%x-%j.out" "${opts[@]}" \
        "$PWD/$SB" --model "$PWD/$M" \
        "$@" "$PWD/$D"
}

# 24 steps of LoRA with dropout on 2 ranks; checkpoints every 8 steps
train=(--max-steps 24 --logging-steps 1 --save-steps 8 --eval-steps 100 --learning-rate 1e-3
    --per-device-train-batch-size 2 --lora-dropout 0.1 --seed 7)

same_run() { # RUN_A RUN_B: the same 24 losses, the last checkpoints hold the same adapter
    # and optimizer state (bit for bit)
    local f
    [ "$(losses "$1/logging.jsonl" | wc -l)" -eq 24 ]
    diff <(losses "$1/logging.jsonl") <(losses "$2/logging.jsonl")
    for f in adapter_model.safetensors optimizer.safetensors; do
        cmp "$1/checkpoint-24/$f" "$2/checkpoint-24/$f"
    done
}

preempt() { # NAME HOW [ENV=VALUE]...: submit, signal after 3 steps, follow the requeue; the run
    # then has to equal the uninterrupted one of the first test
    local name=$1 how=$2 at
    shift 2
    [ -s "$W/reference" ] || skip "needs the run of the first test"
    SECONDS=0
    id=$(
        [ $# -eq 0 ] || export "$@"
        submit "$name" -- "${train[@]}" --data-delay-ms 100
    )
    [[ $id =~ ^[0-9]+$ ]]
    run_dir=$W/runs/$name-$id
    wait_logged "$run_dir/logging.jsonl" 3
    at=$SECONDS
    case $how in
    batch) scancel --batch --signal=TERM "$id" ;; # what --signal=B:TERM@120 sends
    tasks) scancel --signal=TERM "$id" ;;
    esac
    state=$(wait_job "$id" 180) || { cat "$W/$name-$id.out"; false; }
    out=$W/$name-$id.out
    cat "$out"
    stop='^swift-train: SIG[A-Z0-9]*: checkpoint-\([0-9]*\) written; exiting with 75$'
    ckpt=$(sed -n "s/$stop/\\1/p" "$out" | sort -u)
    echo "# $name: job $id, signal ($how) after ${at}s, checkpoint-$ckpt on both ranks," \
        "exit 75, requeued $(job_field "$id" Restarts)x, $state after ${SECONDS}s in all" >&3
    [ "$state" = COMPLETED ]
    [ "$(job_field "$id" Restarts)" = 1 ]
    [ "$(job_field "$id" ExitCode)" = 0:0 ]
    # both ranks checkpointed and stopped at the same step; the script requeued the job
    [ "$(sed -n "s/$stop/\\1/p" "$out" | grep -cx "$ckpt")" -eq 2 ]
    grep -q "^checkpointed after a signal: requeueing job $id$" "$out"
    # the requeued run resumed there (the log of the first run is kept: --open-mode=append)
    grep -q "^swift-train: resumed from runs/$name-$id/checkpoint-$ckpt (step $ckpt of 24" "$out"
    [ "$ckpt" -ge 3 ]
    [ "$ckpt" -lt 24 ]
    same_run "$(cat "$W/reference")" "$run_dir"
    echo "# $name: losses of all 24 steps and the final adapter + optimizer state equal the" \
        "uninterrupted job's bit for bit" >&3
}

@test "sbatch pipelines/slurm/train.sbatch: the job completes; run directory, traces and report land" {
    SECONDS=0
    id=$(submit full -- "${train[@]}")
    [[ $id =~ ^[0-9]+$ ]]
    state=$(wait_job "$id" 180) || { cat "$W/full-$id.out"; false; }
    out=$W/full-$id.out
    cat "$out"
    echo "# sbatch: job $id (1 node x 2 tasks, 24 steps) $state in ${SECONDS}s" >&3
    [ "$state" = COMPLETED ]
    [ "$(job_field "$id" ExitCode)" = 0:0 ]
    [ "$(job_field "$id" Restarts)" = 0 ]
    run_dir=$W/runs/full-$id
    # both ranks ran under srun --mpi=pmix in this job; the trainer took -j from Slurm
    grep -q "^swift-train: rank 0 of 2 on .*, srun, slurm job $id)" "$out"
    grep -q "^swift-train: rank 1 of 2 on .*, srun, slurm job $id)" "$out"
    [ "$(grep -c '"event":"done"' "$out")" -eq 1 ]
    [ "$(losses "$run_dir/logging.jsonl" | wc -l)" -eq 24 ]
    for n in 8 16 24; do
        [ -f "$run_dir/checkpoint-$n/adapter_model.safetensors" ]
    done
    grep -q '"world_size": 2' "$run_dir/checkpoint-24/trainer_state.json"
    # one trace per rank, each with its rank and the 24 gradient all-reduces
    for r in 0 1; do
        f=$(ls "$run_dir"/traces/*-r$r.trace.jsonl)
        grep '"swift_meta"' "$f" | grep -q "\"rank\":$r"
        grep '"swift_meta"' "$f" | grep -q '"world_size":2'
        [ "$(grep '"name":"grad_sync"' "$f" | grep -c '"cat":"comm"')" -eq 24 ]
    done
    # the analyzer's report, written by the script at the end of the job
    grep -q '^swift-trace-analyze .*: 2 processes' "$run_dir/report.txt"
    grep -q '^Collectives across ranks' "$run_dir/report.txt"
    echo "$run_dir" >"$W/reference"
}

@test "preemption: the script's --signal=B:TERM (scancel --batch --signal=TERM) checkpoints, exits 75, requeues, resumes exactly" {
    preempt batch batch
}

@test "preemption: scancel --signal=TERM to the tasks checkpoints, exits 75, requeues, resumes exactly" {
    preempt tasks tasks
}

@test "preemption with LAUNCHER=mpirun (OpenMPI's mpirun inside the allocation) resumes exactly" {
    preempt mpirun batch LAUNCHER=mpirun
    grep -q "^swift-train: rank 1 of 2 on .*, mpirun, slurm job $id)" "$out"
    grep -q '^mpirun: Forwarding signal 10 to job' "$out"
}

@test "srun -n 2 --mpi=pmix swift-train equals mpirun -np 2: losses and weights bit for bit" {
    SECONDS=0
    SWIFT_SLURM_DIR=$SLURM_DIR timeout 120 srun -n 2 --mpi=pmix --chdir="$PWD" "$T" --model $M \
        "${train[@]}" -j 1 \
        -o "$W/srun" --trace "$W/srun-tr/" $D </dev/null >"$W/srun.out" 2>"$W/srun.err" ||
        { cat "$W/srun.err"; false; }
    t_srun=$SECONDS
    cat "$W/srun.err"
    grep -q '^swift-train: rank 1 of 2 on .*, srun, slurm job [0-9]*)' "$W/srun.err"
    # PMIx started both ranks as one MPI world: one run directory, 24 all-reduces per rank
    [ "$(grep -c '"event":"done"' "$W/srun.out")" -eq 1 ]
    for r in 0 1; do
        [ "$(grep -c '"name":"grad_sync"' "$W"/srun-tr/*-r$r.trace.jsonl)" -eq 24 ]
    done
    SECONDS=0
    timeout 120 env -u SLURM_CONF mpirun -np 2 --oversubscribe --bind-to none "$T" --model $M \
        "${train[@]}" -j 1 -o "$W/mpirun" $D </dev/null >"$W/mpirun.out" 2>"$W/mpirun.err" ||
        { cat "$W/mpirun.err"; false; }
    t_mpirun=$SECONDS
    grep -q '^swift-train: rank 1 of 2 on .*, mpirun)' "$W/mpirun.err"
    same_run "$W/mpirun" "$W/srun"
    diff <(grep '"eval_loss"' "$W/mpirun.out") <(grep '"eval_loss"' "$W/srun.out")
    echo "# srun --mpi=pmix (${t_srun}s) and mpirun -np 2 (${t_mpirun}s): 24 losses, eval loss," \
        "adapter and optimizer state identical" >&3
}

@test "tests/cluster/slurm.sh: a second cluster beside the first; its watchdog stops it when its owner is gone" {
    D2=$(mktemp -d /tmp/swift-slurm.XXXXXX)
    sleep 600 3>&- &
    owner=$!
    SECONDS=0
    run bash tests/cluster/slurm.sh up "$D2" $owner
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"export SLURM_CONF=$D2/slurm.conf"* ]]
    [ "$(SLURM_CONF=$D2/slurm.conf sinfo -h -N -o %t)" = idle ]
    # only loopback: slurmctld and slurmd listen on 127.0.0.1
    for p in $(sed -n 's/^Slurm\(ctld\|d\)Port=//p' "$D2/slurm.conf"); do
        grep -q "^ *[0-9]*: 0100007F:$(printf %04X "$p") 00000000:0000 0A " /proc/net/tcp
        ! grep -q "^ *[0-9]*: 00000000:$(printf %04X "$p") 00000000:0000 0A " /proc/net/tcp
    done
    pids="$(cat "$D2"/run/munged.pid "$D2"/run/slurmctld.pid "$D2"/run/slurmd.pid)"
    kill $owner
    for _ in $(seq 200); do
        alive=
        for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ -z "$alive" ] && break
        sleep 0.1
    done
    echo "# watchdog: second cluster up, then down ${SECONDS}s after start" >&3
    [ -z "$alive" ]
    # the first cluster still works
    [ "$(sinfo -h -N -o %t)" = idle ]
}
