/* trace_device — the sink of kernels/device.h: what a backend reports becomes the trace event of
 * the same phase (swift_trace_span_tid, _flow_tid, _counters_at, _track_name) and its messages
 * become swift_error / swift_warn lines, so kernels/ never calls into lib/. */
#include "lib/core/trace.h"

#include "kernels/device.h"
#include "lib/core/error.h"
#include "lib/core/banned.h"

static void on_event(const struct swift_dev_event *e)
{
    if (!swift_trace_enabled())
        return;
    const struct swift_targ *a = e->args;
    int n = e->nargs;
    int64_t tid = e->tid ? e->tid : swift_trace_tid();
    switch (e->ph) {
    case 'X':
        swift_trace_span_tid(e->cat, e->name, tid, e->ts, e->ts + e->dur, a, n);
        break;
    case 's':
    case 'f':
        swift_trace_flow_tid(e->ph, e->cat, e->name, e->id, tid, e->ts);
        break;
    case 'C':
        swift_trace_counters_at(e->name, e->ts, a, n);
        break;
    case 'M':
        swift_trace_track_name(tid, e->name);
        break;
    default:
        break;
    }
}

static void on_message(int warning, const char *msg)
{
    if (warning)
        swift_warn("%s", msg);
    else
        swift_error("%s", msg);
}

static const struct swift_dev_sink sink = {
    .enabled = swift_trace_enabled,
    .now = swift_trace_now,
    .tid = swift_trace_tid,
    .event = on_event,
    .message = on_message,
};

void swift_trace_attach_devices(void)
{
    swift_dev_set_sink(&sink);
}

/* Installed when the program starts, before anything can reach a backend: NCCL is set up before
 * swift-train's trace is open, and its errors must still read "swift-train: ...". */
__attribute__((constructor)) static void attach_at_start(void)
{
    swift_trace_attach_devices();
}
