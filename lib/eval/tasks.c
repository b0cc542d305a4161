/* Task readers: MMLU CSV (RFC 4180), multiple-choice / GSM8K / exact-match JSONL. */
#include "lib/eval/eval.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/jsonl.h"
#include "lib/eval/prompt.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/core/banned.h"

#define MAX_FIELD ((size_t)1 << 20) /* one CSV field */
#define MAX_ITEMS ((size_t)10 << 20)

static const char *const task_names[] = {
    "loss", "ppl", "mc", "mmlu", "gsm8k", "exact", "pref", "toolcall"};

int swift_eval_task_parse(const char *name)
{
    for (int i = 0; i < (int)(sizeof(task_names) / sizeof(task_names[0])); i++)
        if (!strcmp(name, task_names[i]))
            return i;
    return -1;
}

const char *swift_eval_task_name(int task)
{
    if (task < 0 || task >= (int)(sizeof(task_names) / sizeof(task_names[0])))
        return "?";
    return task_names[task];
}

int swift_eval_task_generates(int task)
{
    return task == SWIFT_EVAL_GSM8K || task == SWIFT_EVAL_EXACT || task == SWIFT_EVAL_TOOLCALL;
}

void swift_eval_set_init(struct swift_eval_set *set)
{
    memset(set, 0, sizeof(*set));
}

static void item_release(struct swift_eval_item *it)
{
    free(it->subject);
    free(it->question);
    for (int i = 0; i < it->nchoices; i++)
        free(it->choices[i]);
    free(it->choices);
    free(it->target);
    free(it->reference);
    for (int i = 0; i < it->nimages; i++)
        free(it->images[i]);
    free(it->images);
    memset(it, 0, sizeof(*it));
}

void swift_eval_set_release(struct swift_eval_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        item_release(&set->items[i]);
    free(set->items);
    for (size_t i = 0; i < set->nfiles; i++)
        free(set->files[i]);
    free(set->files);
    memset(set, 0, sizeof(*set));
}

static const char *set_file(struct swift_eval_set *set, const char *name)
{
    if (set->nfiles && !strcmp(set->files[set->nfiles - 1], name))
        return set->files[set->nfiles - 1];
    char **f = swift_xrealloc(set->files, (set->nfiles + 1) * sizeof(*f));
    set->files = f;
    f[set->nfiles] = swift_xstrdup(name);
    return f[set->nfiles++];
}

/* Append a zeroed item; NULL past the ceiling (reported). */
static struct swift_eval_item *set_push(struct swift_eval_set *set, const char *file, long line)
{
    if (set->n >= MAX_ITEMS) {
        swift_error_at(file, line, "more than %zu items", MAX_ITEMS);
        return NULL;
    }
    if (set->n == set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 64;
        set->items = swift_xrealloc(set->items, cap * sizeof(*set->items));
        set->cap = cap;
    }
    struct swift_eval_item *it = &set->items[set->n++];
    memset(it, 0, sizeof(*it));
    it->answer = -1;
    it->line = line;
    it->file = set_file(set, file);
    return it;
}

struct swift_eval_item *swift_eval_set_push(struct swift_eval_set *set, const char *file, long line)
{
    return set_push(set, file, line);
}

static void set_pop(struct swift_eval_set *set)
{
    item_release(&set->items[--set->n]);
}

/* ---- CSV ---- */

struct csv {
    FILE *fp;
    const char *name;
    long line;     /* current physical line */
    long row_line; /* first line of the row last read */
    char **fields;
    size_t *lens;
    int n, cap;
    char *buf;
    size_t len, bcap;
};

static int csv_field_end(struct csv *c)
{
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 8;
        if (cap > 64)
            return swift_error_at(c->name, c->row_line, "more than 64 fields");
        c->fields = swift_xrealloc(c->fields, (size_t)cap * sizeof(*c->fields));
        c->cap = cap;
    }
    char *s = swift_xmalloc(c->len + 1);
    if (c->len)
        memcpy(s, c->buf, c->len);
    s[c->len] = 0;
    c->fields[c->n++] = s;
    c->len = 0;
    return 0;
}

