/* GRPO's advantages and loss as TRL 1.16.0 computes them (the formulas are in grpo_loss.h). */
#include "lib/train/grpo_loss.h"

#include <math.h>
#include <string.h>

#include "lib/core/banned.h"

static const char *const loss_names[] = {"grpo", "bnpo", "dr_grpo", "dapo"};
static const char *const scale_names[] = {"group", "batch", "none"};

int swift_grpo_loss_parse(const char *s)
{
    for (int i = 0; i <= SWIFT_GRPO_LOSS_DAPO; i++)
        if (!strcmp(s, loss_names[i]))
            return i;
    return -1;
}

int swift_grpo_scale_parse(const char *s)
{
    for (int i = 0; i <= SWIFT_GRPO_SCALE_NONE; i++)
        if (!strcmp(s, scale_names[i]))
            return i;
    if (!strcmp(s, "true"))
        return SWIFT_GRPO_SCALE_GROUP;
    if (!strcmp(s, "false"))
        return SWIFT_GRPO_SCALE_NONE;
    return -1;
}

const char *swift_grpo_loss_name(int loss_type)
{
    return loss_type >= 0 && loss_type <= SWIFT_GRPO_LOSS_DAPO ? loss_names[loss_type] : "?";
}

const char *swift_grpo_scale_name(int scale)
{
    return scale >= 0 && scale <= SWIFT_GRPO_SCALE_NONE ? scale_names[scale] : "?";
}

/* mean and unbiased standard deviation of x[0..n) (std 0 when n < 2, as TRL's guards) */
static void mean_std(const double *x, int n, double *mean, double *std)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    *mean = n > 0 ? s / n : 0;
    double v = 0;
    for (int i = 0; i < n; i++)
        v += (x[i] - *mean) * (x[i] - *mean);
    *std = n > 1 ? sqrt(v / (n - 1)) : 0;
}

void swift_grpo_advantages(const double *rewards, int n, int G, int scale, double *adv,
                           double *std_out)
{
    double bmean, bstd;
    mean_std(rewards, n, &bmean, &bstd);
    for (int g0 = 0; g0 + G <= n; g0 += G) {
        double gmean, gstd;
        mean_std(rewards + g0, G, &gmean, &gstd);
        double sd = scale == SWIFT_GRPO_SCALE_BATCH ? bstd : gstd;
        for (int i = g0; i < g0 + G; i++) {
            adv[i] = rewards[i] - gmean;
            if (scale != SWIFT_GRPO_SCALE_NONE)
                adv[i] /= sd + 1e-4;
            if (std_out)
                std_out[i] = sd;
        }
    }
}

/* One token: its loss l and d l / d logp (before the aggregation's factor); the clip flags. */
static double token_loss(const struct swift_grpo_params *p, double lp, double old,
                         const double *ref, double A, double *dl, int *low, int *high, double *kl)
{
    double c = exp(lp - old);
    double lo = 1.0 - p->epsilon_low, hi = 1.0 + p->epsilon_high;
    double cc = c < lo ? lo : c > hi ? hi : c;
    double v1 = c * A, v2 = cc * A;
    /* -min(v1, v2): torch.minimum's gradient goes to the smaller, half to each at a tie; the
     * clamp passes it where lo <= c <= hi (torch.clamp's inclusive bounds) */
    double in = c >= lo && c <= hi ? 1.0 : 0.0;
    double g1 = -A * c, g2 = -A * c * in;
    double l = -(v1 < v2 ? v1 : v2);
    *dl = v1 < v2 ? g1 : v2 < v1 ? g2 : 0.5 * (g1 + g2);
    *low = c < lo && A < 0;
    *high = c > hi && A > 0;
    *kl = 0;
    if (p->beta != 0.0 && ref) {
        double d = *ref - lp, k = exp(d) - d - 1.0, dk = 1.0 - exp(d);
        if (!p->kl_uncorrected) { /* c kl: d/dlogp = c kl + c dk (c = exp(logp - old)) */
            dk = c * (k + dk);
            k *= c;
        }
        *kl = k;
        l += p->beta * k;
        *dl += p->beta * dk;
    }
    return l;
}

double swift_grpo_loss(const struct swift_grpo_params *p, int R, const int *off, const int *len,
                       const double *logp, const double *old, const double *ref, const double *adv,
                       float *dlogp, struct swift_grpo_stats *st)
{
    long L = 0;
    for (int r = 0; r < R; r++)
        L += len[r] > 0 ? len[r] : 0;
    double contrib = 0;
    for (int r = 0; r < R; r++) {
        int n = len[r] > 0 ? len[r] : 0;
        double f; /* d contrib / d l_rt */
        switch (p->loss_type) {
        case SWIFT_GRPO_LOSS_GRPO:
            f = 1.0 / (n > 1 ? n : 1);
            break;
        case SWIFT_GRPO_LOSS_BNPO:
            f = (double)R / (double)(L > 1 ? L : 1);
            break;
        case SWIFT_GRPO_LOSS_DR_GRPO:
            f = 1.0 / (p->max_completion_length > 0 ? p->max_completion_length : 1);
            break;
        default:
            f = 1.0;
        }
        double sum = 0;
        long nlow = 0, nhigh = 0;
        for (int t = 0; t < n; t++) {
            int i = off[r] + t, low, high;
            double dl, kl;
            double l = token_loss(p,
                                  logp[i],
                                  old ? old[i] : logp[i],
                                  ref ? ref + i : NULL,
                                  adv[r],
                                  &dl,
                                  &low,
                                  &high,
                                  &kl);
            sum += l;
            dlogp[i] = (float)(f * dl);
            nlow += low;
            nhigh += high;
            st->kl_sum += kl;
            st->clip_region += low || high;
        }
        contrib += f * sum;
        st->clip_low += (double)nlow;
        st->clip_high += (double)nhigh;
        st->tokens += n;
        if (n > 0) {
            double fl = (double)nlow / n, fh = (double)nhigh / n;
            if (st->seqs == 0 || fl < st->seq_low_min)
                st->seq_low_min = fl;
            if (st->seqs == 0 || fh > st->seq_high_max)
                st->seq_high_max = fh;
            st->seqs += 1;
        }
    }
    st->contrib += contrib;
    st->items += p->loss_type == SWIFT_GRPO_LOSS_DAPO ? (double)L : (double)R;
    return contrib;
}
