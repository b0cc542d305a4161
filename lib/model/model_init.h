/*
 * model_init — make a new model directory with random weights from a config.json, so a project
 * (the demo, a test, a from-scratch run) starts from a model made by our own tools.
 *
 *     swift_model_init_dir("configs/tiny", "models/tiny", 42);   // configs/tiny/config.json
 *
 * Weights: N(0, 0.02) for matrices, 1 for norms, 0 for biases (transformers' defaults with
 * initializer_range 0.02), from a seeded generator, so the same seed gives the same bytes.
 * Tokenizer files next to config.json (tokenizer.json, tokenizer_config.json, vocab.json,
 * merges.txt, generation_config.json) are copied. The directory appears atomically.
 */
#ifndef SWIFT_MODEL_INIT_H
#define SWIFT_MODEL_INIT_H

/* Returns 0 or -1 after reporting. An existing empty out_dir is replaced; one holding files is
 * refused unless force, and with force unless it holds nothing but a model's files (config.json,
 * *.safetensors, the tokenizer files above, README.md): nothing else is ever removed. */
int swift_model_init_dir(const char *config_dir, const char *out_dir, unsigned long long seed,
                         int force);

/* Copy the files that travel with weights (tokenizer.json, tokenizer_config.json,
 * special_tokens_map.json, vocab.json, merges.txt, tokenizer.model, added_tokens.json,
 * chat_template.jinja, generation_config.json) from src_dir to dst_dir, those that exist.
 * Used by --init-model and swift-export. Returns 0 or -1 after reporting. */
int swift_model_copy_side_files(const char *src_dir, const char *dst_dir);

#endif