static int csv_putc(struct csv *c, int ch)
{
    if (c->len + 1 >= c->bcap) {
        if (c->bcap >= MAX_FIELD)
            return swift_error_at(c->name, c->row_line, "field longer than %zu bytes", MAX_FIELD);
        size_t cap = c->bcap ? c->bcap * 2 : 256;
        c->buf = swift_xrealloc(c->buf, cap);
        c->bcap = cap;
    }
    c->buf[c->len++] = (char)ch;
    return 0;
}

static void csv_clear(struct csv *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->fields[i]);
    c->n = 0;
    c->len = 0;
}

/* Read one record: 1, 0 at end, -1 on error. Blank lines are skipped. */
static int csv_next(struct csv *c)
{
    csv_clear(c);
    int ch;
    for (;;) { /* skip blank lines */
        ch = getc(c->fp);
        if (ch == '\r')
            continue;
        if (ch == '\n') {
            c->line++;
            continue;
        }
        break;
    }
    if (ch == EOF)
        return 0;
    c->row_line = c->line;
    int quoted = 0, after_quote = 0;
    for (;; ch = getc(c->fp)) {
        if (quoted) {
            if (ch == EOF)
                return swift_error_at(c->name, c->row_line, "unterminated quoted field");
            if (ch == '"') {
                int nx = getc(c->fp);
                if (nx == '"') {
                    if (csv_putc(c, '"') < 0)
                        return -1;
                    continue;
                }
                quoted = 0;
                after_quote = 1;
                ch = nx;
            } else {
                if (ch == '\n')
                    c->line++;
                if (csv_putc(c, ch) < 0)
                    return -1;
                continue;
            }
        }
        if (ch == '"' && c->len == 0 && !after_quote) {
            quoted = 1;
            continue;
        }
        if (ch == ',') {
            if (csv_field_end(c) < 0)
                return -1;
            after_quote = 0;
            continue;
        }
        if (ch == '\r') {
            int nx = getc(c->fp);
            if (nx != '\n' && nx != EOF)
                ungetc(nx, c->fp);
            ch = nx == EOF ? EOF : '\n';
        }
        if (ch == '\n' || ch == EOF) {
            if (csv_field_end(c) < 0)
                return -1;
            if (ch == '\n')
                c->line++;
            return 1;
        }
        if (after_quote)
            return swift_error_at(
                c->name, c->line, "unexpected '%c' after a closing quote", isprint(ch) ? ch : '?');
        if (ch == 0)
            return swift_error_at(c->name, c->line, "NUL byte in a field");
        if (csv_putc(c, ch) < 0)
            return -1;
    }
}

static void csv_free(struct csv *c)
{
    csv_clear(c);
    free(c->fields);
    free(c->buf);
}

/* Answer "0".."n-1" or "A".. (one letter, optional surrounding spaces); -1 when neither. */
static int parse_answer_str(const char *s, int nchoices)
{
    while (*s == ' ')
        s++;
    size_t l = strlen(s);
    while (l && s[l - 1] == ' ')
        l--;
    if (l == 0)
        return -2; /* missing */
    if (l == 1 && s[0] >= 'A' && s[0] < 'A' + nchoices)
        return s[0] - 'A';
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end != s + l || end == s)
        return -1;
    if (v < 0 || v >= nchoices)
        return -1;
    return (int)v;
}

static int is_mmlu_header(const struct csv *c)
{
    static const char *const h[] = {
        "question", "choice0", "choice1", "choice2", "choice3", "answer"};
    if (c->n != 6)
        return 0;
    for (int i = 0; i < 6; i++)
        if (strcmp(c->fields[i], h[i]))
            return 0;
    return 1;
}

