/*
 * analyze/load — events into records: string interning, one compact record per duration event
 * (and the memory counters, metadata and collective args), sources and directories. The bytes
 * are read by stream.c and scan.c. See lib/analyze/load.h.
 */
#include "lib/analyze/internal.h"
#include "lib/core/alloc.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"

#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/core/banned.h"

/* ---------- interning ---------- */

/* 8 bytes a step (kernel names run to hundreds of bytes and every event's name is hashed);
 * only the slot order depends on it, never an id. */
static uint32_t hash_str(const char *s, size_t len)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ len, w;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, s + i, len - i);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return (uint32_t)h;
}

uint32_t swift_an_intern(struct swift_an_strtab *t, const char *s, size_t len)
{
    if (t->n * 2 + 2 >= t->nslot) {
        uint32_t ns = t->nslot ? t->nslot * 2 : 1024;
        uint32_t *slot = swift_xcalloc(ns, sizeof(*slot));
        for (uint32_t i = 0; i < t->n; i++) {
            uint32_t h = hash_str(t->str[i], strlen(t->str[i])) & (ns - 1);
            while (slot[h])
                h = (h + 1) & (ns - 1);
            slot[h] = i + 1;
        }
        free(t->slot);
        t->slot = slot;
        t->nslot = ns;
    }
    uint32_t h = hash_str(s, len) & (t->nslot - 1);
    while (t->slot[h]) {
        const char *o = t->str[t->slot[h] - 1];
        if (!strncmp(o, s, len) && o[len] == 0)
            return t->slot[h] - 1;
        h = (h + 1) & (t->nslot - 1);
    }
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 1024;
        t->str = swift_xrealloc(t->str, t->cap * sizeof(*t->str));
    }
    char *c = swift_xmalloc(len + 1);
    memcpy(c, s, len);
    c[len] = 0;
    t->str[t->n] = c;
    t->slot[h] = t->n + 1;
    return t->n++;
}

uint32_t swift_an_lookup(const struct swift_an_strtab *t, const char *s)
{
    if (!t->nslot)
        return SWIFT_AN_NONE;
    uint32_t h = hash_str(s, strlen(s)) & (t->nslot - 1);
    while (t->slot[h]) {
        if (!strcmp(t->str[t->slot[h] - 1], s))
            return t->slot[h] - 1;
        h = (h + 1) & (t->nslot - 1);
    }
    return SWIFT_AN_NONE;
}

/* ---------- events into records ---------- */

struct loadctx {
    struct swift_an_set *set;
    struct swift_an_source *s;
    uint32_t cat_user_ann, cat_cpu_op;
};

static int64_t int_arg(json_t *args, const char *k, int64_t dflt)
{
    json_t *v = json_object_get(args, k);
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_real(v))
        return (int64_t)json_real_value(v);
    return dflt;
}

static uint32_t str_arg(struct swift_an_set *set, json_t *args, const char *k)
{
    json_t *v = json_object_get(args, k);
    if (json_is_string(v))
        return swift_an_intern(&set->strs, json_string_value(v), json_string_length(v));
    if (v) {
        char *d = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!d)
            abort(); /* only a bug: jansson allocates through swift_xmalloc */
        uint32_t id = swift_an_intern(&set->strs, d, strlen(d));
        free(d);
        return id;
    }
    return SWIFT_AN_NONE;
}

static void set_str(char **dst, const char *s)
{
    free(*dst);
    *dst = s ? swift_xstrdup(s) : NULL;
}

static void on_meta(void *vctx, const char *key, json_t *v)
{
    struct loadctx *c = vctx;
    struct swift_an_source *s = c->s;
    if (!s->meta)
        s->meta = json_object();
    json_object_set(s->meta, key, v);
    if (!strcmp(key, "distributedInfo")) {
        json_t *rk = json_object_get(v, "rank"), *ws = json_object_get(v, "world_size");
        if (json_is_integer(rk))
            s->rank = (int)json_integer_value(rk);
        if (json_is_integer(ws))
            s->world_size = (int)json_integer_value(ws);
    } else if (!strcmp(key, "deviceProperties") && json_is_array(v)) {
        size_t i;
        json_t *d;
        json_array_foreach(v, i, d)
        {
            json_t *id = json_object_get(d, "id"), *mem = json_object_get(d, "totalGlobalMem");
            if (json_is_integer(id) && json_integer_value(id) >= 0 &&
                json_integer_value(id) < SWIFT_AN_MAX_DEV && json_is_number(mem))
                s->mem_total[json_integer_value(id)] = json_number_value(mem);
        }
    } else if (!strcmp(key, "displayTimeUnit") && json_is_string(v)) {
        set_str(&s->time_unit, json_string_value(v));
    } else if (!strcmp(key, "traceName") && json_is_string(v)) {
        set_str(&s->trace_name, json_string_value(v));
    } else if (!strcmp(key, "baseTimeNanoseconds") && json_is_number(v)) {
        s->base_time_ns = json_number_value(v);
    } else if ((!strcmp(key, "hostname") || !strcmp(key, "host_name")) && json_is_string(v)) {
        set_str(&s->host, json_string_value(v));
    }
}

