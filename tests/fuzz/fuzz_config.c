/* Fuzz the YAML/JSON config expansion of lib/cli: errors carry a position, nothing crashes. */
#include "lib/core/cli.h"
#include "lib/core/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const struct swift_option opts[] = {SWIFT_OPT_IGNORE(0, "max-length", "N", "n"),
                                           SWIFT_OPT_IGNORE(0, "packing", NULL, "p"),
                                           SWIFT_OPT_IGNORE(0, "dataset", "F", "d"),
                                           SWIFT_OPT_IGNORE(0, "trace", "PATH", "t"),
                                           SWIFT_OPT_IGNORE(0, "profile", "SPEC", "p"),
                                           SWIFT_OPT_END};
static const struct swift_command cmd = {
    .name = "fuzz", .usage = "", .summary = "fuzz", .options = opts};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull)
        devnull = fopen("/dev/null", "w");
    swift_error_set_stream(devnull);
    for (int json = 0; json < 2; json++) {
        char path[] = "/tmp/swift-fuzz-config-XXXXXX.yaml";
        char pathj[] = "/tmp/swift-fuzz-config-XXXXXX.json";
        char *p = json ? pathj : path;
        int fd = mkstemps(p, 5);
        if (fd < 0)
            return 0;
        if (write(fd, data, size) != (ssize_t)size) {
            close(fd);
            unlink(p);
            return 0;
        }
        close(fd);
        char **words = NULL;
        int n = 0;
        swift_cli_config_expand(&cmd, p, &words, &n);
        for (int i = 0; i < n; i++)
            free(words[i]);
        free(words);
        unlink(p);
    }
    return 0;
}