int swift_eval_read_mmlu_stream(FILE *fp, const char *name, const char *subject,
                                struct swift_eval_set *set)
{
    struct csv c = {.fp = fp, .name = name, .line = 1};
    int rc, first = 1;
    size_t start = set->n;
    while ((rc = csv_next(&c)) > 0) {
        if (first && is_mmlu_header(&c)) {
            first = 0;
            continue;
        }
        first = 0;
        if (c.n != 6) {
            rc = swift_error_at(
                name, c.row_line, "expected 6 fields (question, 4 choices, answer), got %d", c.n);
            break;
        }
        int ans = parse_answer_str(c.fields[5], 4);
        if (ans == -2) {
            rc = swift_error_at(name, c.row_line, "row without an answer");
            break;
        }
        if (ans < 0) {
            rc = swift_error_at(
                name, c.row_line, "answer '%.20s' out of range (0-3 or A-D)", c.fields[5]);
            break;
        }
        struct swift_eval_item *it = set_push(set, name, c.row_line);
        if (!it) {
            rc = -1;
            break;
        }
        it->question = c.fields[0];
        it->choices = swift_xmalloc(4 * sizeof(char *));
        it->subject = swift_xstrdup(subject ? subject : "");
        for (int i = 0; i < 4; i++)
            it->choices[i] = c.fields[1 + i];
        it->nchoices = 4;
        it->answer = ans;
        free(c.fields[5]);
        c.n = 0; /* fields now owned by the item */
    }
    csv_free(&c);
    if (rc < 0) {
        while (set->n > start)
            set_pop(set);
        return -1;
    }
    if (ferror(fp))
        return swift_error_at(name, c.line, "read error");
    return 0;
}

/* "abstract_algebra_test.csv" -> "abstract_algebra" (malloc'ed). */
static char *subject_of(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t l = strlen(b);
    static const char *const suf[] = {"_test.csv", "_dev.csv", "_val.csv", ".csv"};
    for (int i = 0; i < 4; i++) {
        size_t sl = strlen(suf[i]);
        if (l > sl && !strcmp(b + l - sl, suf[i])) {
            l -= sl;
            break;
        }
    }
    return swift_xstrndup(b, l);
}

int swift_eval_read_mmlu_csv(const char *path, struct swift_eval_set *set)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return swift_error_errno("cannot open '%s'", path);
    char *subj = subject_of(path);
    int rc = swift_eval_read_mmlu_stream(fp, path, subj, set);
    free(subj);
    fclose(fp);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every *.csv in dir, sorted by name. */
static int read_mmlu_dir(const char *dir, struct swift_eval_set *set)
{
    DIR *d = opendir(dir);
    if (!d)
        return swift_error_errno("cannot open '%s'", dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".csv") || e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            names = swift_xrealloc(names, cap * sizeof(*names));
        }
        names[n++] = swift_xstrdup(e->d_name);
    }
    closedir(d);
    if (rc == 0 && n == 0)
        rc = swift_error("'%s': no .csv files", dir);
    if (names)
        qsort(names, n, sizeof(*names), cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0) {
            char *p = swift_path_join(dir, names[i]);
            rc = swift_eval_read_mmlu_csv(p, set);
            free(p);
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

char *swift_eval_mmlu_dev_path(const char *test_csv)
{
    char *subj = subject_of(test_csv);
    /* dir of the test file, then its parent */
    const char *slash = strrchr(test_csv, '/');
    char *dir = slash ? swift_xstrndup(test_csv, (size_t)(slash - test_csv)) : swift_xstrdup(".");
    char *out = NULL;
    const char *s2 = strrchr(dir, '/');
    char *parent = s2 ? swift_xstrndup(dir, (size_t)(s2 - dir)) : swift_xstrdup(".");
    size_t cap = strlen(dir) + strlen(subj) + 32;
    char *cand = swift_xmalloc(cap);
    snprintf(cand, cap, "%s/dev/%s_dev.csv", parent, subj);
    struct stat st;
    if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && strcmp(cand, test_csv)) {
        out = cand;
        cand = NULL;
    } else {
        snprintf(cand, cap, "%s/%s_dev.csv", dir, subj);
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && strcmp(cand, test_csv)) {
            out = cand;
            cand = NULL;
        }
    }
    free(cand);
    free(parent);
    free(dir);
    free(subj);
    return out;
}

/* ---- JSONL ---- */

static char *json_text(json_t *v)
{
    if (json_is_string(v))
        return swift_xstrdup(json_string_value(v));
    if (json_is_integer(v)) {
        char b[32];
        snprintf(b, sizeof(b), "%lld", (long long)json_integer_value(v));
        return swift_xstrdup(b);
    }
    if (json_is_real(v)) {
        char b[64];
        snprintf(b, sizeof(b), "%.17g", json_real_value(v));
        return swift_xstrdup(b);
    }
    return NULL;
}

