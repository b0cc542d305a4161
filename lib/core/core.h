/*
 * core — the foundation every wing stands on; nothing here knows about models or stages.
 * This header is the wing's manual (docs/architecture.md); include the module you use:
 *
 *   lib/core/cli.h       one typed option table per command: parsing, --help, --version,
 *                        --list-options (completions), ms-swift spellings, YAML/JSON config files
 *   lib/core/error.h     "prog: msg" / "prog:FILE:LINE: msg" on stderr, -1 to the caller;
 *                        exit codes
 *   lib/core/alloc.h     swift_xmalloc & co.: the one out-of-memory policy (message, exit 1)
 *   lib/core/jsonl.h     JSON Lines in with line positions for errors and a line ceiling
 *   lib/core/fileio.h    atomic files and directories (temp + fsync + rename), checked stdout
 *   lib/core/strbuf.h    a growing NUL-terminated string (append, detach)
 *   lib/core/trace.h     trace events (Chrome/Perfetto JSON lines) from every program
 *   lib/core/profile.h   torch.profiler's wait/warmup/active/repeat schedule
 *   lib/core/pool.h      a fixed thread pool with a parallel-for
 *   lib/core/progress.h  a progress line on a terminal, at most twice a second
 *   lib/core/omp.h       OpenMP threads wait passively unless the user chose (one re-exec)
 *   lib/core/sha256.h    SHA-256 through libcrypto
 *   lib/core/banned.h    functions too easy to misuse; include it last in every .c file
 *
 * Arrows: lib/core includes nothing from the other wings; every wing and cmd/ may include it.
 */
#ifndef SWIFT_CORE_H
#define SWIFT_CORE_H
#endif
