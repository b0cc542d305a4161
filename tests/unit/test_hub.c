/* hub: listing parsers, path and id checks, URLs, cache layouts; extract: archive names. */
#include "lib/core/error.h"
#include "lib/download/extract.h"
#include "lib/download/hub.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static char msg[4096];
static FILE *capture(void)
{
    memset(msg, 0, sizeof(msg));
    FILE *fp = fmemopen(msg, sizeof(msg), "w");
    swift_error_set_stream(fp);
    return fp;
}
static void release(FILE *fp)
{
    fclose(fp);
    swift_error_set_stream(NULL);
}

static void test_paths(void **state)
{
    (void)state;
    assert_true(swift_hub_path_ok("config.json"));
    assert_true(swift_hub_path_ok("a/b/c.safetensors"));
    assert_true(swift_hub_path_ok("..hidden/x"));
    assert_false(swift_hub_path_ok(""));
    assert_false(swift_hub_path_ok("/etc/passwd"));
    assert_false(swift_hub_path_ok("../x"));
    assert_false(swift_hub_path_ok("a/../../x"));
    assert_false(swift_hub_path_ok("a/./b"));
    assert_false(swift_hub_path_ok("a//b"));
    assert_false(swift_hub_path_ok("a/"));
    assert_false(swift_hub_path_ok("a\\..\\b"));
    assert_false(swift_hub_path_ok("a\nb"));
    assert_true(swift_hub_repo_id_ok("Qwen/Qwen2.5-0.5B-Instruct"));
    assert_true(swift_hub_repo_id_ok("gpt2"));
    assert_false(swift_hub_repo_id_ok("a/b/c"));
    assert_false(swift_hub_repo_id_ok("../b"));
    assert_false(swift_hub_repo_id_ok("a b/c"));
    assert_false(swift_hub_repo_id_ok("a/"));
}

static void test_parse_hf(void **state)
{
    (void)state;
    const char *j =
        "{\"sha\":\"abc\",\"siblings\":[{\"rfilename\":\"config.json\",\"size\":8,\"blobId\":"
        "\"0187f3b09d66cef7911083ad49f890f5a6589589\"},{\"rfilename\":\"m.safetensors\",\"size\":"
        "134,\"lfs\":{\"sha256\":\"80D0DE5DF85D15ABC72A2711B0F52020D90F3F03BC51D2E456CA0D8F4E828C04"
        "\",\"size\":300000,\"pointerSize\":134}}]}";
    struct swift_hub_listing ls;
    assert_int_equal(swift_hub_parse_listing(SWIFT_HUB_HF, j, strlen(j), "u", &ls), 0);
    assert_string_equal(ls.commit, "abc");
    assert_int_equal(ls.n, 2);
    assert_string_equal(ls.files[0].path, "config.json");
    assert_int_equal(ls.files[0].size, 8);
    assert_string_equal(ls.files[0].sha256, "");
    assert_string_equal(ls.files[0].blob_id, "0187f3b09d66cef7911083ad49f890f5a6589589");
    assert_int_equal(ls.files[1].size, 300000); /* the LFS size, not the pointer's */
    assert_string_equal(ls.files[1].sha256,
                        "80d0de5df85d15abc72a2711b0f52020d90f3f03bc51d2e456ca0d8f4e828c04");
    assert_true(ls.files[1].lfs);
    swift_hub_listing_release(&ls);

    const char *tree = "[{\"type\":\"directory\",\"path\":\"d\"},{\"type\":\"file\",\"path\":"
                       "\"d/x\",\"size\":3,\"oid\":\"zz\"}]";
    assert_int_equal(swift_hub_parse_listing(SWIFT_HUB_HF, tree, strlen(tree), "u", &ls), 0);
    assert_int_equal(ls.n, 1);
    assert_string_equal(ls.files[0].path, "d/x");
    assert_null(ls.files[0].blob_id); /* not a sha1 */
    swift_hub_listing_release(&ls);
}

static void test_parse_modelscope(void **state)
{
    (void)state;
    const char *j =
        "{\"Code\":200,\"Success\":true,\"Data\":{\"Files\":[{\"Path\":\"sub\",\"Type\":"
        "\"tree\"},{\"Path\":\"sub/a.json\",\"Type\":\"blob\",\"Size\":5,\"Sha256\":"
        "\"e346432021b04179518d9614f3560ccd71354a4ee101ddcb893d6959a9d6301c\","
        "\"Revision\":\"r1\"}]}}";
    struct swift_hub_listing ls;
    assert_int_equal(swift_hub_parse_listing(SWIFT_HUB_MODELSCOPE, j, strlen(j), "u", &ls), 0);
    assert_int_equal(ls.n, 1);
    assert_string_equal(ls.commit, "r1");
    assert_int_equal(ls.files[0].size, 5);
    assert_string_equal(ls.files[0].sha256,
                        "e346432021b04179518d9614f3560ccd71354a4ee101ddcb893d6959a9d6301c");
    swift_hub_listing_release(&ls);
}