static const char *const question_keys[] = {"question", "prompt", "query", "problem", NULL};
static const char *const answer_keys[] = {"answer", "response", "output", "solution", NULL};
static const char *const subject_keys[] = {"subject", "task", "category", NULL};

static json_t *first_of(json_t *v, const char *const *keys)
{
    for (int i = 0; keys[i]; i++) {
        json_t *x = json_object_get(v, keys[i]);
        if (x)
            return x;
    }
    return NULL;
}

/* ms-swift's messages format: the last user turn asks, the assistant turn after it is the
 * reference. */
static void messages_qa(json_t *msgs, json_t **q, json_t **a)
{
    size_t nm = json_array_size(msgs);
    for (size_t k = 0; k < nm; k++) {
        json_t *m = json_array_get(msgs, k);
        const char *role = json_string_value(json_object_get(m, "role"));
        json_t *content = json_object_get(m, "content");
        if (role && !strcmp(role, "user")) {
            *q = content;
            *a = NULL;
        } else if (role && !strcmp(role, "assistant") && *q && !*a) {
            *a = content;
        }
    }
}

/* mc, mmlu: it->choices from the row's "choices", it->answer from a (an index, a letter or the
 * choice's text). Returns 0 or -1 (reported; the caller drops the item). */
static int item_choices(struct swift_eval_item *it, json_t *v, json_t *a, const char *name,
                        long line)
{
    json_t *ch = json_object_get(v, "choices");
    size_t nc = json_array_size(ch);
    if (!json_is_array(ch) || nc < 2 || nc > SWIFT_EVAL_MAX_CHOICES)
        return swift_error_at(
            name, line, "'choices' must be an array of 2 to %d strings", SWIFT_EVAL_MAX_CHOICES);
    it->choices = swift_xcalloc(nc, sizeof(char *));
    for (size_t i = 0; i < nc; i++) {
        json_t *c = json_array_get(ch, i);
        if (!json_is_string(c))
            return swift_error_at(name, line, "choice %zu is not a string", i);
        it->choices[i] = swift_xstrdup(json_string_value(c));
        it->nchoices = (int)i + 1;
    }
    int ans = -1;
    if (json_is_integer(a)) {
        json_int_t k = json_integer_value(a);
        ans = k >= 0 && k < (json_int_t)nc ? (int)k : -1;
    } else if (json_is_string(a)) {
        ans = parse_answer_str(json_string_value(a), (int)nc);
        if (ans < 0)
            for (size_t i = 0; i < nc; i++)
                if (!strcmp(it->choices[i], json_string_value(a))) {
                    ans = (int)i;
                    break;
                }
    }
    if (ans < 0) {
        char *t = json_dumps(a, JSON_ENCODE_ANY | JSON_COMPACT);
        swift_error_at(name, line, "answer %.40s out of range (%zu choices)", t ? t : "?", nc);
        free(t);
        return -1;
    }
    it->answer = ans;
    return 0;
}

/* gsm8k, exact: it->target from a (gsm8k: the number in it, the text kept as reference).
 * Returns 0 or -1 (reported; the caller drops the item). */
static int item_target(struct swift_eval_item *it, int task, json_t *a, const char *name, long line)
{
    char *ref = json_text(a);
    if (!ref)
        return swift_error_at(name, line, "'answer' must be a string or a number");
    if (task == SWIFT_EVAL_GSM8K) {
        char num[128];
        if (!swift_eval_extract_number(ref, num, sizeof(num))) {
            free(ref);
            return swift_error_at(name, line, "answer has no number");
        }
        it->target = swift_xstrdup(num);
        it->reference = ref;
    } else {
        it->target = ref;
    }
    return 0;
}

