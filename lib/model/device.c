#include "lib/model/device.h"

#include <stdio.h>

#include "lib/core/banned.h"

int swift_device_built_with_cuda(void)
{
#ifdef SWIFT_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

int swift_device_query(struct swift_device_info *info, int max, char *why, size_t whylen)
{
#ifdef SWIFT_HAVE_CUDA
    return swift_cuda_query(info, max, why, whylen);
#else
    (void)info;
    (void)max;
    snprintf(why, whylen, "built without CUDA");
    return 0;
#endif
}
