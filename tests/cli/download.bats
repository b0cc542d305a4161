#!/usr/bin/env bats
# swift-download against a real HTTP server on loopback (tests/cli/hubserver.py) that speaks the
# Hugging Face and ModelScope protocols and injects faults: dropped connections, 503 with
# Retry-After, corrupted bodies, slow answers, 401 and 404.

setup() {
    B=$SWIFT_BIN/swift-download
    T=$BATS_TEST_TMPDIR
    HS=$BATS_TEST_DIRNAME/hubserver.py
    SIZE=3000000
    mkdir -p "$T/root/org/model/sub" "$T/root/datasets/org/data"
    printf '{"model_type":"llama"}\n' >"$T/root/org/model/config.json"
    head -c "$SIZE" /dev/urandom >"$T/root/org/model/model.safetensors"
    head -c 5000 /dev/urandom >"$T/root/org/model/tokenizer.json"
    printf 'hello\n' >"$T/root/org/model/sub/notes.txt"
    : >"$T/root/org/model/sub/empty.txt"
    printf 'pickle\n' >"$T/root/org/model/old.pt"
    printf '{"q":"a"}\n' >"$T/root/datasets/org/data/train.jsonl"
    echo '[]' >"$T/faults.json"
    SERVER_PID=
}

teardown() {
    stop_server
}

# start_server [hubserver options]: listens on 127.0.0.1, a free port; sets EP
start_server() {
    rm -f "$T/port"
    python3 "$HS" --root "$T/root" --port-file "$T/port" --log "$T/log" \
        --faults "$T/faults.json" "$@" >"$T/server.err" 2>&1 3>&- &
    SERVER_PID=$!
    for _ in $(seq 100); do
        [ -s "$T/port" ] && break
        sleep 0.05
    done
    [ -s "$T/port" ] || { cat "$T/server.err"; return 1; }
    EP=http://127.0.0.1:$(cat "$T/port")
}

stop_server() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=
    fi
}

sha() { sha256sum "$1" | cut -d' ' -f1; }

# bytes of FILE's body the server sent, over all requests so far
served() {
    python3 -c 'import json,sys
print(sum(r.get("sent",0) for r in map(json.loads,open(sys.argv[1])) if r.get("file")==sys.argv[2] and r["status"] in (200,206)))' "$T/log" "$1"
}

# the JSON line of stdout for PATH: KEY
field() {
    python3 -c 'import json,sys
for l in sys.argv[1].splitlines():
    if l.startswith("{"):
        r=json.loads(l)
        if r["path"]==sys.argv[2]: print(r[sys.argv[3]])' "$output" "$1" "$2"
}

@test "hf: full download, JSON lines, manifest with the right sha256, default ignores" {
    start_server
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" -q
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | grep -c '^{')" -eq 5 ]
    for f in config.json model.safetensors tokenizer.json sub/notes.txt sub/empty.txt; do
        cmp "$T/root/org/model/$f" "$T/out/$f"
        [ "$(field "$f" sha256)" = "$(sha "$T/root/org/model/$f")" ]
        [ "$(field "$f" status)" = downloaded ]
    done
    [ ! -e "$T/out/old.pt" ] # ms-swift's default ignore patterns
    run python3 -c 'import json,sys,hashlib
m=json.load(open(sys.argv[1]+"/manifest.json"))
assert m["version"]==1 and m["revision"]=="main" and len(m["commit"])==40, m
for e in m["files"]:
    d=open(sys.argv[1]+"/"+e["file"],"rb").read()
    assert hashlib.sha256(d).hexdigest()==e["sha256"] and len(d)==e["size"], e
    assert e["source"].startswith("http://127.0.0.1:") and e["revision"]==m["commit"], e
print(len(m["files"]))' "$T/out"
    [ "$status" -eq 0 ]
    [ "$output" = 5 ]
    [ -z "$(find "$T/out" -name '*.incomplete')" ]
}

@test "hf: a second run fetches nothing (cached)" {
    start_server
    "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" -q >/dev/null
    before=$(served model.safetensors)
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" -q
    [ "$status" -eq 0 ]
    [ "$(field model.safetensors status)" = cached ]
    [ "$(served model.safetensors)" -eq "$before" ]
}

