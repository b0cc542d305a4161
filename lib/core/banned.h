/* banned — the poison list lives with the kernels (kernels/banned.h), which include nothing from
 * lib/; lib/ and cmd/ include it through this name. Include last in a .c file. */
#include "kernels/banned.h"
