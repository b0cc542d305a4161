/*
 * reward — the rewards GRPO (lib/train/grpo.c) scores its completions with: a set of
 * reward functions, each with a weight, that turns a batch of rows (prompt, completion, the
 * dataset row's extra columns) into one weighted total per row and the per-function scores for
 * logging (rewards/NAME/mean|std).
 *
 *     struct swift_reward_config cfg = SWIFT_REWARD_CONFIG_INIT;
 *     cfg.max_completion_length = 512;               // for `length`
 *     struct swift_reward_set *rs = swift_reward_set_new(&cfg);
 *     if (!rs || swift_reward_add(rs, "accuracy", 1.0) < 0 ||
 *         swift_reward_add_cmd(rs, "python3 judge.py", 0.5) < 0)   // started now, once
 *         ...error reported, -1...
 *     struct swift_reward_row rows[n] = {{.prompt = p, .completion = c, .completion_tokens = k,
 *                                         .extra = row_json, .where = "train.jsonl:17"}, ...};
 *     double total[n], per[n * swift_reward_count(rs)];
 *     if (swift_reward_score(rs, rows, n, total, per) < 0)   // a program failed: reported
 *         ...;
 *     swift_reward_set_free(rs);                     // stops the programs (no zombies)
 *
 * Built-in functions (the names ms-swift's --reward_funcs uses):
 *   accuracy  1 if the completion's answer equals the reference's, else 0. The reference is the
 *             row's `answer` column (cfg.answer_column; `solution`, ms-swift/TRL's name, is tried
 *             next): the text after GSM8K's last "#### ", else the last \boxed{...}, else the
 *             last number, else the whole text. The completion's answer: the last \boxed{...},
 *             else its last number. Both compared as numbers when both parse ("1,000" = "1000" =
 *             "1000.0" = "$1000", "3/4" = "\frac{3}{4}" = "0.75"; equal within 1e-6, six decimals
 * as math_verify's float_rounding, or 1e-9 relative), else as strings without whitespace and '$'.
 * TRL's accuracy_reward and ms-swift's MathAccuracy use math_verify (symbolic LaTeX equivalence);
 * this is the numeric subset GSM8K-style data needs. A row without the column is an error (TRL
 * scores an unparseable reference None, skipped, ms-swift 0; here a missing or empty one is
 *             reported as an error naming the row).
 *   format    1 if the completion matches cfg.format_pattern (PCRE2, DOTALL|MULTILINE, as
 *             Python's re.match with re.DOTALL | re.MULTILINE: anchored at the start), else 0.
 *             Default: ms-swift's Format reward pattern SWIFT_REWARD_FORMAT_DEFAULT.
 *   length    the soft overlong penalty of DAPO (TRL's get_soft_overlong_punishment in
 *             trl/rewards/other_rewards.py, ms-swift's soft_overlong, class SoftOverlong in
 *             swift/plugin/orm.py): with L = cfg.max_completion_length, C = cfg.cache_length and
 *             n = row.completion_tokens: 0 if n <= L - C, (L - C - n) / C if L - C < n <= L, -1
 *             beyond L (swift_reward_soft_overlong). ms-swift computes min((L - C - n) / C, 0),
 *             the same up to L but not floored at -1 beyond it (generation stops at L).
 *
 * External programs (swift_reward_add_cmd, --reward-cmd 'PROGRAM ARGS'): started once with
 * /bin/sh -c COMMAND in its own process group, stdin and stdout on pipes, stderr inherited. Per
 * batch every row is written as one compact JSON object per line, {"prompt": ..., "completion":
 * ..., plus the row's extra columns}, and one reply line per row is read back: a finite number
 * (strtod, surrounding blanks allowed). Writes and reads interleave (poll), so a program may
 * answer line by line or after reading the whole batch. Errors are reported naming the program
 * and the row (its index in the batch and row.where) and are never scored 0: the program exits
 * or is killed (its status), writes a line that is not a number, or writes nothing for
 * cfg.timeout_s seconds. After an error the program is stopped and every later score fails.
 * swift_reward_set_free closes its stdin, then SIGTERM, then SIGKILL after a grace period, and
 * reaps it. SIGPIPE is blocked in the calling thread while writing.
 *
 * Not thread-safe: one set is used by one thread at a time.
 */
#ifndef SWIFT_REWARD_H
#define SWIFT_REWARD_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

/* ms-swift's Format reward (swift/plugin/orm.py, class Format). */
#define SWIFT_REWARD_FORMAT_DEFAULT "^<think>.*?</think>\\s*<answer>.*?</answer>(?![\\s\\S])"

