#!/usr/bin/env bats
# swift-trace-analyze's HTML report rendered in a real browser (headless Chromium): no
# JavaScript error, the step chart's bars have a size on screen, the copy button runs, and a
# screenshot comes out. Skipped, visibly, where chromium is not installed (a failure under
# CI=true: .ci/run installs it).

setup() {
    A="$SWIFT_BIN/swift-trace-analyze"
    W="$BATS_TEST_TMPDIR"
    R="$PWD"
    CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
    if [ -z "$CHROMIUM" ]; then
        # CI installs it (.ci/run): there a missing browser is a failure, not a skip
        [ "${CI:-}" != true ] || { echo "CI=true: chromium is not installed"; false; }
        skip "chromium is not installed (apt-get install chromium)"
    fi
    export HOME="$W"
}

# The report with a probe: errors (window.onerror, console.error) and the checks land in the
# DOM as attributes of <body>, which --dump-dom prints.
probe() { # probe IN.html OUT.html
    python3 - "$1" "$2" <<'PY'
import sys
t = open(sys.argv[1]).read()
head = """<script>
var jsErrors = [];
window.onerror = function (m, src, line) { jsErrors.push(m + ' at ' + line); };
var ce = console.error;
console.error = function (m) { jsErrors.push('console: ' + m); ce.apply(console, arguments); };
</script>"""
tail = """<script>
window.addEventListener('load', function () {
  var n = 0;
  document.querySelectorAll('svg.chart rect.sp').forEach(function (r) {
    var b = r.getBoundingClientRect(); if (b.width > 0 && b.height > 0) n++; });
  document.body.setAttribute('data-chart-rects', n);
  // the longest step's lanes, the memory curve and the compare page's charts: their size on screen
  var lb = 0;
  document.querySelectorAll('svg.lanes rect.lb').forEach(function (r) {
    var b = r.getBoundingClientRect(); if (b.width > 0 && b.height > 0) lb++; });
  document.body.setAttribute('data-lane-rects', lb);
  var size = function (sel) {
    var e = document.querySelector(sel); if (!e) return 'none';
    var b = e.getBoundingClientRect(); return Math.round(b.width) + 'x' + Math.round(b.height); };
  document.body.setAttribute('data-mem-curve', size('svg.memory polyline.mem-alloc'));
  document.body.setAttribute('data-mem-peak', size('svg.memory circle.mem-peak'));
  var cb = 0;
  document.querySelectorAll('svg.cmp rect.cb').forEach(function (r) {
    var b = r.getBoundingClientRect(); if (b.width > 0 && b.height > 0) cb++; });
  document.body.setAttribute('data-compare-rects', cb);
  // sort the first sortable table by its third column (a number): descending, then ascending
  var t = document.querySelector('table.sortable'), sorted = 'no table';
  if (t) {
    var vals = function () { return Array.prototype.slice.call(t.rows, 1).map(function (r) {
      return parseFloat(r.cells[2].getAttribute('data-v')); }); };
    var mono = function (a, s) { for (var i = 1; i < a.length; i++) if (s * (a[i] - a[i - 1]) < 0) return false; return true; };
    t.rows[0].cells[2].click(); var d = mono(vals(), -1);
    t.rows[0].cells[2].click(); var a = mono(vals(), 1);
    sorted = (d && a && t.rows.length > 2) ? 'yes' : 'no';
  }
  document.body.setAttribute('data-sorted', sorted);
  var btn = document.querySelector('.cp button');
  if (btn) btn.click();
  setTimeout(function () {
    if (btn) document.body.setAttribute('data-copy', btn.textContent);
    document.body.setAttribute('data-js-errors', jsErrors.length ? jsErrors.join(' | ') : 'none');
  }, 1000);
});
</script>"""
t = t.replace("<head>", "<head>" + head, 1).replace("</body>", tail + "</body>", 1)
open(sys.argv[2], "w").write(t)
PY
}

render() { # render FILE.html: the DOM after load on stdout
    timeout 60 "$CHROMIUM" --headless --disable-gpu --no-sandbox --virtual-time-budget=2000 \
        --dump-dom "file://$1" 2>/dev/null
}

