# Sourced by the batch-mode swift-infer tests (infer.bats, infer-gguf.bats): the fixtures of
# tests/ref/gen_infer_fixtures.py ($FIX/infer/NAME.jsonl: transformers' greedy ids) as input and
# as expected answers, and our answers reduced to the same shape, so the two compare with `=`.

# The fixture's requests as Batch API input lines.
requests() {
    jq -c '{custom_id, method: "POST", url, body}' "$FIX/infer/$1.jsonl"
}

# What each answer says: custom_id, generated ids (from the logprobs tokens), finish, usage.
answers() {
    jq -c '{custom_id, ids: (.response.body.choices[0] | (if .logprobs.content then
             [.logprobs.content[].token] else .logprobs.tokens end) |
             map(ltrimstr("token_id:") | tonumber)),
           finish_reason: .response.body.choices[0].finish_reason,
           p: .response.body.usage.prompt_tokens, c: .response.body.usage.completion_tokens}' "$1"
}

# The same for transformers' answers in the fixture.
expected() {
    jq -c '{custom_id, ids, finish_reason, p: (.prompt_ids | length), c: (.ids | length)}' \
        "$FIX/infer/$1.jsonl"
}