@test "hf cache layout: blobs, snapshots/<commit> symlinks, refs/main (HF_HOME)" {
    start_server
    HF_HOME=$T/hf HF_ENDPOINT=$EP run "$B" --use-hf org/model -q
    [ "$status" -eq 0 ]
    repo=$T/hf/hub/models--org--model
    commit=$(cat "$repo/refs/main")
    [ ${#commit} -eq 40 ]
    [ -L "$repo/snapshots/$commit/model.safetensors" ]
    [ "$(readlink "$repo/snapshots/$commit/model.safetensors")" = \
        "../../blobs/$(sha "$T/root/org/model/model.safetensors")" ]
    [ "$(readlink "$repo/snapshots/$commit/sub/notes.txt")" = \
        "../../../blobs/$(git hash-object "$T/root/org/model/sub/notes.txt")" ]
    cmp "$T/root/org/model/model.safetensors" "$repo/snapshots/$commit/model.safetensors"
    cmp "$T/root/org/model/sub/notes.txt" "$repo/snapshots/$commit/sub/notes.txt"
}

@test "modelscope (default hub): MODELSCOPE_DOMAIN, MODELSCOPE_CACHE layout, datasets" {
    start_server
    mkdir -p "$T/root/org/m.v2"
    printf '{}' >"$T/root/org/m.v2/config.json"
    MODELSCOPE_DOMAIN=$EP MODELSCOPE_CACHE=$T/ms run "$B" org/m.v2 -q
    [ "$status" -eq 0 ]
    cmp "$T/root/org/m.v2/config.json" "$T/ms/models/org/m___v2/config.json"
    [ -f "$T/ms/models/org/m___v2/manifest.json" ]
    run "$B" --endpoint "$EP" --dataset org/data -o "$T/ds" -q
    [ "$status" -eq 0 ]
    cmp "$T/root/datasets/org/data/train.jsonl" "$T/ds/train.jsonl"
    grep -q 'api/v1/datasets/org/data/repo/files' "$T/log"
}

@test "--include / --exclude globs" {
    start_server
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" -q --include '*.json' --exclude 'tok*'
    [ "$status" -eq 0 ]
    [ -f "$T/out/config.json" ]
    [ ! -e "$T/out/tokenizer.json" ]
    [ ! -e "$T/out/model.safetensors" ]
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/all" -q --all-files
    [ "$status" -eq 0 ]
    [ -f "$T/all/old.pt" ]
}

@test "interrupted download resumes from the .incomplete file without re-fetching bytes" {
    echo '[{"match":"model.safetensors","kind":"drop","after":1000000,"times":1}]' >"$T/faults.json"
    start_server
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" -q --retries 0
    [ "$status" -eq 1 ]
    [[ $output == *"swift-download: "*"model.safetensors: "*"gave up after 1 attempts; 1000000 bytes kept"* ]]
    [ ! -e "$T/out/model.safetensors" ]
    [ "$(stat -c %s "$T/out/.swift-download/model.safetensors.incomplete")" -eq 1000000 ]
    [ ! -e "$T/out/manifest.json" ]
    [ -f "$T/out/config.json" ] # the other files are done
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" -q
    [ "$status" -eq 0 ]
    [ "$(field model.safetensors status)" = resumed ]
    [ "$(field model.safetensors fetched)" -eq $((SIZE - 1000000)) ]
    [ "$(served model.safetensors)" -eq "$SIZE" ] # every byte sent exactly once
    grep -q '"file": "model.safetensors", "range_start": 1000000' "$T/log"
    cmp "$T/root/org/model/model.safetensors" "$T/out/model.safetensors"
    [ ! -e "$T/out/.swift-download/model.safetensors.incomplete" ]
}

@test "a dropped connection is retried in the same run with a Range request" {
    echo '[{"match":"model.safetensors","kind":"drop","after":777777,"times":2}]' >"$T/faults.json"
    start_server
    run "$B" --hub modelscope --endpoint "$EP" org/model -o "$T/out" -q --retry-delay 0.01
    [ "$status" -eq 0 ]
    [[ $output == *"retrying in"*"from byte 777777"* ]]
    [ "$(served model.safetensors)" -eq "$SIZE" ]
    cmp "$T/root/org/model/model.safetensors" "$T/out/model.safetensors"
}

@test "a corrupted body is detected; nothing under the final name, partial removed" {
    echo '[{"match":"model.safetensors","kind":"corrupt","times":1}]' >"$T/faults.json"
    start_server
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" -q
    [ "$status" -eq 1 ]
    [[ $output == *"checksum mismatch: expected sha256 $(sha "$T/root/org/model/model.safetensors"), got "* ]]
    [ ! -e "$T/out/model.safetensors" ]
    [ ! -e "$T/out/.swift-download/model.safetensors.incomplete" ]
    [ ! -e "$T/out/manifest.json" ]
    [ "$(field model.safetensors status)" = failed ]
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" -q
    [ "$status" -eq 0 ]
    cmp "$T/root/org/model/model.safetensors" "$T/out/model.safetensors"
}

@test "corruption is detected on ModelScope too (Sha256 of the listing)" {
    echo '[{"match":"tokenizer.json","kind":"corrupt"}]' >"$T/faults.json"
    start_server
    run "$B" --endpoint "$EP" org/model -o "$T/out" -q
    [ "$status" -eq 1 ]
    [[ $output == *"checksum mismatch"* ]]
    [ ! -e "$T/out/tokenizer.json" ]
}

@test "503 with Retry-After is retried after the advertised delay" {
    echo '[{"match":"config.json","kind":"503","retry_after":1,"times":1},
           {"match":"@listing","kind":"503","retry_after":1,"times":1}]' >"$T/faults.json"
    start_server
    t0=$(date +%s%N)
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" -q --retry-delay 0.01
    t1=$(date +%s%N)
    [ "$status" -eq 0 ]
    [[ $output == *"/api/models/org/model/revision/main?blobs=true: HTTP 503, retrying in 1.0 s"* ]]
    [[ $output == *"config.json: HTTP 503, retrying in 1.0 s from byte 0"* ]]
    [ $(((t1 - t0) / 1000000)) -ge 2000 ]
    cmp "$T/root/org/model/config.json" "$T/out/config.json"
}

@test "a stalled answer times out and is retried" {
    echo '[{"match":"config.json","kind":"slow","delay":4,"times":1}]' >"$T/faults.json"
    start_server
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" -q --timeout 1 --retry-delay 0.01
    [ "$status" -eq 0 ]
    [[ $output == *"config.json: "*"retrying in"* ]]
    cmp "$T/root/org/model/config.json" "$T/out/config.json"
}

@test "unknown model: 404, exit 1, clear message, nothing created" {
    start_server
    run "$B" --hub hf --endpoint "$EP" org/nope -o "$T/out"
    [ "$status" -eq 1 ]
    [ "$output" = "swift-download: model 'org/nope' (revision 'main') not found at $EP (HTTP 404)" ]
    [ ! -e "$T/out" ]
    run "$B" --endpoint "$EP" org/model --revision v9 -o "$T/out"
    [ "$status" -eq 1 ]
    [ "$output" = "swift-download: model 'org/model' (revision 'v9') not found at $EP (HTTP 404)" ]
}

@test "auth: 401 without a token, denied with a wrong one, fine with HF_TOKEN / --token" {
    start_server --token s3cret
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out"
    [ "$status" -eq 1 ]
    [ "$output" = "swift-download: model 'org/model' needs authentication at $EP (HTTP 401): pass --token or set HF_TOKEN" ]
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" --token wrong
    [ "$status" -eq 1 ]
    [ "$output" = "swift-download: access to model 'org/model' denied at $EP (HTTP 401): check the token" ]
    HF_TOKEN=s3cret run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" -q
    [ "$status" -eq 0 ]
    cmp "$T/root/org/model/model.safetensors" "$T/out/model.safetensors"
    MODELSCOPE_API_TOKEN=s3cret run "$B" --endpoint "$EP" org/model -o "$T/ms" -q
    [ "$status" -eq 0 ]
}

@test "a file-level 404 and 401 fail that file with exit 1" {
    echo '[{"match":"tokenizer.json","kind":"404"}]' >"$T/faults.json"
    start_server
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" -q
    [ "$status" -eq 1 ]
    [[ $output == *"tokenizer.json: HTTP 404"* ]]
    [[ $output == *"swift-download: 1 of 5 files failed; partial data kept for the next run"* ]]
}

@test "unwritable output directory: exit 1 and the reason" {
    start_server
    : >"$T/afile"
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/afile/out"
    [ "$status" -eq 1 ]
    [[ ${lines[0]} == "swift-download: cannot create directory '$T/afile"*": Not a directory" ]]
}

@test "disk full (file size limit): exit 1, write error, partial kept for resume" {
    start_server
    run bash -c "ulimit -f 1000; exec '$B' --hub hf --endpoint '$EP' org/model -o '$T/out' -q -j 1"
    [ "$status" -eq 1 ]
    [[ $output == *"swift-download: cannot write '$T/out/.swift-download/model.safetensors.incomplete': File too large"* ]]
    [ ! -e "$T/out/model.safetensors" ]
    kept=$(stat -c %s "$T/out/.swift-download/model.safetensors.incomplete")
    [ "$kept" -gt 0 ]
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" -q
    [ "$status" -eq 0 ]
    [ "$(field model.safetensors status)" = resumed ]
    [ "$(field model.safetensors fetched)" -eq $((SIZE - kept)) ]
    cmp "$T/root/org/model/model.safetensors" "$T/out/model.safetensors"
}

@test "two concurrent downloads of the same model wait for each other instead of colliding" {
    echo '[{"match":"model.safetensors","kind":"slow","delay":2,"times":1}]' >"$T/faults.json"
    start_server
    "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" >"$T/a.out" 2>"$T/a.err" &
    a=$!
    sleep 0.5
    "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" >"$T/b.out" 2>"$T/b.err" &
    b=$!
    wait $a
    wait $b
    # whichever started second waited for the lock, then found every file done
    msg="swift-download: waiting for another download of org/model (lock '$T/out/.swift-download/lock')"
    if grep -qF "$msg" "$T/b.err"; then w=b; else w=a; fi
    grep -qF "$msg" "$T/$w.err"
    [ "$(grep -c '"status":"cached"' "$T/$w.out")" -eq 5 ]
    [ "$(served model.safetensors)" -eq "$SIZE" ] # fetched once
    cmp "$T/root/org/model/model.safetensors" "$T/out/model.safetensors"
}

@test "trace: connect, transfer and verify spans per file (cat download)" {
    start_server
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" -q --trace "$T/t.jsonl"
    [ "$status" -eq 0 ]
    run python3 -c 'import json,sys
ev=[json.loads(l) for l in open(sys.argv[1])]
names={e["name"] for e in ev if e.get("cat")=="download" and e.get("ph")=="X"}
assert {"listing","connect","transfer","verify","file"} <= names, names
t=[e for e in ev if e.get("name")=="transfer" and e["args"]["path"]=="model.safetensors"]
assert t and t[0]["args"]["bytes"]==3000000 and t[0]["args"]["MB/s"]>0, t
assert any(e.get("ph")=="C" and e.get("name")=="download" for e in ev)
print("ok")' "$T/t.jsonl"
    [ "$output" = ok ]
    # no steps: the analyzer reports wall time by phase (top-level spans), no step rows
    [ -x "$SWIFT_BIN/swift-trace-analyze" ] || return 0
    run "$SWIFT_BIN/swift-trace-analyze" -f json "$T/t.jsonl"
    [ "$status" -eq 0 ]
    jq -e '.processes[0] | .steps == 0 and .breakdown == null and (.phases.rows | length) > 0' <<<"$output"
    run "$SWIFT_BIN/swift-trace-analyze" "$T/t.jsonl"
    [[ "$output" == *"no steps: wall "*" by phase (top-level spans):"* ]]
    [[ "$output" != *"mean step"* ]]
}

@test "local directory and file:// sources are copied with a manifest" {
    run "$B" "$T/root/org/model" -o "$T/copy" -q
    [ "$status" -eq 0 ]
    cmp "$T/root/org/model/model.safetensors" "$T/copy/model.safetensors"
    [ "$(field sub/notes.txt status)" = copied ]
    [ -f "$T/copy/manifest.json" ]
    # (options first: a first argument ending in .json would be read as a config file)
    run "$B" -o "$T/one" -q "file://$T/root/org/model/config.json"
    [ "$status" -eq 0 ]
    cmp "$T/root/org/model/config.json" "$T/one/config.json"
    run "$B" "$T/root/org/model"
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "swift-download: a path or URL source needs -o DIR" ]
}

