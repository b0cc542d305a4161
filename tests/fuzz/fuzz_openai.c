/* Fuzz the OpenAI request parser (bodies and ms-swift rows): any bytes give a request or an error
 * object with a status, never a crash; a parsed request's responses and tool calls are built too,
 * and its data: image URLs decoded (lib/infer/image.h; never a file: paths are not opened), as are
 * the raw bytes as a data: URL.
 */
#include "lib/core/error.h"
#include "lib/infer/image.h"
#include "lib/infer/openai.h"
#include "lib/preprocess/agent.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* rq's data: URLs decoded: the bytes or an error, never a crash */
static void decode_images(const struct swift_oai_request *rq)
{
    for (int k = 0; k < rq->nimages; k++) {
        unsigned char *d = NULL;
        size_t n = 0;
        char err[256];
        if (!strncmp(rq->images[k], "data:", 5) &&
            swift_infer_data_url(rq->images[k], strlen(rq->images[k]), &d, &n, err, sizeof(err)) ==
                0)
            free(d);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull)
        devnull = fopen("/dev/null", "w");
    swift_error_set_stream(devnull);
    enum swift_oai_kind kind = size % 2 ? SWIFT_OAI_COMPLETION : SWIFT_OAI_CHAT;
    struct swift_oai_request rq;
    struct swift_oai_error er;
    if (swift_oai_parse_text((const char *)data, size, kind, size % 3 ? NULL : "m", &rq, &er) < 0) {
        if (er.status != 400 && er.status != 404)
            abort();
        json_decref(swift_oai_error_json(&er));
    } else {
        /* the conversation's text as if generated: tool calls and a response built from it */
        struct swift_oai_choice c = {0};
        for (size_t i = 0; i < rq.conv.n; i++) {
            char *content;
            json_t *calls;
            swift_agent_parse(SWIFT_AGENT_HERMES,
                              rq.conv.msg[i].content,
                              rq.conv.msg[i].len,
                              i,
                              &content,
                              &calls,
                              NULL,
                              0);
            free(content);
            json_decref(calls);
        }
        decode_images(&rq);
        c.finish = SWIFT_FINISH_LENGTH;
        json_decref(kind == SWIFT_OAI_CHAT
                        ? swift_oai_chat_response(&rq, "x", 0, "m", &c, 1, 1, 0)
                        : swift_oai_completion_response(&rq, "x", 0, "m", &c, 1, 1));
        swift_oai_request_release(&rq);
    }
    /* the same bytes as an ms-swift row */
    json_t *row = json_loadb((const char *)data, size, 0, NULL);
    if (row) {
        if (swift_oai_parse_row(row, NULL, &rq, &er) == 0) {
            decode_images(&rq);
            swift_oai_request_release(&rq);
        } else if (er.status != 400 && er.status != 404)
            abort();
        json_decref(row);
    }
    /* the raw bytes as a data: URL */
    unsigned char *d = NULL;
    size_t n = 0;
    char err[256];
    if (swift_infer_data_url((const char *)data, size, &d, &n, err, sizeof(err)) == 0)
        free(d);
    /* the hermes parser on the raw bytes */
    char *content;
    json_t *calls;
    swift_agent_parse(SWIFT_AGENT_HERMES, (const char *)data, size, 1, &content, &calls, NULL, 0);
    free(content);
    json_decref(calls);
    return 0;
}