static void test_parse_errors(void **state)
{
    (void)state;
    struct swift_hub_listing ls;
    FILE *fp = capture();
    const char *bad = "{\"siblings\":[{\"rfilename\":\"../../etc/passwd\"}]}";
    assert_int_equal(swift_hub_parse_listing(SWIFT_HUB_HF, bad, strlen(bad), "URL", &ls), -1);
    const char *dup = "{\"siblings\":[{\"rfilename\":\"a\"},{\"rfilename\":\"a\"}]}";
    assert_int_equal(swift_hub_parse_listing(SWIFT_HUB_HF, dup, strlen(dup), "URL", &ls), -1);
    const char *ms = "{\"Code\":10010205001,\"Success\":false,\"Message\":\"model not found\"}";
    assert_int_equal(swift_hub_parse_listing(SWIFT_HUB_MODELSCOPE, ms, strlen(ms), "URL", &ls), -1);
    assert_int_equal(swift_hub_parse_listing(SWIFT_HUB_HF, "{\n[", 3, "URL", &ls), -1);
    fflush(fp);
    assert_non_null(strstr(msg, "URL: unsafe file path '../../etc/passwd' in the listing\n"));
    assert_non_null(strstr(msg, "URL: file 'a' listed twice\n"));
    assert_non_null(strstr(msg, "URL: the hub refused the request: model not found\n"));
    assert_non_null(strstr(msg, ":URL:2: column"));
    release(fp);
    assert_null(ls.files);
}

static void test_urls(void **state)
{
    (void)state;
    char *u = swift_hub_listing_url(SWIFT_HUB_HF, "http://h", 0, "o/m", "refs/pr/1");
    assert_string_equal(u, "http://h/api/models/o/m/revision/refs%2Fpr%2F1?blobs=true");
    free(u);
    u = swift_hub_file_url(SWIFT_HUB_HF, "http://h", 1, "o/d", "main", "a b/c.json");
    assert_string_equal(u, "http://h/datasets/o/d/resolve/main/a%20b/c.json");
    free(u);
    u = swift_hub_listing_url(SWIFT_HUB_MODELSCOPE, "http://h", 0, "o/m", "master");
    assert_string_equal(u, "http://h/api/v1/models/o/m/repo/files?Revision=master&Recursive=true");
    free(u);
    u = swift_hub_file_url(SWIFT_HUB_MODELSCOPE, "http://h", 1, "o/d", "v1", "sub/x.json");
    assert_string_equal(u, "http://h/api/v1/datasets/o/d/repo?Revision=v1&FilePath=sub%2Fx.json");
    free(u);
}

static void test_env(void **state)
{
    (void)state;
    setenv("HF_ENDPOINT", "https://mirror.example/", 1);
    char *e = swift_hub_endpoint(SWIFT_HUB_HF, NULL);
    assert_string_equal(e, "https://mirror.example");
    free(e);
    e = swift_hub_endpoint(SWIFT_HUB_HF, "http://given");
    assert_string_equal(e, "http://given");
    free(e);
    setenv("MODELSCOPE_DOMAIN", "ms.example", 1);
    e = swift_hub_endpoint(SWIFT_HUB_MODELSCOPE, NULL);
    assert_string_equal(e, "https://ms.example");
    free(e);
    setenv("HF_HOME", "/h", 1);
    unsetenv("HF_HUB_CACHE");
    e = swift_hub_cache_repo_dir(SWIFT_HUB_HF, 0, "Qwen/Qwen2.5-0.5B");
    assert_string_equal(e, "/h/hub/models--Qwen--Qwen2.5-0.5B");
    free(e);
    setenv("MODELSCOPE_CACHE", "/m", 1);
    e = swift_hub_cache_repo_dir(SWIFT_HUB_MODELSCOPE, 1, "a.b/Qwen2.5-0.5B");
    assert_string_equal(e, "/m/datasets/a.b/Qwen2___5-0___5B");
    free(e);
    setenv("HF_TOKEN", "t", 1);
    assert_string_equal(swift_hub_token(SWIFT_HUB_HF, NULL), "t");
    assert_string_equal(swift_hub_token(SWIFT_HUB_HF, "g"), "g");
    unsetenv("MODELSCOPE_API_TOKEN");
    assert_null(swift_hub_token(SWIFT_HUB_MODELSCOPE, NULL));
}

static void test_archive_names(void **state)
{
    (void)state;
    assert_true(swift_is_archive_name("http://x/a.tar.gz?download=1"));
    assert_true(swift_is_archive_name("m.ZIP"));
    assert_true(swift_is_archive_name("m.tar.zst"));
    assert_false(swift_is_archive_name("model.safetensors"));
    assert_false(swift_is_archive_name("zip"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_parse_hf),
        cmocka_unit_test(test_parse_modelscope),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_urls),
        cmocka_unit_test(test_env),
        cmocka_unit_test(test_archive_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