mkarchives() {
    python3 - "$T" <<'EOF'
import io, sys, tarfile, zipfile
t = sys.argv[1]
def add(tf, name, data=b"x", **kw):
    ti = tarfile.TarInfo(name)
    for k, v in kw.items():
        setattr(ti, k, v)
    if ti.type == tarfile.REGTYPE:
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
    else:
        tf.addfile(ti)
with tarfile.open(t + "/good.tar.gz", "w:gz") as tf:
    add(tf, "./config.json", b'{"a":1}\n')
    add(tf, "weights/model.bin", b"\0" * 5000)
    add(tf, "link.json", type=tarfile.SYMTYPE, linkname="config.json")
with tarfile.open(t + "/dotdot.tar.gz", "w:gz") as tf:
    add(tf, "ok.txt")
    add(tf, "../evil.txt")
with tarfile.open(t + "/abs.tar", "w") as tf:
    add(tf, t + "/abs-evil.txt")
with tarfile.open(t + "/symlink.tar", "w") as tf:
    add(tf, "sub/escape", type=tarfile.SYMTYPE, linkname="../../outside")
    add(tf, "sub/escape/pwned.txt")
with tarfile.open(t + "/big.tar.gz", "w:gz") as tf:
    add(tf, "zeros.bin", b"\0" * 1000000)
with zipfile.ZipFile(t + "/dotdot.zip", "w") as z:
    z.writestr("fine.txt", "x")
    z.writestr("../zip-evil.txt", "x")
with zipfile.ZipFile(t + "/good.zip", "w") as z:
    z.writestr("a/b.txt", "hello")
EOF
}