static void swift_meta(struct swift_an_source *s, json_t *a)
{
    json_t *v;
    s->kind = SWIFT_AN_SWIFT;
    if (json_is_string(v = json_object_get(a, "stage")))
        set_str(&s->stage, json_string_value(v));
    if (json_is_string(v = json_object_get(a, "host")))
        set_str(&s->host, json_string_value(v));
    if (json_is_integer(v = json_object_get(a, "rank")))
        s->rank = (int)json_integer_value(v);
    if (json_is_integer(v = json_object_get(a, "world_size")))
        s->world_size = (int)json_integer_value(v);
    if (json_is_integer(v = json_object_get(a, "pid")))
        s->pid = json_integer_value(v);
    if (json_is_number(v = json_object_get(a, "clock_offset_us")))
        s->clock_offset_us = json_number_value(v);
    if (json_is_array(v = json_object_get(a, "argv"))) {
        json_decref(s->argv);
        s->argv = json_incref(v);
    }
    json_t *c = json_object_get(a, "config");
    if (json_is_object(c) && s->argv && json_is_array(v = json_object_get(c, "argv"))) {
        /* the rules read the options the run had, its config file's keys included */
        json_decref(s->argv_given);
        json_decref(s->config);
        s->argv_given = s->argv;
        s->argv = json_incref(v);
        s->config = json_incref(c);
    }
    if (json_is_integer(v = json_object_get(a, "omp_threads")))
        s->omp_threads = (int)json_integer_value(v);
    if (json_is_string(v = json_object_get(a, "omp_wait_policy")))
        set_str(&s->omp_wait_policy, json_string_value(v));
    if (json_is_string(v = json_object_get(a, "device")))
        set_str(&s->device, json_string_value(v));
}

static int fv_num_of(const struct swift_an_fval *v, double *out)
{
    if (v->t == SWIFT_AN_FV_INT) {
        *out = (double)v->i;
        return 0;
    }
    if (v->t == SWIFT_AN_FV_REAL) {
        *out = v->d;
        return 1;
    }
    return -1;
}

static int fv_is_num(const struct swift_an_fval *v)
{
    return v->t == SWIFT_AN_FV_INT || v->t == SWIFT_AN_FV_REAL;
}

static double fv_num(const struct swift_an_fval *v)
{
    return v->t == SWIFT_AN_FV_INT ? (double)v->i : v->d;
}

static int64_t fv_int(const struct swift_an_fval *v, int64_t dflt)
{
    if (v->t == SWIFT_AN_FV_INT)
        return v->i;
    if (v->t == SWIFT_AN_FV_REAL)
        return (int64_t)v->d;
    return dflt;
}

/* pid/tid may be numbers or strings ("stream 7", "Spans"). */
static int64_t fv_id(struct swift_an_set *set, const struct swift_an_fval *v)
{
    if (v->t == SWIFT_AN_FV_INT)
        return v->i;
    if (v->t == SWIFT_AN_FV_REAL)
        return (int64_t)v->d;
    if (v->t == SWIFT_AN_FV_STR) {
        const char *s = v->s;
        char *end;
        long long n = strtoll(s, &end, 10);
        if (end != s && !*end)
            return n;
        if (!strncmp(s, "stream ", 7)) {
            n = strtoll(s + 7, &end, 10);
            if (end != s + 7)
                return n;
        }
        return -1000000 - (int64_t)swift_an_intern(&set->strs, s, strlen(s));
    }
    return -1;
}
/* "M" events: swift_meta (ours) and process_name; e is always the jansson object here. */
static void on_metadata(struct swift_an_source *s, const char *nm, json_t *e)
{
    json_t *args = e ? json_object_get(e, "args") : NULL;
    if (!strcmp(nm, "swift_meta") && args)
        swift_meta(s, args);
    else if (!strcmp(nm, "process_name") && args && json_is_string(json_object_get(args, "name")) &&
             !s->process_name)
        set_str(&s->process_name, json_string_value(json_object_get(args, "name")));
}

