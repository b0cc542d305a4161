/* cli_config — a YAML or JSON config file as options (lib/core/cli.h): each key is an option of
 * the command, a key of another stage (another program's option, or an ms-swift key that belongs
 * to another stage: ignored, one note for them all), or unknown (a usage error, exit 2). */
#include "lib/core/alloc.h"
#include "lib/core/cli.h"
#include "lib/core/cli_internal.h"
#include "lib/core/error.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "lib/core/banned.h"

struct words {
    char ***v;
    int *n;
    int cap;
    char ignored[2048]; /* "dataset (swift-preprocess/swift-eval), ..." */
    char own[1024];     /* keys of this stage that do nothing here, with why */
};

static void push_word(struct words *w, const char *s)
{
    if (*w->n + 1 >= w->cap) {
        w->cap = w->cap ? 2 * w->cap : 32;
        *w->v = swift_xrealloc(*w->v, (size_t)w->cap * sizeof(char *));
    }
    (*w->v)[(*w->n)++] = swift_xstrdup(s);
}

static int truthy(const char *v)
{
    return !strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "yes") || !strcmp(v, "1") ||
           !strcmp(v, "on");
}
static int falsy(const char *v)
{
    return !strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "no") || !strcmp(v, "0") ||
           !strcmp(v, "off") || !strcmp(v, "null") || !strcmp(v, "~") || !*v;
}

/* ---------- keys of other stages ---------- */

/* The registry the build generates from the programs' own tables (scripts/cli-registry.sh);
 * this empty one is what a program linked without it sees (unit tests, fuzzers). */
__attribute__((weak)) const struct swift_cli_program swift_cli_programs[] = {{NULL, NULL}};
static const struct swift_cli_program *registry;

void swift_cli_set_programs(const struct swift_cli_program *programs)
{
    registry = programs;
}

/* ms-swift's keys that no option table here has: the stage each belongs to, and whether that
 * stage accepts it doing nothing (1) or refuses it as a usage error with the hint (0). */
static const struct {
    const char *key, *stage;
    int accepted;
    const char *note;
} msswift_keys[] = {
    {"torch_dtype",
     "swift-train",
     1,
     "the checkpoint's dtype is kept on save; the math is fp32 on the CPU"},
    {"deepspeed", "swift-train", 0, "here: mpirun -np N swift-train --zero 1, docs/distributed.md"},
};

/* Append ", item" (or "item" first) to buf, truncated with "..." when full. */
static void append_item(char *buf, size_t cap, const char *sep, const char *item)
{
    size_t n = strlen(buf);
    if (n + 4 >= cap)
        return;
    int m = snprintf(buf + n, cap - n, "%s%s", n ? sep : "", item);
    if (m < 0 || (size_t)m >= cap - n)
        snprintf(buf + cap - 4, 4, "...");
}

/* The programs other than cmd that take key, "swift-preprocess/swift-eval" into owners. */
static void find_owners(const struct swift_command *cmd, const char *key, char *owners, size_t cap)
{
    size_t klen = strlen(key);
    for (size_t i = 0; i < sizeof(msswift_keys) / sizeof(msswift_keys[0]); i++)
        if (swift_cli_name_eq(key, klen, msswift_keys[i].key) &&
            strcmp(msswift_keys[i].stage, cmd->name))
            append_item(owners, cap, "/", msswift_keys[i].stage);
    for (const struct swift_cli_program *p = registry ? registry : swift_cli_programs; p->name;
         p++) {
        if (!strcmp(p->name, cmd->name) || strstr(owners, p->name))
            continue;
        for (const char *const *k = p->keys; *k; k++)
            if (swift_cli_name_eq(key, klen, *k)) {
                append_item(owners, cap, "/", p->name);
                break;
            }
    }
}

/* A key cmd has no option for: another stage's (noted, 0), or unknown (SWIFT_MISUSED). */
static int other_key(const struct swift_command *cmd, const char *path, long line, const char *key,
                     struct words *w)
{
    for (size_t i = 0; i < sizeof(msswift_keys) / sizeof(msswift_keys[0]); i++) {
        if (!swift_cli_name_eq(key, strlen(key), msswift_keys[i].key) ||
            strcmp(msswift_keys[i].stage, cmd->name))
            continue;
        if (!msswift_keys[i].accepted) {
            swift_usage_at(path, line, "unknown option '%s' (%s)", key, msswift_keys[i].note);
            return SWIFT_MISUSED;
        }
        char item[512];
        snprintf(item, sizeof(item), "%s (%s)", key, msswift_keys[i].note);
        append_item(w->own, sizeof(w->own), ", ", item);
        return 0;
    }
    char owners[256] = "", item[384];
    find_owners(cmd, key, owners, sizeof(owners));
    if (!owners[0]) {
        swift_usage_at(path, line, "unknown option '%s'", key);
        return SWIFT_MISUSED;
    }
    snprintf(item, sizeof(item), "%s (%s)", key, owners);
    append_item(w->ignored, sizeof(w->ignored), ", ", item);
    return 0;
}

