/* pref_loss — per-pair preference losses and their derivatives (see pref_loss.h). */
#include "lib/train/pref_loss.h"

#include <math.h>
#include <string.h>

#include "lib/core/banned.h"

double swift_log_sigmoid(double x)
{
    return x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x));
}

static double sigmoid(double x)
{
    return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
}

/* log(1 - e^x) for x < 0, as trl's log1mexp (branch at -ln 2) */
static double log1mexp(double x)
{
    return x < -0.6931471805599453 ? log1p(-exp(x)) : log(-expm1(x));
}

static const char *const loss_names[] = {
    "sigmoid", "hinge", "ipo", "robust", "simpo", "kto", "apo_zero_unpaired"};

const char *swift_pref_loss_name(int loss)
{
    return loss >= 0 && loss <= SWIFT_PREF_APO_ZERO_UNPAIRED ? loss_names[loss] : "?";
}

int swift_pref_loss_parse(const char *name)
{
    for (int i = 0; i <= SWIFT_PREF_APO_ZERO_UNPAIRED; i++)
        if (!strcmp(name, loss_names[i]))
            return i;
    return -1;
}

int swift_pref_loss_ok(int obj, int loss)
{
    switch (obj) {
    case SWIFT_PREF_DPO:
        return loss == SWIFT_PREF_SIGMOID || loss == SWIFT_PREF_HINGE || loss == SWIFT_PREF_IPO ||
               loss == SWIFT_PREF_ROBUST;
    case SWIFT_PREF_CPO:
        return loss == SWIFT_PREF_SIGMOID || loss == SWIFT_PREF_HINGE || loss == SWIFT_PREF_IPO ||
               loss == SWIFT_PREF_SIMPO;
    case SWIFT_PREF_ORPO:
        return loss == SWIFT_PREF_SIGMOID;
    }
    return 0;
}

/* The loss of the margin z (sigmoid, hinge, robust) and d loss / d z. */
static double margin_loss(int loss, double ls, double z, double *dz)
{
    switch (loss) {
    case SWIFT_PREF_HINGE:
        *dz = z < 1 ? -1.0 : 0.0;
        return z < 1 ? 1 - z : 0.0;
    case SWIFT_PREF_ROBUST:
        *dz = (-(1 - ls) * sigmoid(-z) - ls * sigmoid(z)) / (1 - 2 * ls);
        return (-(1 - ls) * swift_log_sigmoid(z) + ls * swift_log_sigmoid(-z)) / (1 - 2 * ls);
    default: /* sigmoid, simpo */
        *dz = -(1 - ls) * sigmoid(-z) + ls * sigmoid(z);
        return -(1 - ls) * swift_log_sigmoid(z) - ls * swift_log_sigmoid(-z);
    }
}

static void dpo(const struct swift_pref_params *p, const struct swift_pref_in *in,
                struct swift_pref_out *o)
{
    double b = p->beta, lc = in->pc - in->rc, lr = in->pr - in->rr;
    o->reward_c = b * lc;
    o->reward_r = b * lr;
    o->logp_c = in->pc;
    o->logp_r = in->pr;
    if (p->loss == SWIFT_PREF_IPO) {
        double nc = in->nc > 1 ? (double)in->nc : 1.0, nr = in->nr > 1 ? (double)in->nr : 1.0;
        double d = lc / nc - lr / nr - 1 / (2 * b);
        o->loss = d * d;
        o->dpc = 2 * d / nc;
        o->dpr = -2 * d / nr;
        return;
    }
    double dz;
    o->loss = margin_loss(p->loss, p->label_smoothing, b * (lc - lr), &dz);
    o->dpc = b * dz;
    o->dpr = -b * dz;
}

static void cpo(const struct swift_pref_params *p, const struct swift_pref_in *in,
                struct swift_pref_out *o)
{
    double b = p->beta;
    int avg = p->loss == SWIFT_PREF_IPO || p->loss == SWIFT_PREF_SIMPO;
    double nc = avg && in->nc > 1 ? (double)in->nc : 1.0;
    double nr = avg && in->nr > 1 ? (double)in->nr : 1.0;
    double c = in->pc / nc, r = in->pr / nr, a = c - r, da;
    o->reward_c = b * c;
    o->reward_r = b * r;
    o->logp_c = c;
    o->logp_r = r;
    if (p->loss == SWIFT_PREF_IPO) {
        double d = a - 1 / (2 * b);
        o->loss = d * d;
        da = 2 * d;
    } else {
        if (p->loss == SWIFT_PREF_SIMPO)
            a -= p->simpo_gamma / b;
        double dz;
        o->loss = margin_loss(p->loss, p->label_smoothing, b * a, &dz);
        da = b * dz;
    }
    o->dpc = da / nc;
    o->dpr = -da / nr;
}

static void orpo(const struct swift_pref_params *p, const struct swift_pref_in *in,
                 struct swift_pref_out *o)
{
    double b = p->beta;
    double nc = in->nc > 1 ? (double)in->nc : 1.0, nr = in->nr > 1 ? (double)in->nr : 1.0;
    double c = in->pc / nc, r = in->pr / nr;
    double lo = (c - r) - (log1mexp(c) - log1mexp(r));
    double ratio = swift_log_sigmoid(lo);
    o->loss = -b * ratio;
    o->reward_c = b * c;
    o->reward_r = b * r;
    o->logp_c = c;
    o->logp_r = r;
    o->log_odds = lo;
    o->odds_ratio = ratio;
    /* d lo / d c = 1 / (1 - e^c), d lo / d r = -1 / (1 - e^r); d loss / d lo = -b s(-lo) */
    double dlo = -b * sigmoid(-lo);
    o->dpc = dlo / -expm1(c) / nc;
    o->dpr = -dlo / -expm1(r) / nr;
}

void swift_pref_pair(const struct swift_pref_params *p, const struct swift_pref_in *in,
                     struct swift_pref_out *out)
{
    memset(out, 0, sizeof(*out));
    if (p->obj == SWIFT_PREF_ORPO)
        orpo(p, in, out);
    else if (p->obj == SWIFT_PREF_CPO)
        cpo(p, in, out);
    else
        dpo(p, in, out);
}