/* Memory: Kineto's [memory] instants ("i"/"I") and our memory counters ("C"). */
static void on_memory(struct swift_an_source *s, const struct swift_an_fev *f, const char *nm,
                      double ts)
{
    const struct swift_an_fval *A = f->a;
    if (f->ph.s[0] == 'i' || f->ph.s[0] == 'I') {
        if (!strcmp(nm, "[memory]") && f->args == 1) {
            int64_t dt = fv_int(&A[AK_DEVTYPE], 0);
            if (dt == 1 && (fv_is_num(&A[AK_TOTALLOC]) || fv_is_num(&A[AK_MBYTES])))
                swift_an_mem_note(s,
                                  (int)fv_int(&A[AK_DEVID], 0),
                                  fv_is_num(&A[AK_MBYTES]) ? fv_num(&A[AK_MBYTES]) : NAN,
                                  fv_is_num(&A[AK_TOTALLOC]) ? fv_num(&A[AK_TOTALLOC]) : NAN,
                                  fv_is_num(&A[AK_TOTRES]) ? fv_num(&A[AK_TOTRES]) : NAN,
                                  ts,
                                  fv_int(&f->tid, INT64_MIN));
        }
        return;
    }
    /* swift-train's accounting: {"name":"memory_by_category","args":{"params":bytes,...,
     * "total":bytes}}; the sample with the largest total is kept */
    if (f->args == 1 && !strcmp(nm, "memory_by_category") && fv_is_num(&A[AK_TOTAL])) {
        if (!s->memcat_n++ || fv_num(&A[AK_TOTAL]) >= s->memcat[5]) {
            static const int k[5] = {
                AK_MC_PARAMS, AK_MC_GRADS, AK_MC_OPTIM, AK_MC_ACTS, AK_MC_OTHER};
            for (int i = 0; i < 5; i++)
                s->memcat[i] = fv_is_num(&A[k[i]]) ? fv_num(&A[k[i]]) : 0;
            s->memcat[5] = fv_num(&A[AK_TOTAL]);
        }
        return;
    }
    /* our memory counters: {"name":"memory","args":{"allocated":bytes,"device":n}} */
    if (f->args == 1 &&
        (!strcmp(nm, "memory") || (f->cat.t == SWIFT_AN_FV_STR && !strcmp(f->cat.s, "memory")))) {
        int dev = (int)fv_int(&A[AK_DEVICE], 0);
        if (fv_is_num(&A[AK_ALLOCATED]))
            swift_an_mem_note(s, dev, NAN, fv_num(&A[AK_ALLOCATED]), NAN, ts, INT64_MIN);
        if (fv_is_num(&A[AK_TOTAL]) && dev >= 0 && dev < SWIFT_AN_MAX_DEV)
            s->mem_total[dev] = fv_num(&A[AK_TOTAL]);
    }
}

/* The args of a duration event that its record keeps. */
static void record_args(struct swift_an_source *s, struct swift_an_ev *ev,
                        const struct swift_an_fval *A)
{
    if (fv_is_num(&A[AK_STREAM]))
        ev->stream = (int32_t)fv_num(&A[AK_STREAM]);
    if (fv_is_num(&A[AK_CORR]))
        ev->corr = (int64_t)fv_num(&A[AK_CORR]);
    if (A[AK_DEVICE].t == SWIFT_AN_FV_INT && A[AK_DEVICE].i >= 0 &&
        A[AK_DEVICE].i < SWIFT_AN_MAX_DEV)
        ev->dev = (int16_t)A[AK_DEVICE].i;
    ev->ext = fv_int(&A[AK_EXT], fv_int(&A[AK_EXT_LC], -1));
    if (s->kind == SWIFT_AN_SWIFT) {
        ev->step = (int32_t)fv_int(&A[AK_STEP], -1);
        ev->aux = fv_int(&A[AK_TOKENS], fv_int(&A[AK_FLOPS], 0));
    } else {
        ev->aux = fv_int(&A[AK_BYTES], 0);
    }
    if (fv_is_num(&A[AK_BPS]))
        ev->blocks_per_sm = (float)fv_num(&A[AK_BPS]);
    if (fv_is_num(&A[AK_OCC]))
        ev->occupancy = (float)fv_num(&A[AK_OCC]);
}

/* A collective's args (NCCL kernels, record_param_comms) into s->comm. */
static void record_comm(struct swift_an_set *set, struct swift_an_source *s, struct swift_an_ev *ev,
                        json_t *args)
{
    if (s->ncomm == s->capcomm) {
        s->capcomm = s->capcomm ? s->capcomm * 2 : 64;
        s->comm = swift_xrealloc(s->comm, s->capcomm * sizeof(*s->comm));
    }
    struct swift_an_comm *cm = &s->comm[s->ncomm];
    cm->collective = str_arg(set, args, "Collective name");
    cm->dtype = str_arg(set, args, "dtype");
    cm->in_split = str_arg(set, args, "In split size");
    cm->out_split = str_arg(set, args, "Out split size");
    cm->pg_name = str_arg(set, args, "Process Group Name");
    cm->pg_desc = str_arg(set, args, "Process Group Description");
    cm->pg_ranks = str_arg(set, args, "Process Group Ranks");
    cm->in_nelems = int_arg(args, "In msg nelems", -1);
    cm->out_nelems = int_arg(args, "Out msg nelems", -1);
    cm->group_size = int_arg(args, "Group size", -1);
    cm->seq = int_arg(args, "Seq", int_arg(args, "seq", -1));
    ev->comm = (uint32_t)s->ncomm++;
}