@test "chromium renders the HTML report of a real swift-train run: no JavaScript error, chart bars on screen, sorting and copy run, screenshot" {
    cat >"$W/sft.yaml" <<YAML
model: $R/tests/fixtures/model/llama
max_steps: 6
dataloader_num_workers: 1
save_steps: 100
eval_steps: 100
YAML
    (cd "$W" && "$SWIFT_BIN/swift-train" sft.yaml "$R/tests/fixtures/shards" -o run-t \
        --trace t.jsonl -j 1 --data-delay-ms 20 --profile wait=1,warmup=1,active=2 >/dev/null 2>&1)
    run "$A" -f json -o "$W/r.json" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    run "$A" -f html -o "$W/r.html" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    probe "$W/r.html" "$W/p.html"
    render "$W/p.html" >"$W/dom.html"
    grep -o 'data-[a-z-]*="[^"]*"' "$W/dom.html"
    grep -q 'data-js-errors="none"' "$W/dom.html"
    n=$(jq '[.processes[0] as $p | $p.step_list[] as $s | $p.breakdown.parts[] | select(($s.us[.] // 0) > 0)] | length' "$W/r.json")
    [ "$n" -gt 0 ]
    grep -q "data-chart-rects=\"$n\"" "$W/dom.html"
    # the longest step's lanes: every box on screen
    lb=$(jq '[.processes[0].worst_step.lanes[].boxes[]] | length' "$W/r.json")
    [ "$lb" -gt 0 ]
    grep -q "data-lane-rects=\"$lb\"" "$W/dom.html"
    grep -Eq 'data-copy="(copied|select and copy)"' "$W/dom.html"
    grep -q 'data-sorted="yes"' "$W/dom.html"
    # the probe itself catches errors: a page that throws is reported
    sed 's|</body>|<script>undefinedFunction();</script></body>|' "$W/r.html" >"$W/bad.html"
    probe "$W/bad.html" "$W/pbad.html"
    render "$W/pbad.html" >"$W/dombad.html"
    grep -q 'data-js-errors="[^"]*undefinedFunction' "$W/dombad.html"
    timeout 60 "$CHROMIUM" --headless --disable-gpu --no-sandbox --window-size=1100,900 \
        --screenshot="$W/r.png" "file://$W/r.html" 2>/dev/null
    [ "$(head -c 8 "$W/r.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
}

@test "chromium renders the resnet50 Kineto report: the lanes' boxes and the memory curve have a size on screen, no JavaScript error" {
    T="$SHARED/data/traces"
    if [ ! -d "$T" ]; then
        [ "${CI:-}" = true ] && { echo "missing $T" >&2; return 1; }
        skip "shared traces not found at $T"
    fi
    NW0="$T/kineto-tb/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
    run "$A" -f json -o "$W/r.json" "$NW0"
    [ "$status" -eq 0 ]
    run "$A" -f html -o "$W/r.html" "$NW0"
    [ "$status" -eq 0 ]
    probe "$W/r.html" "$W/p.html"
    render "$W/p.html" >"$W/dom.html"
    grep -o 'data-[a-z-]*="[^"]*"' "$W/dom.html"
    grep -q 'data-js-errors="none"' "$W/dom.html"
    n=$(jq '[.processes[0].worst_step.lanes[].boxes[]] | length' "$W/r.json")
    [ "$n" -gt 100 ]
    grep -q "data-lane-rects=\"$n\"" "$W/dom.html"
    # the curve spans most of the plot's 910 px, and rises over tens of px; the peak is a dot
    w=$(grep -o 'data-mem-curve="[0-9]*x[0-9]*"' "$W/dom.html" | sed 's/.*="\([0-9]*\)x\([0-9]*\)"/\1 \2/')
    echo "curve $w"
    [ "$(echo "$w" | cut -d' ' -f1)" -ge 700 ]
    [ "$(echo "$w" | cut -d' ' -f2)" -ge 100 ]
    grep -q 'data-mem-peak="8x8"' "$W/dom.html"
}

@test "chromium renders the --compare page: the paired bars have a size on screen, sorting runs, no JavaScript error" {
    T="$SHARED/data/traces"
    if [ ! -d "$T" ]; then
        [ "${CI:-}" = true ] && { echo "missing $T" >&2; return 1; }
        skip "shared traces not found at $T"
    fi
    C="$T/kineto-tb/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
    X="$T/kineto-tb/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"
    run "$A" --compare -f json -o "$W/c.json" "$C" "$X"
    [ "$status" -eq 0 ]
    run "$A" --compare -f html -o "$W/c.html" "$C" "$X"
    [ "$status" -eq 0 ]
    probe "$W/c.html" "$W/p.html"
    render "$W/p.html" >"$W/dom.html"
    grep -o 'data-[a-z-]*="[^"]*"' "$W/dom.html"
    grep -q 'data-js-errors="none"' "$W/dom.html"
    n=$(jq '[.breakdown[] | .control_us, .test_us | select(. > 0)] | length' "$W/c.json")
    [ "$n" -ge 10 ]
    grep -q "data-compare-rects=\"$n\"" "$W/dom.html"
    grep -q 'data-sorted="yes"' "$W/dom.html"
}
