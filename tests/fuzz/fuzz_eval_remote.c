/* Fuzz swift-eval --eval-url's answer parser (lib/eval/remote.h): any body with any status gives
 * an answer or an error message, never a crash. */
#include "lib/eval/remote.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const long statuses[] = {200, 200, 400, 401, 404, 503};
    for (int chat = 0; chat < 2; chat++) {
        long status = statuses[(size + (size_t)chat) % 6];
        struct swift_eval_answer a;
        char err[256];
        int rc =
            swift_eval_remote_parse((const char *)data, size, status, chat, &a, err, sizeof(err));
        if (rc == 0 && (!a.text || status != 200))
            abort();
        if (rc < 0 && (a.text || !memchr(err, 0, sizeof(err)) || !err[0]))
            abort();
        swift_eval_answer_release(&a);
    }
    return 0;
}