/* ---------- values ---------- */

/* One key: value pair at the top level. */
static int emit_pair(const struct swift_command *cmd, const char *path, long line, const char *key,
                     const char *value, struct words *w)
{
    const struct swift_option *o = swift_cli_find_option(cmd, key, strlen(key));
    if (!o)
        return other_key(cmd, path, line, key, w);
    char flag[160];
    snprintf(flag, sizeof(flag), "--%s", o->name);
    if (swift_cli_takes_arg(o) == no_argument) {
        if (truthy(value))
            push_word(w, flag);
        else if (!falsy(value))
            return swift_error_at(
                path, line, "option '%s' takes true or false, not '%s'", key, value);
        return 0;
    }
    if (!strcmp(value, "null") || !strcmp(value, "~"))
        return 0;
    push_word(w, flag);
    push_word(w, value);
    return 0;
}

/* profiler: {enabled, wait_steps, warmup_steps, active_steps, repeat, output_dir, record_shapes,
 * profile_memory, with_stack} → --profile wait=..,warmup=..,active=..[,repeat=..][,shapes=1]...
 * and --trace output_dir/ */
struct profcfg {
    int enabled;
    char spec[256];
    char outdir[1024];
};

static int prof_key(struct profcfg *p, const char *path, long line, const char *k, const char *v)
{
    static const struct {
        const char *key, *name;
    } map[] = {{"wait_steps", "wait"},
               {"warmup_steps", "warmup"},
               {"active_steps", "active"},
               {"repeat", "repeat"},
               {"skip_first", "skip_first"},
               {"record_shapes", "shapes"},
               {"profile_memory", "memory"},
               {"with_stack", "stack"},
               {"with_flops", "flops"}};
    if (swift_cli_name_eq(k, strlen(k), "enabled")) {
        p->enabled = truthy(v);
        return 0;
    }
    if (swift_cli_name_eq(k, strlen(k), "output_dir")) {
        snprintf(p->outdir, sizeof(p->outdir), "%s%s", v, *v && v[strlen(v) - 1] == '/' ? "" : "/");
        return 0;
    }
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        if (!swift_cli_name_eq(k, strlen(k), map[i].key))
            continue;
        const char *val = v;
        if (truthy(v) && strcmp(map[i].name, "wait") && strcmp(map[i].name, "warmup") &&
            strcmp(map[i].name, "active") && strcmp(map[i].name, "repeat") &&
            strcmp(map[i].name, "skip_first"))
            val = "1";
        else if (falsy(v) && strcmp(v, "0"))
            val = "0";
        size_t n = strlen(p->spec);
        snprintf(p->spec + n, sizeof(p->spec) - n, "%s%s=%s", n ? "," : "", map[i].name, val);
        return 0;
    }
    return swift_error_at(path, line, "unknown profiler key '%s'", k);
}

static int prof_finish(const struct swift_command *cmd, const char *path, struct profcfg *p,
                       struct words *w)
{
    if (!p->enabled)
        return 0;
    if (!swift_cli_find_option(cmd, "profile", 7))
        return swift_error_at(path, 0, "%s does not take a profiler section", cmd->name);
    push_word(w, "--profile");
    push_word(w, p->spec[0] ? p->spec : "wait=1,warmup=1,active=3");
    if (p->outdir[0]) {
        push_word(w, "--trace");
        push_word(w, p->outdir);
    }
    return 0;
}

/* A JSON config value as option text: a string as it is, anything else as compact JSON. */
static char *value_text(json_t *v)
{
    if (json_is_string(v))
        return swift_xstrdup(json_string_value(v));
    char *s = json_dumps(v, JSON_ENCODE_ANY);
    if (!s)
        abort(); /* only a bug: jansson allocates through swift_xmalloc */
    return s;
}

static int expand_json(const struct swift_command *cmd, const char *path, struct words *w)
{
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return swift_error_at(path, je.line, "%s", je.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return swift_error_at(path, 1, "config must be an object of options");
    }
    int rc = 0;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        char buf[4096];
        if (!strcmp(key, "profiler") && json_is_object(val)) {
            struct profcfg p = {0};
            const char *k2;
            json_t *v2;
            json_object_foreach(val, k2, v2)
            {
                char *s = value_text(v2);
                rc = prof_key(&p, path, 0, k2, s);
                free(s);
                if (rc)
                    break;
            }
            if (!rc)
                rc = prof_finish(cmd, path, &p, w);
        } else if (json_is_array(val)) {
            size_t i, n = 0;
            json_t *e;
            buf[0] = 0;
            json_array_foreach(val, i, e)
            {
                char *s = value_text(e);
                n += (size_t)snprintf(
                    buf + n, n < sizeof(buf) ? sizeof(buf) - n : 0, "%s%s", i ? "," : "", s);
                free(s);
            }
            rc = emit_pair(cmd, path, 0, key, buf, w);
        } else if (json_is_object(val)) {
            rc = swift_cli_find_option(cmd, key, strlen(key))
                     ? swift_error_at(path, 0, "option '%s' cannot be an object", key)
                     : other_key(cmd, path, 0, key, w);
        } else {
            char *s = value_text(val);
            rc = emit_pair(cmd, path, 0, key, s, w);
            free(s);
        }
        if (rc)
            break;
    }
    json_decref(root);
    return rc == SWIFT_MISUSED ? rc : rc ? -1 : 0;
}