/* Our inference spans (cat infer): their args into s->inf (infer.c). */
static void record_infer(struct swift_an_source *s, const char *nm, double ts, double dur,
                         const struct swift_an_fval *A)
{
    static const char *const kinds[] = {
        "engine_step", "request_queued", "request_prefill", "request_decode", "request"};
    static const int keys[SWIFT_AN_IA_N] = {AK_STEP,
                                            AK_SEQS,
                                            AK_TOKENS,
                                            AK_PREFILL_TOK,
                                            AK_DECODE_TOK,
                                            AK_BLOCKS_USED,
                                            AK_WAITING,
                                            AK_PREEMPT,
                                            AK_MAX_SEQS,
                                            AK_MAX_BATCHED,
                                            AK_NUM_BLOCKS,
                                            AK_MAX_LEN,
                                            AK_CHUNKED,
                                            AK_REQ,
                                            AK_PROMPT_TOK,
                                            AK_COMPL_TOK};
    int k = -1;
    for (int i = 0; i < 5 && k < 0; i++)
        if (!strcmp(nm, kinds[i]))
            k = i;
    if (k < 0)
        return;
    if (s->ninf == s->capinf) {
        s->capinf = s->capinf ? s->capinf * 2 : 256;
        s->inf = swift_xrealloc(s->inf, s->capinf * sizeof(*s->inf));
    }
    struct swift_an_inf *r = &s->inf[s->ninf++];
    r->kind = k;
    r->ts = ts;
    r->dur = dur;
    for (int i = 0; i < SWIFT_AN_IA_N; i++)
        r->a[i] = A ? fv_int(&A[keys[i]], -1) : -1;
}

/* Our VL step's forward_backward span with its FLOPs: into s->vlf (vl.c). */
static void record_vlf(struct swift_an_source *s, double ts, const struct swift_an_fval *A)
{
    if (s->nvlf == s->capvlf) {
        s->capvlf = s->capvlf ? s->capvlf * 2 : 64;
        s->vlf = swift_xrealloc(s->vlf, s->capvlf * sizeof(*s->vlf));
    }
    s->vlf[s->nvlf++] = (struct swift_an_vlf){ts,
                                              fv_is_num(&A[AK_FLOPS]) ? fv_num(&A[AK_FLOPS]) : 0,
                                              fv_num(&A[AK_VFLOPS]),
                                              fv_int(&A[AK_IMAGES], 0),
                                              fv_int(&A[AK_PATCHES], 0)};
}

/* An event with fields of the wrong kind: in a JSONL trace a bad line, counted and skipped
 * (returns 0); in a JSON trace the file's error (-1). */
