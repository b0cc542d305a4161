# shellcheck disable=SC2034 # PORT and URL are for the sourcing tests
# Sourced by the tests that start `swift-infer --serve` (infer-serve.bats, infer-toolcall.bats,
# eval-remote.bats): serve [ARGS] starts $INFER $MODEL on a free loopback port (--port 0: the
# server names it) and waits for /health, setting PID, PORT and URL; stop_server sends SIGTERM and
# checks the exit status 0 and that no key/value block was left in use; kill_server (teardown)
# kills what is left.
serve() {
    "$INFER" "$MODEL" --serve --host 127.0.0.1 --port 0 "$@" 2>"$T/err" 3>&- &
    PID=$!
    for _ in $(seq 100); do
        PORT=$(sed -n 's|.*on http://127.0.0.1:\([0-9]*\) .*|\1|p' "$T/err")
        if [ -n "$PORT" ] && curl -sf --max-time 2 "http://127.0.0.1:$PORT/health" >/dev/null; then
            URL=http://127.0.0.1:$PORT
            return 0
        fi
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    cat "$T/err"
    return 1
}

stop_server() {
    kill -TERM "$PID"
    local rc=0
    wait "$PID" || rc=$?
    PID=
    cat "$T/err"
    [ "$rc" -eq 0 ]
    grep -q " 0 KV blocks in use" "$T/err"
}

kill_server() {
    if [ -n "$PID" ]; then
        kill -KILL "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
    fi
}
