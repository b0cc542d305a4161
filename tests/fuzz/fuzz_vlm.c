/* Fuzz the vision-language model's config.json parser (lib/model/vlm.h: text_config and
 * vision_config, or the flat layout with rope_scaling mrope) and its M-RoPE position builder
 * (pads against grids from the same bytes): errors, never a crash. */
#include "lib/model/vlm.h"
#include "lib/core/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static void rope_index(const uint8_t *data, size_t size)
{
    struct swift_vlm_config vc;
    memset(&vc, 0, sizeof(vc));
    vc.merge_size = 2;
    vc.image_token_id = 1;
    if (size < 8)
        return;
    int nimages = data[0] % 4, T = (int)(size > 64 ? 64 : size), B = 1 + data[1] % 2;
    int32_t grid[12], tok[128], pos3[3 * 128];
    for (int i = 0; i < nimages; i++) {
        grid[3 * i] = 1;
        grid[3 * i + 1] = 2 * (1 + data[2 + i] % 3);
        grid[3 * i + 2] = 2 * (1 + data[5 + i % 3] % 3);
    }
    for (int n = 0; n < B * T; n++)
        tok[n] = data[n % size] % 3 == 0 ? 1 : 2;
    swift_vlm_rope_index(&vc, tok, B, T, grid, nimages, pos3);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull)
        devnull = fopen("/dev/null", "w");
    swift_error_set_stream(devnull);
    json_t *root = json_loadb((const char *)data, size, 0, NULL);
    if (root) {
        struct swift_vlm_config vc;
        struct swift_model_config tc;
        swift_vlm_config_parse(&vc, &tc, root, "config.json");
        json_decref(root);
    }
    rope_index(data, size);
    return 0;
}
