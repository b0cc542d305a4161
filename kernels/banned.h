/*
 * banned — functions that are too easy to misuse (git's banned.h). Include last in a .c file:
 * kernels/ includes it as "kernels/banned.h", lib/ and cmd/ as "lib/core/banned.h" (which
 * includes this one). strcpy/strcat/sprintf overflow, strtok keeps hidden state, atoi/atof turn
 * "abc" into 0. Use snprintf, strtol/strtoull/strtod with an end-pointer check (swift_parse_*
 * in lib/core/cli.h).
 */
#ifndef SWIFT_BANNED_H
#define SWIFT_BANNED_H

#define SWIFT_BANNED(func) sorry_##func##_is_a_banned_function

#undef strcpy
#define strcpy(x, y) SWIFT_BANNED(strcpy)
#undef strcat
#define strcat(x, y) SWIFT_BANNED(strcat)
#undef sprintf
#define sprintf(...) SWIFT_BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) SWIFT_BANNED(vsprintf)
#undef strtok
#define strtok(x, y) SWIFT_BANNED(strtok)
#undef atoi
#define atoi(x) SWIFT_BANNED(atoi)
#undef atof
#define atof(x) SWIFT_BANNED(atof)
#undef atol
#define atol(x) SWIFT_BANNED(atol)

#endif
