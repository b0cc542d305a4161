/* link_check — the kernels stand alone. The Makefile links this program against every object of
 * libswift-kernels.a (--whole-archive) and the system libraries only (KERNEL_LDLIBS), on every
 * build: a kernels/ object that refers to a lib/ symbol leaves it undefined and the build fails.
 * Run, it adds two vectors through the CPU table and says which devices it sees. */
#include "kernels/ops.h"

#include <stdio.h>

#include "kernels/device.h"

int main(void)
{
    float a[4] = {1, 2, 3, 4}, b[4] = {4, 3, 2, 1}, out[4];
    swift_cpu_ops.add(out, a, b, 4);
    struct swift_device_info info[1];
    char why[256] = "";
    int n = swift_device_query(info, 1, why, sizeof(why));
    printf("%s: %g %g %g %g; %d CUDA device%s%s%s\n",
           swift_cpu_ops.name,
           out[0],
           out[1],
           out[2],
           out[3],
           n < 0 ? 0 : n,
           n == 1 ? "" : "s",
           n ? "" : ": ",
           n ? "" : why);
    return out[0] == 5 && out[3] == 5 ? 0 : 1;
}