static int bad_field(struct loadctx *c, long line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad_field(struct loadctx *c, long line, const char *fmt, ...)
{
    struct swift_an_source *s = c->s;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (!s->damage.lines)
        return swift_error_at(s->path, line, "%s", msg);
    s->nevents--; /* not an event after all */
    return swift_an_damage_note(&s->damage, s->path, line, "%s", msg);
}

/* A complete ("X") event at ts: checked, then kept as a compact record. */
static int on_complete(struct loadctx *c, const struct swift_an_fev *f, json_t *e, uint64_t off,
                       long line, const char *nm, double ts, int real)
{
    struct swift_an_set *set = c->set;
    struct swift_an_source *s = c->s;
    double dur = 0;
    if (f->dur.t == SWIFT_AN_FV_NONE)
        return bad_field(c,
                         line,
                         "byte %llu: complete event \"%.80s\" without dur",
                         (unsigned long long)off,
                         nm);
    if (fv_num_of(&f->dur, &dur) < 0 || !isfinite(dur))
        return bad_field(c, line, "byte %llu: \"dur\" is not a number", (unsigned long long)off);
    if (f->cat.t != SWIFT_AN_FV_NONE && f->cat.t != SWIFT_AN_FV_STR)
        return bad_field(c, line, "byte %llu: \"cat\" is not a string", (unsigned long long)off);
    int has_cat = f->cat.t == SWIFT_AN_FV_STR;
    if (real)
        s->ts_real = 1;
    if (set->max_events && set->kept >= set->max_events)
        return swift_error_at(s->path,
                              line,
                              "byte %llu: more than %zu events kept in all",
                              (unsigned long long)off,
                              set->max_events);
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 4096;
        s->ev = swift_xrealloc(s->ev, s->cap * sizeof(*s->ev));
    }
    set->kept++;
    struct swift_an_ev *ev = &s->ev[s->n++];
    memset(ev, 0, sizeof(*ev));
    ev->ts = ts;
    ev->dur = dur;
    ev->name = swift_an_intern(&set->strs, nm, f->name.t == SWIFT_AN_FV_STR ? f->name.len : 0);
    ev->cat = has_cat ? swift_an_intern(&set->strs, f->cat.s, f->cat.len) : SWIFT_AN_NONE;
    if (s->kind == SWIFT_AN_SWIFT && has_cat && !swift_trace_category_known(f->cat.s)) {
        if (s->unknown_cat++ == 0)
            swift_warn("%s:%ld: byte %llu: unknown category \"%.40s\" (see docs/trace-schema.md)",
                       s->path,
                       line,
                       (unsigned long long)off,
                       f->cat.s);
    }
    ev->pid = fv_id(set, &f->pid);
    ev->tid = fv_id(set, &f->tid);
    ev->corr = -1;
    ev->ext = -1;
    ev->stream = -1;
    ev->step = -1;
    ev->comm = SWIFT_AN_NONE;
    ev->blocks_per_sm = -1;
    ev->occupancy = -1;
    ev->dev = -1;
    if (s->kind == SWIFT_AN_SWIFT && has_cat && !strcmp(f->cat.s, "infer"))
        record_infer(s, nm, ts, dur, f->args == 1 ? f->a : NULL);
    if (f->args != 1)
        return 0;
    record_args(s, ev, f->a);
    swift_an_oproof_note(s, ev, f, e);
    /* our comm spans: the bytes they moved (collectives.c's bandwidth) */
    if (s->kind == SWIFT_AN_SWIFT && has_cat && !strcmp(f->cat.s, "comm"))
        ev->aux = fv_int(&f->a[AK_BYTES], 0);
    /* our RL spans (rl.c): the rows a generate decoded together, whether a reward.NAME is a
     * program (the first letter spares the name compares on every other event) */
    if (s->kind == SWIFT_AN_SWIFT && (nm[0] == 'g' || nm[0] == 'r')) {
        int k = swift_an_rl_kind(nm);
        if (k == SWIFT_AN_RL_GENERATE)
            ev->aux = fv_int(&f->a[AK_ROWS], 0);
        else if (k == SWIFT_AN_RL_REWARD_FN)
            ev->aux = fv_int(&f->a[AK_PROGRAM], 0);
    }
    if (f->a[AK_COLL].t != SWIFT_AN_FV_NONE && e)
        record_comm(set, s, ev, json_object_get(e, "args"));
    if (s->kind == SWIFT_AN_SWIFT && fv_is_num(&f->a[AK_VFLOPS]) && !strcmp(nm, "forward_backward"))
        record_vlf(s, ts, f->a);
    return 0;
}

/* One event from its fields; e is the jansson object when jansson read it (always so for "M"
 * events and collectives: the fast scanner leaves those to jansson), else NULL. */
static int on_fields(struct loadctx *c, const struct swift_an_fev *f, json_t *e, uint64_t off,
                     long line)
{
    struct swift_an_source *s = c->s;
    s->nevents++;
    if (f->ph.t != SWIFT_AN_FV_STR)
        return bad_field(
            c, line, "byte %llu: event without a string \"ph\"", (unsigned long long)off);
    const char *p = f->ph.s;
    if (f->args == 2)
        return bad_field(c, line, "byte %llu: \"args\" is not an object", (unsigned long long)off);
    if (f->name.t != SWIFT_AN_FV_NONE && f->name.t != SWIFT_AN_FV_STR)
        return bad_field(c, line, "byte %llu: \"name\" is not a string", (unsigned long long)off);
    const char *nm = f->name.t == SWIFT_AN_FV_STR ? f->name.s : "";
    if (p[0] == 'M') {
        on_metadata(s, nm, e);
        return 0;
    }
    double ts = 0;
    if (f->ts.t == SWIFT_AN_FV_NONE) {
        if (p[0] == 'X' || p[0] == 'B' || p[0] == 'E' || p[0] == 'C' || p[0] == 'i' || p[0] == 'I')
            return bad_field(
                c, line, "byte %llu: event \"%.80s\" without ts", (unsigned long long)off, nm);
        return 0;
    }
    int real = fv_num_of(&f->ts, &ts);
    if (real < 0)
        return bad_field(c, line, "byte %llu: \"ts\" is not a number", (unsigned long long)off);
    if (!isfinite(ts))
        return bad_field(c, line, "byte %llu: \"ts\" is not finite", (unsigned long long)off);
    if (p[0] == 'i' || p[0] == 'I' || p[0] == 'C') {
        if (p[0] == 'C' && !strcmp(nm, "peak_gflops") && fv_is_num(&f->a[AK_PEAK]))
            s->peak_gflops = fv_num(&f->a[AK_PEAK]);
        on_memory(s, f, nm, ts);
        return 0;
    }
    if (p[0] != 'X')
        return 0; /* flows, async and B/E pairs are not analysed (merge passes them on) */
    return on_complete(c, f, e, off, line, nm, ts, real);
}

