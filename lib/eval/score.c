/* Prompts, continuations, answer extraction and tallies for swift-eval. */
#include "lib/eval/eval.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/core/strbuf.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define MAX_PROMPT ((size_t)1 << 20)

/* a prompt: a growing string with MAX_PROMPT as its ceiling */
struct sbuf {
    struct swift_strbuf b;
    int bad; /* an add went past MAX_PROMPT: sb_finish reports it */
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
    if (b->bad)
        return;
    if (b->b.len + n + 1 > MAX_PROMPT) {
        b->bad = 1;
        return;
    }
    swift_strbuf_add(&b->b, s, n);
}

static void sb_str(struct sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

static char *sb_finish(struct sbuf *b)
{
    if (b->bad) {
        swift_strbuf_release(&b->b);
        swift_error("prompt longer than %zu bytes", MAX_PROMPT);
        return NULL;
    }
    return swift_strbuf_detach(&b->b);
}

static void mmlu_question(struct sbuf *b, const struct swift_eval_item *it)
{
    sb_str(b, it->question);
    for (int i = 0; i < it->nchoices; i++) {
        char lab[8] = {'\n', (char)('A' + i), '.', ' ', 0};
        sb_str(b, lab);
        sb_str(b, it->choices[i]);
    }
    sb_str(b, "\nAnswer:");
}

char *swift_eval_prompt(int task, const struct swift_eval_item *item,
                        const struct swift_eval_item *const *shots, int nshots)
{
    struct sbuf b = {0};
    if (task == SWIFT_EVAL_MMLU) {
        if (item->subject && item->subject[0]) {
            sb_str(&b, "The following are multiple choice questions (with answers) about ");
            for (const char *p = item->subject; *p; p++)
                sb_add(&b, *p == '_' ? " " : p, 1);
            sb_str(&b, ".\n\n");
        }
        for (int s = 0; s < nshots; s++) {
            mmlu_question(&b, shots[s]);
            char ans[8] = {' ', (char)('A' + shots[s]->answer), '\n', '\n', 0};
            sb_str(&b, ans);
        }
        mmlu_question(&b, item);
        return sb_finish(&b);
    }
    for (int s = 0; s < nshots; s++) {
        const struct swift_eval_item *sh = shots[s];
        sb_str(&b, "Question: ");
        sb_str(&b, sh->question);
        sb_str(&b, "\nAnswer: ");
        if (task == SWIFT_EVAL_MC && sh->answer >= 0 && sh->answer < sh->nchoices)
            sb_str(&b, sh->choices[sh->answer]);
        else if (sh->reference)
            sb_str(&b, sh->reference);
        else if (sh->target)
            sb_str(&b, sh->target);
        sb_str(&b, "\n\n");
    }
    sb_str(&b, "Question: ");
    sb_str(&b, item->question);
    sb_str(&b, "\nAnswer:");
    return sb_finish(&b);
}

char *swift_eval_continuation(int task, const struct swift_eval_item *item, int i)
{
    if (i < 0 || i >= item->nchoices)
        return NULL;
    struct sbuf b = {0};
    if (task == SWIFT_EVAL_MMLU) {
        char lab[3] = {' ', (char)('A' + i), 0};
        sb_str(&b, lab);
    } else {
        sb_str(&b, " ");
        sb_str(&b, item->choices[i]);
    }
    return sb_finish(&b);
}

int swift_eval_mc_pick(const double *loglik, int n)
{
    if (n <= 0)
        return -1;
    int best = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(loglik[i]))
            return -1;
        if (loglik[i] > loglik[best])
            best = i;
    }
    return best;
}

/* Scan one number starting at s (a digit, or '-'/'$'/'+' before one); returns its end and
 * writes the normalised form. */
