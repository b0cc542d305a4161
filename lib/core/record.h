/*
 * record — the one writer of a stdout record: one compact JSON object per line, keys in
 * insertion order, as docs/architecture.md's cmd/lib contract asks (`swift-eval … | jq .accuracy`).
 *
 *     json_t *rec = json_pack("{s:i,s:s}", "version", 1, "format", "gguf");
 *     if (rec)
 *         swift_record_print(stdout, rec, SWIFT_RECORD_DIGITS_SUMMARY);
 *     json_decref(rec);
 *
 * Reals carry `digits` significant digits: SWIFT_RECORD_DIGITS for records whose numbers are
 * compared later (eval metrics, download and preprocess records), SWIFT_RECORD_DIGITS_SUMMARY for
 * export's one summary line, SWIFT_RECORD_DIGITS_EXACT for swift-train's records (logging.jsonl
 * and stdout carry the same line).
 */
#ifndef SWIFT_RECORD_H
#define SWIFT_RECORD_H

#include <jansson.h>
#include <stdio.h>

#define SWIFT_RECORD_DIGITS 10
#define SWIFT_RECORD_DIGITS_SUMMARY 6
#define SWIFT_RECORD_DIGITS_EXACT 17 /* every double read back exactly (logging.jsonl) */

/* Write rec and a newline to fp; fp is not flushed. Returns 0, or -1 on a write error, which is
 * not reported: the caller reports it, or swift_close_stdout() does at the end of main(). */
int swift_record_print(FILE *fp, const json_t *rec, int digits);

/* Write j as a JSON file: json_dumps(j, flags), a final newline, atomically (temp + fsync +
 * rename, lib/core/fileio.h). Returns 0 or -1 after reporting. Every JSON file the programs
 * write (config.json, index.json, manifest.json, ...) goes through here. */
int swift_json_write_file(const char *path, const json_t *j, size_t flags);

#endif