static int on_event(void *vctx, json_t *e, uint64_t off, long line)
{
    struct swift_an_fev f;
    swift_an_fev_of_json(e, &f);
    return on_fields(vctx, &f, e, off, line);
}

static int on_fast_event(void *vctx, const struct swift_an_fev *f, uint64_t off, long line)
{
    return on_fields(vctx, f, NULL, off, line);
}

/* ---------- sources ---------- */

void swift_an_set_init(struct swift_an_set *set)
{
    memset(set, 0, sizeof(*set));
}

static void source_release(struct swift_an_source *s)
{
    free(s->path);
    free(s->host);
    free(s->stage);
    free(s->process_name);
    free(s->trace_name);
    free(s->time_unit);
    free(s->omp_wait_policy);
    free(s->device);
    json_decref(s->argv);
    json_decref(s->argv_given);
    json_decref(s->config);
    json_decref(s->meta);
    free(s->ev);
    free(s->comm);
    free(s->inf);
    free(s->vlf);
    swift_an_mem_free(s);
    swift_an_oproof_free(s);
    memset(s, 0, sizeof(*s));
}

void swift_an_set_release(struct swift_an_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        source_release(&set->src[i]);
    free(set->src);
    for (uint32_t i = 0; i < set->strs.n; i++)
        free(set->strs.str[i]);
    free(set->strs.str);
    free(set->strs.slot);
    memset(set, 0, sizeof(*set));
}

int swift_an_is_trace_name(const char *name)
{
    static const char *const ends[] = {".json", ".json.gz", ".jsonl", ".jsonl.gz", NULL};
    size_t l = strlen(name);
    for (int i = 0; ends[i]; i++) {
        size_t k = strlen(ends[i]);
        if (l > k && !strcmp(name + l - k, ends[i]))
            return 1;
    }
    return 0;
}

/* Rank from the file name when the trace does not say: "rank-3", "rank3", "-r3.", "worker3". */
static int rank_from_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    static const char *const pats[] = {"rank-", "rank_", "rank", "-r", "worker", NULL};
    for (int i = 0; pats[i]; i++) {
        const char *p = strstr(base, pats[i]);
        if (!p)
            continue;
        p += strlen(pats[i]);
        if (*p < '0' || *p > '9')
            continue;
        long v = strtol(p, NULL, 10);
        if (v >= 0 && v < 1000000)
            return (int)v;
    }
    return -1;
}

static struct swift_an_source *new_source(struct swift_an_set *set, const char *path)
{
    if (set->n == set->cap) {
        set->cap = set->cap ? set->cap * 2 : 8;
        set->src = swift_xrealloc(set->src, set->cap * sizeof(*set->src));
    }
    struct swift_an_source *s = &set->src[set->n];
    memset(s, 0, sizeof(*s));
    s->path = swift_xstrdup(path);
    s->kind = SWIFT_AN_KINETO;
    s->rank = -1;
    s->pid = -1;
    return s;
}

static int finish_source(struct swift_an_set *set, struct swift_an_source *s, int rc)
{
    const struct swift_an_damage *d = &s->damage;
    if (rc == 0 && d->bad > SWIFT_AN_BAD_SHOWN)
        swift_warn("%s: %ld bad lines skipped in all (the first %d named above)",
                   s->path,
                   d->bad,
                   SWIFT_AN_BAD_SHOWN);
    if (rc == 0 && d->lines && s->nevents == 0) {
        /* nothing to analyse: an empty file, or nothing but bad lines */
        if (d->bad)
            swift_error("%s: no trace event could be read (%ld bad line%s)",
                        s->path,
                        d->bad,
                        d->bad > 1 ? "s" : "");
        else
            swift_error("%s: empty trace (no events%s)",
                        s->path,
                        d->tail_line > 0 ? ", only a truncated line" : "");
        rc = -1;
    }
    if (rc < 0) {
        set->kept -= s->n;
        source_release(s);
        set->nfailed++;
        return -1;
    }
    if (s->rank < 0)
        s->rank = rank_from_name(s->path);
    set->bad_lines += d->bad;
    set->n++;
    return 0;
}

