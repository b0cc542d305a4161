#include "lib/core/profile.h"
#include "lib/core/cli.h"

#include <stdio.h>
#include <string.h>

#include "lib/core/banned.h"

int swift_profile_parse(const char *spec, struct swift_profile *p, char *err, int errlen)
{
    memset(p, 0, sizeof(*p));
    p->wait = 1;
    p->warmup = 1;
    p->active = 3;
    char buf[512];
    if (!spec || strlen(spec) >= sizeof(buf)) {
        snprintf(err, (size_t)errlen, "profile spec too long");
        return -1;
    }
    snprintf(buf, sizeof(buf), "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            snprintf(err, (size_t)errlen, "expected KEY=VALUE, got '%s'", tok);
            return -1;
        }
        *eq = 0;
        long v;
        if (swift_parse_long(eq + 1, 0, 1000000000L, &v) < 0) {
            snprintf(
                err, (size_t)errlen, "'%s' needs a non-negative integer, got '%s'", tok, eq + 1);
            return -1;
        }
        if (!strcmp(tok, "wait"))
            p->wait = v;
        else if (!strcmp(tok, "warmup"))
            p->warmup = v;
        else if (!strcmp(tok, "active"))
            p->active = v;
        else if (!strcmp(tok, "repeat"))
            p->repeat = v;
        else if (!strcmp(tok, "skip_first"))
            p->skip_first = v;
        else if (!strcmp(tok, "shapes"))
            p->shapes = v != 0;
        else if (!strcmp(tok, "memory"))
            p->memory = v != 0;
        else if (!strcmp(tok, "stack"))
            p->stack = v != 0;
        else if (!strcmp(tok, "flops"))
            p->flops = v != 0;
        else {
            snprintf(err, (size_t)errlen, "unknown profile key '%s'", tok);
            return -1;
        }
    }
    if (p->active < 1) {
        snprintf(err, (size_t)errlen, "active must be at least 1");
        return -1;
    }
    p->enabled = 1;
    return 0;
}

enum swift_profile_action swift_profile_action(const struct swift_profile *p, long step)
{
    if (!p || !p->enabled || step < p->skip_first)
        return SWIFT_PROF_NONE;
    step -= p->skip_first;
    long cycle = p->wait + p->warmup + p->active;
    if (p->repeat > 0 && step / cycle >= p->repeat)
        return SWIFT_PROF_NONE;
    long m = step % cycle;
    if (m < p->wait)
        return SWIFT_PROF_NONE;
    if (m < p->wait + p->warmup)
        return SWIFT_PROF_WARMUP;
    return m < cycle - 1 ? SWIFT_PROF_RECORD : SWIFT_PROF_RECORD_AND_SAVE;
}

const char *swift_profile_action_name(enum swift_profile_action a)
{
    static const char *names[] = {"NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE"};
    return (unsigned)a < 4 ? names[a] : "?";
}
