/*
 * replay — a driver for the fuzz targets when libFuzzer is not used. Each target defines
 * LLVMFuzzerTestOneInput(); this main() replays seed files (and directories of them) and then,
 * with -runs=N, feeds N mutated copies (bit flips, truncations, byte insertions, splices) from a
 * fixed seed, so `make test` exercises every parser on bad input deterministically and quickly.
 * Built with clang -fsanitize=fuzzer the same target file becomes a real libFuzzer binary.
 */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seed {
    uint8_t *data;
    size_t size;
};
static struct seed *seeds;
static size_t nseeds, capseeds;

static void add_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "replay: cannot open '%s'\n", path);
        exit(1);
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, fp)) > 0) {
        n += r;
        if (n == cap && n < (64u << 20))
            buf = realloc(buf, cap *= 2);
        else if (n == cap)
            break;
    }
    fclose(fp);
    if (!buf)
        abort();
    if (nseeds == capseeds) {
        capseeds = capseeds ? 2 * capseeds : 16;
        seeds = realloc(seeds, capseeds * sizeof(*seeds));
        if (!seeds)
            abort();
    }
    seeds[nseeds++] = (struct seed){buf, n};
}

static void add_path(const char *path)
{
    struct stat st;
    if (stat(path, &st)) {
        fprintf(stderr, "replay: cannot stat '%s'\n", path);
        exit(1);
    }
    if (!S_ISDIR(st.st_mode)) {
        add_file(path);
        return;
    }
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char sub[4096];
        snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
        add_path(sub);
    }
    if (d)
        closedir(d);
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(int argc, char **argv)
{
    long runs = 0;
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "-runs=", 6))
            runs = strtol(argv[i] + 6, NULL, 10);
        else if (argv[i][0] != '-')
            add_path(argv[i]);
    }
    for (size_t i = 0; i < nseeds; i++)
        LLVMFuzzerTestOneInput(seeds[i].data, seeds[i].size);
    LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
    uint8_t *buf = NULL;
    for (long r = 0; r < runs && nseeds; r++) {
        struct seed *s = &seeds[next() % nseeds];
        size_t n = s->size;
        buf = realloc(buf, n + 64);
        if (!buf)
            abort();
        memcpy(buf, s->data, n);
        int muts = 1 + (int)(next() % 4);
        for (int m = 0; m < muts; m++) {
            switch (next() % 5) {
            case 0:
                if (n)
                    buf[next() % n] ^= (uint8_t)(1u << (next() % 8));
                break;
            case 1:
                if (n)
                    n = next() % n;
                break;
            case 2:
                if (n)
                    buf[next() % n] = (uint8_t)next();
                break;
            case 3:
                if (n < s->size + 60) {
                    size_t at = n ? next() % n : 0;
                    memmove(buf + at + 1, buf + at, n - at);
                    buf[at] = "{}[]\",:0\\\n"[next() % 10];
                    n++;
                }
                break;
            case 4:
                if (n > 2) {
                    size_t a = next() % n, b = next() % n, l = next() % 16;
                    if (a + l <= n && b + l <= n)
                        memmove(buf + a, buf + b, l);
                }
                break;
            }
        }
        LLVMFuzzerTestOneInput(buf, n);
    }
    free(buf);
    printf("replay: %zu seeds, %ld mutated runs, no crash\n", nseeds, runs);
    return 0;
}
