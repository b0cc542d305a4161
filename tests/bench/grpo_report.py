#!/usr/bin/env python3
"""Figures of tests/bench/grpo.sh (standard library only).
  grpo_report.py swift TRACE LOGGING THREADS  the swift-train run's JSON line, from its trace
                                              (the spans of docs/grpo.md "Traces") and records
  grpo_report.py table SWIFT.json [TRL.json]  the side-by-side table
A step's time is the wall time from the end of the previous step to the end of this one (the
whole loop: data, generation, rewards, forward, backward, clipping, AdamW, logging), the same
definition as grpo_trl.py's; rates and the per-phase split leave out step 1 (one-time costs)."""
import json
import statistics
import sys

PHASES = ["generate", "reward", "forward", "backward", "optimizer", "other"]


def swift(trace, logging, threads):
    spans = []
    for line in open(trace):
        line = line.strip().rstrip(",")
        if not line.startswith("{"):
            continue
        e = json.loads(line)
        if e.get("ph") == "X":
            spans.append(e)
    steps = sorted((e for e in spans if e["name"] == "step"), key=lambda e: e["ts"])
    if not steps:
        sys.exit(f"grpo_report: {trace}: no step spans")
    ends = [e["ts"] + e["dur"] for e in steps]
    step_s = [(ends[0] - steps[0]["ts"]) / 1e6] + [(b - a) / 1e6 for a, b in zip(ends, ends[1:])]
    # per-phase sums over steps 2..N: the spans that start inside those steps' windows
    lo = ends[0] if len(steps) > 1 else steps[0]["ts"]
    hi = ends[-1]
    want = {"generate": "generate", "reward": "reward", "forward": "forward",
            "backward": "backward", "optimizer": "optimizer"}
    tot = {p: 0.0 for p in PHASES}
    gen = {"prefill": 0.0, "decode": 0.0, "prefill_tokens": 0, "decode_tokens": 0}
    for e in spans:
        if not lo <= e["ts"] < hi:
            continue
        p = want.get(e["name"])
        if p:
            tot[p] += e["dur"] / 1e6
        if e["name"] == "generate":  # prefill and decode inside it (their own spans nest twice)
            gen["prefill_tokens"] += e["args"]["prefill_tokens"]
            gen["decode_tokens"] += e["args"]["decode_tokens"]
        elif e["name"] in ("prefill", "decode") and "sequences" in e.get("args", {}):
            gen[e["name"]] += e["dur"] / 1e6
    rest = step_s[1:] if len(step_s) > 1 else step_s
    n, all_s = len(rest), sum(rest)
    tot["other"] = all_s - sum(tot[p] for p in PHASES[:-1])
    recs = [json.loads(line) for line in open(logging) if '"reward"' in line and '"eval_' not in line]
    r = summary("swift-train", threads, step_s, recs, tot, n, all_s)
    r["generate_ms"] = {"prefill": round(gen["prefill"] / n * 1e3, 3),
                        "prefill_tokens": round(gen["prefill_tokens"] / n, 1),
                        "decode": round(gen["decode"] / n * 1e3, 3),
                        "decode_tokens": round(gen["decode_tokens"] / n, 1)}
    return r


def summary(impl, threads, step_s, recs, tot, n, all_s):
    rewards = [r["reward"] for r in recs]
    tokens = [r["completions/mean_length"] * 16 for r in recs]
    k = min(10, len(rewards))
    rest = tokens[1:] if len(tokens) > 1 else tokens
    return {
        "impl": impl, "threads": threads, "steps": len(step_s),
        "step_s": round(statistics.median(step_s), 5),
        "gen_tokens_per_s": round(sum(rest) / all_s, 1),
        "gen_tokens_per_gen_s": round(sum(rest) / tot["generate"], 1) if tot["generate"] else None,
        "mean_length": round(statistics.mean(r["completions/mean_length"] for r in recs), 3),
        "reward_first": round(statistics.mean(rewards[:k]), 4),
        "reward_last": round(statistics.mean(rewards[-k:]), 4),
        "phase_ms": {p: round(tot[p] / n * 1e3, 3) for p in PHASES},
    }


def table(a, b):
    rows = [a] + ([b] if b else [])
    print(f"{'impl':12} {'thr':>3} {'steps':>5} {'s/step':>8} {'gen tok/s':>9} "
          f"{'(in generate)':>13} {'reward first 10':>15} {'last 10':>7}")
    for r in rows:
        print(f"{r['impl']:12} {r['threads']:>3} {r['steps']:>5} {r['step_s']:>8.4f} "
              f"{r['gen_tokens_per_s']:>9.0f} {r['gen_tokens_per_gen_s'] or 0:>13.0f} "
              f"{r['reward_first']:>15.3f} {r['reward_last']:>7.3f}")
    print("ms per step (steps 2..N):" + "".join(f" {p:>9}" for p in PHASES))
    for r in rows:
        ph = r["phase_ms"]
        tot = sum(ph.values())
        print(f"  {r['impl']:22}" + "".join(f" {ph[p]:>9.2f}" for p in PHASES))
        print(f"  {'':22}" + "".join(f" {100 * ph[p] / tot:>8.1f}%" for p in PHASES))
    g = a.get("generate_ms")
    if g:
        print(f"  swift-train generate per step: prefill {g['prefill']:.2f} ms ({g['prefill_tokens']:.0f} "
              f"prompt tokens), decode {g['decode']:.2f} ms "
              f"({g['decode_tokens']:.0f} tokens, one per row per step)")
    if b:
        print(f"ratio of step times, TRL / swift-train: {b['step_s'] / a['step_s']:.2f}x "
              f"(generate {b['phase_ms']['generate'] / a['phase_ms']['generate']:.2f}x, "
              f"forward+backward {(b['phase_ms']['forward'] + b['phase_ms']['backward']) / (a['phase_ms']['forward'] + a['phase_ms']['backward']):.2f}x)")


if __name__ == "__main__":
    if sys.argv[1] == "swift":
        print(json.dumps(swift(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
    elif sys.argv[1] == "table":
        a = json.loads(open(sys.argv[2]).read())
        b = json.loads(open(sys.argv[3]).read()) if len(sys.argv) > 3 else None
        table(a, b)
    else:
        sys.exit(__doc__)