@test "archives: tar.gz and zip unpacked (local and over http) with a manifest" {
    mkarchives
    run "$B" "$T/good.tar.gz" -o "$T/x" -q
    [ "$status" -eq 0 ]
    [ "$(cat "$T/x/config.json")" = '{"a":1}' ]
    [ "$(stat -c %s "$T/x/weights/model.bin")" -eq 5000 ]
    [ "$(readlink "$T/x/link.json")" = config.json ]
    [ "$(field weights/model.bin status)" = extracted ]
    grep -q '"file": "weights/model.bin"' "$T/x/manifest.json"
    cp "$T/good.zip" "$T/root/org/model/"
    start_server
    run "$B" "$EP/_lfs/models/org/model/good.zip" -o "$T/z" -q
    [ "$status" -eq 0 ]
    [ "$(cat "$T/z/a/b.txt")" = hello ]
    run "$B" "$T/good.tar.gz" -o "$T/x" -q
    [ "$status" -eq 1 ]
    [[ $output == *"already exists; use --force to replace it"* ]]
}

@test "archives: '..', absolute paths, escaping symlinks and size bombs are refused" {
    mkarchives
    run "$B" "$T/dotdot.tar.gz" -o "$T/o1" -q
    [ "$status" -eq 1 ]
    [ "$output" = "swift-download: $T/dotdot.tar.gz: member '../evil.txt': path escapes the target directory" ]
    [ ! -e "$T/o1" ]
    [ ! -e "$T/evil.txt" ]
    run "$B" "$T/abs.tar" -o "$T/o2" -q
    [ "$status" -eq 1 ]
    [[ $output == *"absolute path refused"* ]]
    [ ! -e "$T/abs-evil.txt" ]
    [ ! -e "$T/o2" ]
    run "$B" "$T/symlink.tar" -o "$T/o3/x" -q
    [ "$status" -eq 1 ]
    [[ $output == *"member 'sub/escape': symbolic link to '../../outside' leaves the target directory"* ]]
    [ ! -e "$T/o3/x" ]
    [ ! -e "$T/o3/outside" ]
    run "$B" "$T/dotdot.zip" -o "$T/o4" -q
    [ "$status" -eq 1 ]
    [[ $output == *"member '../zip-evil.txt': path escapes the target directory"* ]]
    [ ! -e "$T/zip-evil.txt" ]
    run "$B" "$T/big.tar.gz" -o "$T/o5" -q --max-extract 100K
    [ "$status" -eq 1 ]
    [[ $output == *"archive expands beyond the 102400-byte limit (--max-extract)"* ]]
    [ ! -e "$T/o5" ]
}