/* A row's "images" into it->images (paths relative to the file, as ms-swift reads them). */
static int item_images(struct swift_eval_item *it, json_t *v, const char *name, long line)
{
    json_t *list = json_object_get(v, "images");
    if (!list || json_is_null(list))
        return 0;
    if (!json_is_array(list))
        return swift_error_at(name, line, "\"images\" must be a list of paths");
    size_t n = json_array_size(list);
    if (n > 64)
        return swift_error_at(name, line, "%zu images in one row (at most 64)", n);
    const char *slash = strrchr(name, '/');
    it->images = swift_xcalloc(n ? n : 1, sizeof(char *));
    for (size_t k = 0; k < n; k++) {
        json_t *p = json_array_get(list, k);
        if (json_is_object(p))
            p = json_object_get(p, "path");
        if (!json_is_string(p) || !json_string_length(p))
            return swift_error_at(name, line, "images[%zu] is not a path", k);
        const char *s = json_string_value(p);
        it->images[it->nimages++] =
            s[0] == '/' || !slash || strstr(s, "://") || !strncmp(s, "data:", 5)
                ? swift_xstrdup(s)
                : swift_asprintf("%.*s/%s", (int)(slash - name), name, s);
    }
    return 0;
}

static int jsonl_item(int task, json_t *v, const char *name, long line, struct swift_eval_set *set)
{
    if (!json_is_object(v))
        return swift_error_at(name, line, "expected an object");
    json_t *q = first_of(v, question_keys), *a = first_of(v, answer_keys);
    json_t *msgs = json_object_get(v, "messages");
    if (!q && json_is_array(msgs))
        messages_qa(msgs, &q, &a);
    if (!json_is_string(q))
        return swift_error_at(name, line, "missing string 'question'");
    if (!a || json_is_null(a))
        return swift_error_at(name, line, "row without an answer");
    json_t *subj = first_of(v, subject_keys);
    if (subj && !json_is_string(subj))
        return swift_error_at(name, line, "'subject' must be a string");

    struct swift_eval_item *it = set_push(set, name, line);
    if (!it)
        return -1;
    it->question = swift_xstrdup(json_string_value(q));
    it->subject = swift_xstrdup(subj ? json_string_value(subj) : "");
    int rc = task == SWIFT_EVAL_MC || task == SWIFT_EVAL_MMLU
                 ? item_choices(it, v, a, name, line)
                 : item_target(it, task, a, name, line);
    if (rc == 0 && (task == SWIFT_EVAL_GSM8K || task == SWIFT_EVAL_EXACT))
        rc = item_images(it, v, name, line);
    if (rc < 0)
        set_pop(set);
    return rc;
}

int swift_eval_read_jsonl_stream(int task, FILE *fp, const char *name, struct swift_eval_set *set)
{
    struct swift_jsonl r;
    swift_jsonl_init_fp(&r, fp, name, 0);
    r.max_line = (size_t)16 << 20;
    json_t *v;
    int rc;
    size_t start = set->n;
    while ((rc = swift_jsonl_next(&r, &v)) > 0) {
        rc = jsonl_item(task, v, name, r.line, set);
        json_decref(v);
        if (rc < 0)
            break;
    }
    swift_jsonl_close(&r);
    if (rc < 0) {
        while (set->n > start)
            set_pop(set);
        return -1;
    }
    return 0;
}

int swift_eval_read(int task, const char *path, struct swift_eval_set *set)
{
    if (task == SWIFT_EVAL_MMLU) {
        if (swift_is_dir(path)) {
            char *t = swift_path_join(path, "test");
            int rc = t && swift_is_dir(t) ? read_mmlu_dir(t, set) : read_mmlu_dir(path, set);
            free(t);
            return rc;
        }
        size_t l = strlen(path);
        if (l < 6 || strcmp(path + l - 6, ".jsonl"))
            return swift_eval_read_mmlu_csv(path, set);
        task = SWIFT_EVAL_MC; /* MMLU exported as mc JSONL */
    }
    if (task == SWIFT_EVAL_TOOLCALL)
        return swift_eval_toolcall_read(path, set);
    if (task != SWIFT_EVAL_MC && task != SWIFT_EVAL_GSM8K && task != SWIFT_EVAL_EXACT)
        return swift_error("task '%s' has no item reader", swift_eval_task_name(task));
    FILE *fp = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!fp)
        return swift_error_errno("cannot open '%s'", path);
    int rc = swift_eval_read_jsonl_stream(task, fp, strcmp(path, "-") ? path : "<stdin>", set);
    if (fp != stdin)
        fclose(fp);
    return rc;
}
