/* Fuzz the agent-template parser (lib/preprocess/agent.h): the first byte picks the agent
 * template, the rest is a completion. Every call found must be well-formed (an id, a name, the
 * arguments as a string), the malformed-call message NUL-terminated, and a call list written back
 * by swift_agent_format_calls must parse to the same calls when its names and arguments cannot be
 * mistaken for the format's own markers. The bytes are also tried as a tools array. */
#include "lib/core/error.h"
#include "lib/preprocess/agent.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int plain_name(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '.' || *s == '-'))
            return 0;
    return 1;
}

static const char *const markers[] = {"<tool_call>",
                                      "</tool_call>",
                                      "Action:",
                                      "Action Input:",
                                      "Observation:",
                                      "<|assistant|>",
                                      "<|observation|>",
                                      "\n",
                                      NULL};

/* The calls, written back and parsed again, give the same names and arguments. */
static void round_trip(int agent, json_t *calls)
{
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c)
    {
        json_t *f = json_object_get(c, "function");
        const char *a = json_string_value(json_object_get(f, "arguments"));
        json_t *args = json_loads(a, 0, NULL);
        int ok = json_is_object(args) && plain_name(json_string_value(json_object_get(f, "name")));
        char *dumped = ok ? json_dumps(args, JSON_PRESERVE_ORDER) : NULL;
        for (int k = 0; ok && markers[k]; k++)
            ok = !strstr(dumped, markers[k]) && !strstr(a, markers[k]);
        free(dumped);
        json_decref(args);
        if (!ok)
            return;
    }
    char err[128], why[256];
    char *txt = swift_agent_format_calls(agent, "", 0, calls, err, sizeof(err));
    if (!txt)
        abort();
    char *content;
    json_t *back;
    int n = swift_agent_parse(agent, txt, strlen(txt), 3, &content, &back, why, sizeof(why));
    if (n != (int)json_array_size(calls) || why[0])
        abort();
    json_array_foreach(calls, i, c)
    {
        json_t *f0 = json_object_get(c, "function");
        json_t *f1 = json_object_get(json_array_get(back, i), "function");
        json_t *a0 = json_loads(json_string_value(json_object_get(f0, "arguments")), 0, NULL);
        json_t *a1 = json_loads(json_string_value(json_object_get(f1, "arguments")), 0, NULL);
        if (!json_equal(json_object_get(f0, "name"), json_object_get(f1, "name")) ||
            !json_equal(a0, a1))
            abort();
        json_decref(a0);
        json_decref(a1);
    }
    free(content);
    json_decref(back);
    free(txt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull) {
        devnull = fopen("/dev/null", "w");
        swift_error_set_stream(devnull);
    }
    if (size < 1)
        return 0;
    int agent = data[0] % 6; /* 0: the default (hermes) */
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char *content, why[64];
    json_t *calls;
    int n = swift_agent_parse(agent, text, len, 1, &content, &calls, why, sizeof(why));
    if (n < 0 || (n > 0) != (calls != NULL) || (calls && (int)json_array_size(calls) != n) ||
        strlen(why) >= sizeof(why))
        abort();
    if (n == 0 && len && (!content || memcmp(content, text, len)))
        abort();
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c)
    {
        json_t *f = json_object_get(c, "function");
        const char *id = json_string_value(json_object_get(c, "id"));
        if (!id || strlen(id) != 29 || !json_is_string(json_object_get(f, "name")) ||
            !json_is_string(json_object_get(f, "arguments")))
            abort();
    }
    if (calls)
        round_trip(agent ? agent : SWIFT_AGENT_HERMES, calls);
    free(content);
    json_decref(calls);
    /* the same bytes as a tools array */
    json_t *tools = json_loadb(text, len, 0, NULL);
    if (json_is_array(tools)) {
        char err[128];
        free(swift_agent_format_tools(agent, tools, err, sizeof(err)));
        free(swift_agent_format_calls(agent, "x", 1, tools, err, sizeof(err)));
    }
    json_decref(tools);
    return 0;
}