@test "usage errors exit 2" {
    run "$B"
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "swift-download: missing SOURCE" ]
    run "$B" --hub github org/model
    [ "$status" -eq 2 ]
    run "$B" 'bad id with spaces'
    [ "$status" -eq 2 ]
    run "$B" -j 0 org/model
    [ "$status" -eq 2 ]
}

@test "https: certificates are verified; a private CA is taken from CURL_CA_BUNDLE" {
    command -v openssl >/dev/null || skip "openssl command not installed"
    openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 \
        -addext subjectAltName=IP:127.0.0.1 -days 1 -keyout "$T/key.pem" -out "$T/cert.pem" \
        2>/dev/null
    start_server --tls-cert "$T/cert.pem" --tls-key "$T/key.pem"
    EP=https://127.0.0.1:$(cat "$T/port")
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" --retries 0
    [ "$status" -eq 1 ]
    [[ $output == "swift-download: $EP/api/models/org/model/revision/main?blobs=true: SSL certificate problem: self-signed certificate"* ]]
    [ ! -e "$T/out" ]
    CURL_CA_BUNDLE=$T/cert.pem run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" -q
    [ "$status" -eq 0 ]
    cmp "$T/root/org/model/model.safetensors" "$T/out/model.safetensors"
}

@test "a stale partial file from another version is detected and fetched again from the start" {
    start_server
    mkdir -p "$T/out/.swift-download"
    head -c 1000 /dev/urandom >"$T/out/.swift-download/model.safetensors.incomplete"
    run "$B" --hub hf --endpoint "$EP" org/model -o "$T/out" -q
    [ "$status" -eq 0 ]
    [[ $output == *"swift-download: warning: model.safetensors: resumed data does not verify (checksum mismatch"*"fetching it again from the start"* ]]
    cmp "$T/root/org/model/model.safetensors" "$T/out/model.safetensors"
    [ "$(field model.safetensors status)" = downloaded ]
}