/* The most functions one set holds, and the longest answer the extraction keeps. */
#define SWIFT_REWARD_MAX 16
#define SWIFT_REWARD_ANSWER_MAX 256

struct swift_reward_config {
    const char *answer_column;  /* accuracy's reference column; NULL: "answer" (then "solution") */
    const char *format_pattern; /* format's regex; NULL: SWIFT_REWARD_FORMAT_DEFAULT */
    long max_completion_length; /* length: L (--max-completion-length) */
    long cache_length;          /* length: C (ms-swift --soft_cache_length), 0 < C <= L */
    double timeout_s;           /* programs: longest wait for the next reply line (> 0) */
};
#define SWIFT_REWARD_CONFIG_INIT                                                                   \
    {                                                                                              \
        .answer_column = NULL, .format_pattern = NULL, .max_completion_length = 512,               \
        .cache_length = 128, .timeout_s = 60                                                       \
    }

/* One completion to score; every pointer borrowed for the call. */
struct swift_reward_row {
    const char *prompt;     /* the prompt as text (programs get it as "prompt") */
    const char *completion; /* the generated text */
    long completion_tokens; /* its length in tokens (length needs it: < 0 is an error there) */
    json_t *extra;          /* the row's extra columns (an object, e.g. {"answer": ...}) or NULL */
    const char *where;      /* where the row came from for messages ("data.jsonl:17") or NULL */
};

struct swift_reward_set;

/* A new empty set with a copy of cfg (strings copied); NULL after reporting (bad config,
 * a format pattern that does not compile: reported with its offset). */
struct swift_reward_set *swift_reward_set_new(const struct swift_reward_config *cfg);
/* Add built-in NAME (accuracy, format, length) with weight w; -1 after reporting an unknown name
 * or a full set. */
int swift_reward_add(struct swift_reward_set *rs, const char *name, double w);
/* Start COMMAND (/bin/sh -c) as a reward program with weight w; its name for logging is
 * "cmd" then "cmd2", ... in order of addition. -1 after reporting. */
int swift_reward_add_cmd(struct swift_reward_set *rs, const char *command, double w);
/* Replace the weights from a list "1,0.5,2" (--reward-weights): one finite number per function
 * in order of addition; -1 after reporting a bad number or a count that differs. */
int swift_reward_set_weights(struct swift_reward_set *rs, const char *list);
int swift_reward_count(const struct swift_reward_set *rs);
/* Function i's name ("accuracy", "format", "length", "cmd", "cmd2", ...) and weight. */
const char *swift_reward_name(const struct swift_reward_set *rs, int i);
double swift_reward_weight(const struct swift_reward_set *rs, int i);
/* Score n rows: total[r] = sum over i of w_i per[i * n + r]; per may be NULL. Each function's
 * time is a trace span "reward.NAME" (args function, program). 0, or -1 after reporting the row
 * and the function that failed (total and per then undefined). */
int swift_reward_score(struct swift_reward_set *rs, const struct swift_reward_row *rows, size_t n,
                       double *total, double *per);
/* Stop the programs (stdin closed, SIGTERM, SIGKILL after a grace period; all reaped) and free.
 * NULL is allowed. */
void swift_reward_set_free(struct swift_reward_set *rs);
/* The process id of function i when it is a running program, else 0 (tests check the reaping). */
pid_t swift_reward_pid(const struct swift_reward_set *rs, int i);

/* --- the pieces, for tests and fuzzing --- */

/* The answer of a text into out (cap bytes, NUL-terminated): reference != 0 takes GSM8K's
 * "#### " first, then the last \boxed{...} (nested braces), then the last number (reference:
 * else the whole trimmed text). 1 if found, 0 if not (out ""). Answers longer than cap-1 are cut.
 */
int swift_reward_extract_answer(const char *text, int reference, char *out, size_t cap);
/* The value of an answer: an optional '$', '-', digits with thousands commas, a fraction part,
 * a '%' or trailing '.', "a/b", "\frac{a}{b}" (\dfrac, \tfrac), blanks around. 1 and *v, or 0. */
int swift_reward_parse_number(const char *s, double *v);
/* accuracy for one completion and one reference text: 1 or 0. */
double swift_reward_accuracy(const char *completion, const char *reference);
/* length: see above; L, C as in the config (C <= 0 acts as a hard cut at L). */
double swift_reward_soft_overlong(long n, long max_len, long cache_len);
/* One reply line of a program (without its newline): 1 and *v for a finite number with only
 * blanks around it, else 0. */
int swift_reward_parse_reply(const char *line, size_t len, double *v);

#endif
