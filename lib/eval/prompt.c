/* Templates and raw datasets for swift-eval (see prompt.h). */
#include "lib/eval/prompt.h"
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/preprocess/dataset.h"
#include "lib/preprocess/template.h"
#include "lib/preprocess/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

struct swift_eval_prompter {
    const struct swift_tokenizer *tok;
    struct swift_tok_state *st;
    const struct swift_template *t;   /* NULL: plain */
    const struct swift_template *gen; /* plain text, for prompts and loss rows alike */
    struct swift_encoded enc;
    struct swift_tokens plain;
};

int swift_eval_template_known(const char *name)
{
    return !strcmp(name, "none") || swift_template_find(name) != NULL;
}

const char *swift_eval_template_names(void)
{
    return swift_template_names();
}

struct swift_eval_prompter *swift_eval_prompter_new(const struct swift_tokenizer *tok,
                                                    const char *name)
{
    struct swift_eval_prompter *p = swift_xcalloc(1, sizeof(*p));
    p->tok = tok;
    if (name && strcmp(name, "none") && !(p->t = swift_template_find(name))) {
        swift_error("unknown template '%s' (none, %s)", name, swift_template_names());
        free(p);
        return NULL;
    }
    p->gen = swift_template_find("generation");
    if (!(p->st = swift_tok_state_new(tok))) {
        free(p);
        return NULL;
    }
    return p;
}

void swift_eval_prompter_free(struct swift_eval_prompter *p)
{
    if (!p)
        return;
    swift_encoded_release(&p->enc);
    swift_tokens_release(&p->plain);
    swift_tok_state_free(p->st);
    free(p);
}

const char *swift_eval_prompter_name(const struct swift_eval_prompter *p)
{
    return p->t ? swift_template_name(p->t) : "none";
}

const char *swift_eval_template_guess(const struct swift_tokenizer *tok)
{
    return swift_template_guess(tok);
}

int swift_eval_prompter_encode_conv(struct swift_eval_prompter *p, const struct swift_conv *c,
                                    const uint32_t **ids, size_t *n, long *stop)
{
    *stop = -1;
    if (!p->t)
        return swift_error("this task needs a chat template (--template)");
    long st; /* the end-of-turn id, as an empty reply has it */
    if (swift_eval_prompter_encode(p, "x", ids, n, &st) < 0)
        return -1;
    char err[256];
    if (swift_template_encode_prompt(p->t, p->st, p->tok, c, &p->enc, err, sizeof(err)) < 0)
        return swift_error("template %s: %s", swift_template_name(p->t), err);
    *stop = st;
    *ids = p->enc.tok.ids;
    *n = p->enc.tok.n;
    return 0;
}

int swift_eval_prompter_plain(struct swift_eval_prompter *p, const char *text, const uint32_t **ids,
                              size_t *n)
{
    p->plain.n = 0;
    if (swift_tokenizer_encode(p->st, text, strlen(text), SWIFT_TOK_PARSE_SPECIAL, &p->plain) < 0)
        return -1;
    *ids = p->plain.ids;
    *n = p->plain.n;
    return 0;
}

/* A plain prompt: the text as the loss path renders a {"text": ...} row (the generation
 * template, so Llama-3's <|begin_of_text|> comes first, as swift-preprocess and HF's
 * tokenizer(text) put it), left open: no closing eos, generation continues it. */
static int encode_text(struct swift_eval_prompter *p, const char *text, const uint32_t **ids,
                       size_t *n)
{
    struct swift_conv c = {.is_text = 1, .text = text, .text_len = strlen(text), .open_end = 1};
    char err[256];
    if (swift_template_encode(
            p->gen, p->st, p->tok, &c, SWIFT_LOSS_DEFAULT, &p->enc, err, sizeof(err)) < 0)
        return swift_error("%s", err);
    *ids = p->enc.tok.ids;
    *n = p->enc.tok.n;
    return 0;
}

int swift_eval_prompter_encode(struct swift_eval_prompter *p, const char *text,
                               const uint32_t **ids, size_t *n, long *stop)
{
    *stop = -1;
    if (!p->t)
        return encode_text(p, text, ids, n);
    struct swift_message msg[2] = {
        {.role = SWIFT_ROLE_USER, .content = text, .len = strlen(text), .loss = -1},
        {.role = SWIFT_ROLE_ASSISTANT, .content = "", .len = 0, .loss = 1}};
    struct swift_conv c = {.msg = msg, .n = 2, .cap = 2};
    char err[256];
    if (swift_template_encode(
            p->t, p->st, p->tok, &c, SWIFT_LOSS_DEFAULT, &p->enc, err, sizeof(err)) < 0)
        return swift_error("template %s: %s", swift_template_name(p->t), err);
    size_t f = 0;
    while (f < p->enc.tok.n && !p->enc.mask[f])
        f++;
    if (f == p->enc.tok.n)
        return swift_error("template %s leaves no assistant turn to generate",
                           swift_template_name(p->t));
    *stop = (long)p->enc.tok.ids[f];
    *ids = p->enc.tok.ids;
    *n = f;
    return 0;
}

struct swift_eval_rows {
    struct swift_eval_prompter *p;
    struct swift_dataset *ds;
    const struct swift_template *conv_t, *text_t;
    struct swift_conv conv;
};

int swift_eval_rows_open(struct swift_eval_rows **out, struct swift_eval_prompter *p,
                         const char *path)
{
    struct swift_eval_rows *r = swift_xcalloc(1, sizeof(*r));
    r->p = p;
    if (swift_dataset_open(&r->ds, path, NULL) < 0) {
        free(r);
        return -1;
    }
    r->conv_t = p->t;
    if (!r->conv_t) {
        const char *g = swift_template_guess(p->tok);
        r->conv_t = g ? swift_template_find(g) : NULL;
    }
    r->text_t = p->gen; /* plain text is trained whole */
    *out = r;
    return 0;
}

int swift_eval_rows_next(struct swift_eval_rows *r, const uint32_t **ids, const uint8_t **mask,
                         size_t *n)
{
    struct swift_row row;
    int k = swift_dataset_next(r->ds, &row);
    if (k <= 0)
        return k;
    json_t *obj = NULL, *owned = NULL;
    const char *name = swift_dataset_name(r->ds);
    char err[512];
    int rc = 1;
    if (swift_row_parse(&row, &obj, err, sizeof(err)) < 0 ||
        swift_row_to_conv(obj, NULL, NULL, &r->conv, &owned, err, sizeof(err)) < 0) {
        rc = swift_error_at(name, row.line, "%s", err);
    } else {
        const struct swift_template *t = r->conv.is_text ? r->text_t : r->conv_t;
        if (!t)
            rc = swift_error_at(name,
                                row.line,
                                "a conversation needs --template (no chat template known for "
                                "this tokenizer)");
        else if (swift_template_encode(t,
                                       r->p->st,
                                       r->p->tok,
                                       &r->conv,
                                       SWIFT_LOSS_DEFAULT,
                                       &r->p->enc,
                                       err,
                                       sizeof(err)) < 0)
            rc = swift_error_at(name, row.line, "%s", err);
    }
    json_decref(obj);
    json_decref(owned);
    swift_row_release(&row);
    if (rc < 0)
        return -1;
    *ids = r->p->enc.tok.ids;
    *mask = r->p->enc.mask;
    *n = r->p->enc.tok.n;
    return 1;
}

void swift_eval_rows_close(struct swift_eval_rows *r)
{
    if (!r)
        return;
    free(r->conv.msg);
    swift_dataset_close(r->ds);
    free(r);
}