static int load_file(struct swift_an_set *set, const char *path)
{
    struct swift_an_source *s = new_source(set, path);
    if (swift_an_name_is_jsonl(path))
        s->kind = SWIFT_AN_SWIFT;
    if (!s->kind || s->kind == SWIFT_AN_KINETO) {
        if (swift_an_memtl_sniff(path)) /* memory.c: torch's memory timeline, not events */
            return finish_source(set, s, swift_an_memtl_load(s, path));
    }
    struct loadctx c = {.set = set, .s = s};
    int rc = swift_an_stream_file_fast(path, on_event, on_fast_event, on_meta, &c, &s->damage);
    return finish_source(set, s, rc);
}

int swift_an_load_buffer(struct swift_an_set *set, const char *name, const void *data, size_t len)
{
    struct swift_an_source *s = new_source(set, name);
    if (swift_an_name_is_jsonl(name))
        s->kind = SWIFT_AN_SWIFT;
    struct loadctx c = {.set = set, .s = s};
    int rc = swift_an_stream_buffer_fast(
        name, data, len, on_event, on_fast_event, on_meta, &c, &s->damage);
    s->bytes = len;
    return finish_source(set, s, rc);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of directory path a load takes (trace files, and subdirectories with
 * SWIFT_AN_LOAD_RECURSE), joined to path and sorted by name, into *names; -1 after saying why. */
static int dir_names(const char *path, int flags, char ***names, size_t *nnames)
{
    DIR *d = opendir(path);
    if (!d)
        return swift_error_errno("cannot open directory '%s'", path);
    size_t n = 0, cap = 0;
    struct dirent *de;
    *names = NULL;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char *full = swift_path_join(path, de->d_name);
        int isdir = swift_is_dir(full);
        if ((isdir && (flags & SWIFT_AN_LOAD_RECURSE)) ||
            (!isdir && swift_an_is_trace_name(de->d_name))) {
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                *names = swift_xrealloc(*names, cap * sizeof(**names));
            }
            (*names)[n++] = full;
        } else {
            free(full);
        }
    }
    closedir(d);
    swift_an_sort(*names, n, sizeof(**names), cmp_str);
    *nnames = n;
    return 0;
}

int swift_an_load_path(struct swift_an_set *set, const char *path, int flags)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return swift_error_errno("cannot open '%s'", path);
    if (!S_ISDIR(st.st_mode)) {
        if (load_file(set, path) < 0)
            return 0;
        set->src[set->n - 1].bytes = (uint64_t)st.st_size;
        return 1;
    }
    char **names;
    size_t n;
    if (dir_names(path, flags, &names, &n) < 0)
        return -1;
    int total = 0;
    for (size_t i = 0; i < n; i++) {
        int r = swift_an_load_path(set, names[i], flags);
        if (r > 0)
            total += r;
        free(names[i]);
    }
    free(names);
    return total;
}

int swift_an_list_path(const char *path, int flags, char ***files, size_t *n, size_t *cap)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return swift_error_errno("cannot open '%s'", path);
    if (!S_ISDIR(st.st_mode)) {
        if (*n == *cap) {
            *cap = *cap ? *cap * 2 : 16;
            *files = swift_xrealloc(*files, *cap * sizeof(**files));
        }
        (*files)[(*n)++] = swift_xstrdup(path);
        return 1;
    }
    char **names;
    size_t nn;
    if (dir_names(path, flags, &names, &nn) < 0)
        return -1;
    int total = 0;
    for (size_t i = 0; i < nn; i++) {
        int r = swift_an_list_path(names[i], flags, files, n, cap);
        if (r > 0)
            total += r;
        free(names[i]);
    }
    free(names);
    return total;
}

/* ---------- one file's strings and events against a set's strings (perrank.c) ---------- */

void swift_an_strtab_merge(struct swift_an_strtab *dst, const struct swift_an_strtab *src,
                           uint32_t *map)
{
    for (uint32_t i = 0; i < src->n; i++)
        map[i] = swift_an_intern(dst, src->str[i], strlen(src->str[i]));
}

void swift_an_strtab_view(struct swift_an_strtab *v, const struct swift_an_strtab *src,
                          const uint32_t *map, uint32_t n)
{
    static char none[1];
    memset(v, 0, sizeof(*v));
    v->str = swift_xmalloc(((size_t)n + 1) * sizeof(*v->str));
    for (uint32_t i = 0; i < n; i++)
        v->str[i] = none;
    v->n = v->cap = n;
    v->nslot = 1024;
    while (v->nslot < src->n * 2 + 2)
        v->nslot *= 2;
    v->slot = swift_xcalloc(v->nslot, sizeof(*v->slot));
    for (uint32_t i = 0; i < src->n; i++) {
        v->str[map[i]] = src->str[i];
        uint32_t h = hash_str(src->str[i], strlen(src->str[i])) & (v->nslot - 1);
        while (v->slot[h])
            h = (h + 1) & (v->nslot - 1);
        v->slot[h] = map[i] + 1;
    }
}