static const char *scan_number(const char *s, char *out, size_t cap)
{
    char tmp[128];
    size_t n = 0;
    int neg = 0;
    while (*s == '-' || *s == '+' || *s == '$') {
        if (*s == '-')
            neg = !neg;
        s++;
    }
    /* integer part with thousands commas */
    while (isdigit((unsigned char)*s) || (*s == ',' && isdigit((unsigned char)s[1]))) {
        if (*s != ',' && n + 1 < sizeof(tmp))
            tmp[n++] = *s;
        s++;
    }
    size_t intlen = n;
    if (*s == '.' && isdigit((unsigned char)s[1])) {
        if (n + 1 < sizeof(tmp))
            tmp[n++] = '.';
        s++;
        while (isdigit((unsigned char)*s)) {
            if (n + 1 < sizeof(tmp))
                tmp[n++] = *s;
            s++;
        }
        while (n > intlen && tmp[n - 1] == '0')
            n--;
        if (tmp[n - 1] == '.')
            n--;
    }
    tmp[n] = 0;
    /* leading zeros of the integer part */
    size_t z = 0;
    while (z + 1 < intlen && tmp[z] == '0')
        z++;
    const char *digits = tmp + z;
    if (!strcmp(digits, "0"))
        neg = 0;
    snprintf(out, cap, "%s%s", neg ? "-" : "", digits);
    return s;
}

static int number_start(const char *p, const char *begin)
{
    if (isdigit((unsigned char)*p))
        return !(p > begin && (isdigit((unsigned char)p[-1]) || p[-1] == '.' || p[-1] == ','));
    if ((*p == '-' || *p == '$' || *p == '+')) {
        const char *q = p;
        while (*q == '-' || *q == '$' || *q == '+')
            q++;
        return isdigit((unsigned char)*q) &&
               !(p > begin &&
                 (isdigit((unsigned char)p[-1]) || p[-1] == '-' || p[-1] == '$' || p[-1] == '+'));
    }
    return 0;
}

int swift_eval_extract_number(const char *text, char *out, size_t cap)
{
    if (cap)
        out[0] = 0;
    const char *hash = NULL;
    for (const char *p = strstr(text, "####"); p; p = strstr(p + 4, "####"))
        hash = p;
    const char *p = hash ? hash + 4 : text;
    int found = 0;
    char cur[128];
    while (*p) {
        if (number_start(p, text)) {
            p = scan_number(p, cur, sizeof(cur));
            snprintf(out, cap, "%s", cur);
            found = 1;
            if (hash)
                break;
            continue;
        }
        p++;
    }
    return found;
}

/* Trim and collapse whitespace into a malloc'ed copy. */
static char *norm_ws(const char *s)
{
    size_t n = strlen(s);
    char *o = swift_xmalloc(n + 1), *q = o;
    int space = 0;
    for (; *s; s++) {
        if (isspace((unsigned char)*s)) {
            space = q != o;
            continue;
        }
        if (space)
            *q++ = ' ';
        space = 0;
        *q++ = *s;
    }
    *q = 0;
    return o;
}

int swift_eval_exact_match(const char *prediction, const char *reference)
{
    char *a = norm_ws(prediction), *b = norm_ws(reference);
    int eq = !strcmp(a, b);
    free(a);
    free(b);
    return eq;
}

void swift_eval_tally_init(struct swift_eval_tally *t)
{
    memset(t, 0, sizeof(*t));
}

void swift_eval_tally_release(struct swift_eval_tally *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->rows[i].subject);
    free(t->rows);
    memset(t, 0, sizeof(*t));
}

int swift_eval_tally_add(struct swift_eval_tally *t, const char *subject, int correct)
{
    if (!subject)
        subject = "";
    size_t i;
    /* the same subject usually repeats: check the last row first */
    if (t->n && !strcmp(t->rows[t->n - 1].subject, subject)) {
        i = t->n - 1;
    } else {
        for (i = 0; i < t->n; i++)
            if (!strcmp(t->rows[i].subject, subject))
                break;
        if (i == t->n) {
            if (t->n == t->cap) {
                size_t cap = t->cap ? t->cap * 2 : 16;
                t->rows = swift_xrealloc(t->rows, cap * sizeof(*t->rows));
                t->cap = cap;
            }
            t->rows[i].subject = swift_xstrdup(subject);
            t->rows[i].n = t->rows[i].correct = 0;
            t->n++;
        }
    }
    t->rows[i].n++;
    t->rows[i].correct += correct != 0;
    t->total++;
    t->correct += correct != 0;
    return 0;
}

double swift_eval_tally_micro(const struct swift_eval_tally *t)
{
    return t->total ? (double)t->correct / (double)t->total : 0.0;
}

double swift_eval_tally_macro(const struct swift_eval_tally *t)
{
    if (!t->n)
        return 0.0;
    double s = 0;
    for (size_t i = 0; i < t->n; i++)
        s += (double)t->rows[i].correct / (double)t->rows[i].n;
    return s / (double)t->n;
}
