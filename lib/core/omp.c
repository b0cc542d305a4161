/*
 * core/omp — passive OpenMP waiting by default, through one re-exec. See lib/core/omp.h.
 *
 * The re-exec happens in the executable's .preinit_array, which glibc runs after the libraries
 * are mapped and relocated (a few ms) but before any library constructor: the CUDA libraries'
 * static initialisers (~120 ms here), OpenBLAS's thread pool and libgomp's environment are then
 * paid once, not twice. The environment is read from the envp handed to that function (environ
 * is not set up yet) and the new one is passed to execve. swift_omp_defaults() in main() is the
 * same step for a program the hook did not run in (it then costs a whole start-up).
 */
#include "lib/core/omp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/banned.h"

#define MARK "SWIFT_OMP_DEFAULT"

static int has_var(char **envp, const char *name)
{
    size_t l = strlen(name);
    for (char **e = envp; e && *e; e++)
        if (!strncmp(*e, name, l) && (*e)[l] == '=')
            return 1;
    return 0;
}

/* execve the program again with OMP_WAIT_POLICY=passive and the mark added to envp, unless the
 * user set OMP_WAIT_POLICY or GOMP_SPINCOUNT or the mark is there (the re-exec happened).
 * Returns only when nothing was done or exec failed. */
static void reexec(char **argv, char **envp)
{
    if (!argv || !argv[0] || has_var(envp, "OMP_WAIT_POLICY") || has_var(envp, "GOMP_SPINCOUNT") ||
        has_var(envp, MARK))
        return;
    size_t n = 0;
    while (envp && envp[n])
        n++;
    char **env = malloc((n + 3) * sizeof(*env));
    if (!env)
        return;
    if (n)
        memcpy(env, envp, n * sizeof(*env));
    env[n] = "OMP_WAIT_POLICY=passive";
    env[n + 1] = MARK "=1";
    env[n + 2] = NULL;
    fflush(NULL);
    execve("/proc/self/exe", argv, env);
    free(env); /* no /proc, or exec refused: libgomp's default, and the trace says so */
}

static void preinit(int argc, char **argv, char **envp)
{
    (void)argc;
    reexec(argv, envp);
}

/* Runs before every library constructor (ELF DT_PREINIT_ARRAY, executables only). */
__attribute__((section(".preinit_array"),
               used)) static void (*const omp_preinit)(int, char **, char **) = preinit;

void swift_omp_defaults(char **argv)
{
    extern char **environ;
    reexec(argv, environ);
}

const char *swift_omp_wait_policy(void)
{
    static char buf[64];
    const char *w = getenv("OMP_WAIT_POLICY"), *s = getenv("GOMP_SPINCOUNT");
    if (s) {
        snprintf(buf, sizeof(buf), "GOMP_SPINCOUNT=%.40s", s);
        return buf;
    }
    if (w && getenv(MARK) && !strcmp(w, "passive"))
        return "passive (default)";
    if (w) {
        snprintf(buf, sizeof(buf), "%.40s", w);
        return buf;
    }
    return "spin, then sleep";
}