void swift_an_strtab_view_release(struct swift_an_strtab *v)
{
    free(v->str);
    free(v->slot);
    memset(v, 0, sizeof(*v));
}

static uint32_t remap_id(uint32_t id, const uint32_t *map, uint32_t n)
{
    return id < n ? map[id] : id;
}

/* fv_id's string ids: -1000000 - id */
static int64_t remap_sid(int64_t v, const uint32_t *map, uint32_t n)
{
    if (v > -1000000 || v < -1000000 - (int64_t)n + 1)
        return v;
    return -1000000 - (int64_t)map[-1000000 - v];
}

void swift_an_source_remap(struct swift_an_source *s, const uint32_t *map, uint32_t n)
{
    for (size_t i = 0; i < s->n; i++) {
        struct swift_an_ev *e = &s->ev[i];
        e->name = remap_id(e->name, map, n);
        e->cat = remap_id(e->cat, map, n);
        e->pid = remap_sid(e->pid, map, n);
        e->tid = remap_sid(e->tid, map, n);
    }
    for (size_t i = 0; i < s->ncomm; i++) {
        struct swift_an_comm *c = &s->comm[i];
        uint32_t *f[] = {&c->collective,
                         &c->dtype,
                         &c->in_split,
                         &c->out_split,
                         &c->pg_name,
                         &c->pg_desc,
                         &c->pg_ranks};
        for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++)
            *f[k] = remap_id(*f[k], map, n);
    }
    for (size_t i = 0; i < s->nshape; i++) /* the op roofline's ops (their shapes stay) */
        s->shape[i].name = remap_id(s->shape[i].name, map, n);
}

void swift_an_source_drop_events(struct swift_an_source *s)
{
    free(s->ev);
    free(s->comm);
    free(s->inf);
    free(s->vlf);
    swift_an_mem_free(s);
    swift_an_oproof_free(s);
    s->ev = NULL;
    s->comm = NULL;
    s->inf = NULL;
    s->vlf = NULL;
    s->n = s->cap = s->ncomm = s->capcomm = s->ninf = s->capinf = s->nvlf = s->capvlf = 0;
}

int swift_an_looks_like_trace(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return 0;
    char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    buf[n] = 0;
    size_t i = 0;
    while (i < n && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\t' || buf[i] == '\r'))
        i++;
    if (i < n && buf[i] == '[')
        return 1;
    return strstr(buf + i, "\"traceEvents\"") || strstr(buf + i, "\"ph\"");
}

/* ---------- damage in the report ---------- */

void swift_an_damage_json(json_t *proc, const struct swift_an_damage *d)
{
    json_t *first = json_array();
    for (long i = 0; i < d->bad && i < SWIFT_AN_BAD_SHOWN; i++)
        json_array_append_new(first, json_integer(d->first_bad[i]));
    json_object_set_new(proc, "bad_lines", json_integer(d->bad));
    json_object_set_new(proc, "bad_line_numbers", first);
    json_object_set_new(
        proc, "truncated_tail_line", d->tail_line > 0 ? json_integer(d->tail_line) : json_null());
}

const char *swift_an_damage_text(json_t *proc, char *b, size_t n)
{
    json_int_t bad = json_integer_value(json_object_get(proc, "bad_lines"));
    json_t *tail = json_object_get(proc, "truncated_tail_line");
    if (!bad && !json_is_integer(tail))
        return NULL;
    size_t k = 0;
    b[0] = 0;
    if (bad) {
        k += (size_t)snprintf(
            b, n, "%lld bad line%s skipped (line", (long long)bad, bad > 1 ? "s" : "");
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(proc, "bad_line_numbers"), i, v)
        {
            if (k < n)
                k += (size_t)snprintf(b + k,
                                      n - k,
                                      "%s %lld",
                                      i ? "," : (bad > 1 ? "s" : ""),
                                      (long long)json_integer_value(v));
        }
        if (k < n)
            k += (size_t)snprintf(b + k, n - k, "%s)", bad > SWIFT_AN_BAD_SHOWN ? ", ..." : "");
    }
    if (json_is_integer(tail) && k < n)
        snprintf(b + k,
                 n - k,
                 "%struncated last line %lld ignored",
                 bad ? "; " : "",
                 (long long)json_integer_value(tail));
    return b;
}

void swift_an_damage_strict(const struct swift_an_set *set)
{
    for (size_t i = 0; i < set->n; i++) {
        const struct swift_an_source *s = &set->src[i];
        if (s->damage.bad) {
            swift_error_at(s->path,
                           s->damage.first_bad[0],
                           "bad line (%ld bad line%s in all inputs; --strict)",
                           set->bad_lines,
                           set->bad_lines > 1 ? "s" : "");
            return;
        }
    }
}