static int expand_yaml(const struct swift_command *cmd, const char *path, struct words *w)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return swift_error_errno("cannot open '%s'", path);
    yaml_parser_t yp;
    yaml_document_t doc;
    yaml_parser_initialize(&yp);
    yaml_parser_set_input_file(&yp, fp);
    int rc = 0;
    if (!yaml_parser_load(&yp, &doc)) {
        rc = swift_error_at(
            path, (long)yp.problem_mark.line + 1, "%s", yp.problem ? yp.problem : "invalid YAML");
        yaml_parser_delete(&yp);
        fclose(fp);
        return rc;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        rc = 0; /* empty file: no options */
        goto out;
    }
    if (root->type != YAML_MAPPING_NODE) {
        rc = swift_error_at(
            path, (long)root->start_mark.line + 1, "config must be a mapping of options");
        goto out;
    }
    for (yaml_node_pair_t *pr = root->data.mapping.pairs.start; pr < root->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = yaml_document_get_node(&doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(&doc, pr->value);
        long line = (long)k->start_mark.line + 1;
        if (k->type != YAML_SCALAR_NODE) {
            rc = swift_error_at(path, line, "option names must be plain words");
            break;
        }
        const char *key = (const char *)k->data.scalar.value;
        if (v->type == YAML_SCALAR_NODE) {
            rc = emit_pair(cmd, path, line, key, (const char *)v->data.scalar.value, w);
        } else if (v->type == YAML_SEQUENCE_NODE) {
            char buf[4096];
            size_t n = 0;
            buf[0] = 0;
            for (yaml_node_item_t *it = v->data.sequence.items.start;
                 it < v->data.sequence.items.top;
                 it++) {
                yaml_node_t *e = yaml_document_get_node(&doc, *it);
                if (e->type != YAML_SCALAR_NODE) {
                    rc = swift_error_at(path,
                                        (long)e->start_mark.line + 1,
                                        "list items of '%s' must be scalars",
                                        key);
                    break;
                }
                n += (size_t)snprintf(buf + n,
                                      n < sizeof(buf) ? sizeof(buf) - n : 0,
                                      "%s%s",
                                      n ? "," : "",
                                      (const char *)e->data.scalar.value);
            }
            if (!rc)
                rc = emit_pair(cmd, path, line, key, buf, w);
        } else if (!strcmp(key, "profiler")) {
            struct profcfg p = {0};
            for (yaml_node_pair_t *q = v->data.mapping.pairs.start;
                 q < v->data.mapping.pairs.top && !rc;
                 q++) {
                yaml_node_t *k2 = yaml_document_get_node(&doc, q->key);
                yaml_node_t *v2 = yaml_document_get_node(&doc, q->value);
                if (k2->type != YAML_SCALAR_NODE || v2->type != YAML_SCALAR_NODE) {
                    rc = swift_error_at(
                        path, (long)k2->start_mark.line + 1, "profiler keys take plain values");
                    break;
                }
                rc = prof_key(&p,
                              path,
                              (long)k2->start_mark.line + 1,
                              (const char *)k2->data.scalar.value,
                              (const char *)v2->data.scalar.value);
            }
            if (!rc)
                rc = prof_finish(cmd, path, &p, w);
        } else if (swift_cli_find_option(cmd, key, strlen(key))) {
            rc = swift_error_at(path, line, "option '%s' cannot be a mapping", key);
        } else {
            rc = other_key(cmd, path, line, key, w); /* another stage's, or unknown */
        }
        if (rc)
            break;
    }
out:
    yaml_document_delete(&doc);
    yaml_parser_delete(&yp);
    fclose(fp);
    return rc == SWIFT_MISUSED ? rc : rc ? -1 : 0;
}

int swift_cli_config_expand(const struct swift_command *cmd, const char *path, char ***words,
                            int *nwords)
{
    struct words *w = swift_xcalloc(1, sizeof(*w));
    *w = (struct words){words, nwords, *nwords, "", ""};
    size_t n = strlen(path);
    int rc = n > 5 && !strcmp(path + n - 5, ".json") ? expand_json(cmd, path, w)
                                                     : expand_yaml(cmd, path, w);
    if (rc == 0 && w->ignored[0])
        swift_info("%s: ignoring keys for other stages: %s", path, w->ignored);
    if (rc == 0 && w->own[0])
        swift_info("%s: ignoring %s", path, w->own);
    free(w);
    return rc;
}