@test "hf datasets and a pinned commit revision" {
    start_server
    run "$B" --hub hf --endpoint "$EP" --dataset org/data -o "$T/ds" -q
    [ "$status" -eq 0 ]
    cmp "$T/root/datasets/org/data/train.jsonl" "$T/ds/train.jsonl"
    grep -q '"path": "/api/datasets/org/data/revision/main?blobs=true"' "$T/log"
    commit=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["commit"])' "$T/ds/manifest.json")
    HF_HOME=$T/hf run "$B" --hub hf --endpoint "$EP" --dataset org/data --revision "$commit" -q
    [ "$status" -eq 0 ]
    cmp "$T/root/datasets/org/data/train.jsonl" "$T/hf/hub/datasets--org--data/snapshots/$commit/train.jsonl"
    [ ! -e "$T/hf/hub/datasets--org--data/refs/$commit" ] # a commit needs no ref
}

@test "hf cache: an interrupted blob resumes from blobs/<sha256>.incomplete" {
    echo '[{"match":"model.safetensors","kind":"drop","after":1000000,"times":1}]' >"$T/faults.json"
    start_server
    HF_HOME=$T/hf run "$B" --hub hf --endpoint "$EP" org/model -q --retries 0
    [ "$status" -eq 1 ]
    blob=$T/hf/hub/models--org--model/blobs/$(sha "$T/root/org/model/model.safetensors")
    [ "$(stat -c %s "$blob.incomplete")" -eq 1000000 ]
    [ ! -e "$blob" ]
    HF_HOME=$T/hf run "$B" --hub hf --endpoint "$EP" org/model -q
    [ "$status" -eq 0 ]
    [ "$(field model.safetensors status)" = resumed ]
    [ "$(served model.safetensors)" -eq "$SIZE" ]
    cmp "$T/root/org/model/model.safetensors" "$blob"
}
