/* export/ollama — NAME.Modelfile next to NAME.gguf (`ollama create NAME -f NAME.Modelfile`; one
 * directory may hold several exports), as ms-swift's export to ollama writes it: FROM the GGUF,
 * TEMPLATE in ollama's Go-template syntax for the chat template's family (ChatML for Qwen, Llama 3
 * headers), and PARAMETER stop for the end-of-turn tokens. */
#include "lib/core/alloc.h"
#include "lib/core/error.h"
#include "lib/export/internal.h"
#include "lib/core/fileio.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/banned.h"

static const char chatml[] = "{{ if .System }}<|im_start|>system\n"
                             "{{ .System }}<|im_end|>\n"
                             "{{ end }}{{ if .Prompt }}<|im_start|>user\n"
                             "{{ .Prompt }}<|im_end|>\n"
                             "{{ end }}<|im_start|>assistant\n"
                             "{{ .Response }}<|im_end|>\n";
static const char llama3[] =
    "{{ if .System }}<|start_header_id|>system<|end_header_id|>\n\n"
    "{{ .System }}<|eot_id|>{{ end }}{{ if .Prompt }}<|start_header_id|>user<|end_header_id|>\n\n"
    "{{ .Prompt }}<|eot_id|>{{ end }}<|start_header_id|>assistant<|end_header_id|>\n\n"
    "{{ .Response }}<|eot_id|>";

/* NAME of DIR/NAME.gguf (the whole base name when it does not end in .gguf), malloc'ed. */
static char *model_name(const char *gguf_path)
{
    const char *b = strrchr(gguf_path, '/');
    char *name = swift_xstrdup(b ? b + 1 : gguf_path);
    size_t n = strlen(name);
    if (n > 5 && !strcmp(name + n - 5, ".gguf"))
        name[n - 5] = 0;
    return name;
}

char *swift_modelfile_path(const char *gguf_path)
{
    char *d = swift_xstrdup(gguf_path);
    char *name = model_name(gguf_path);
    char file[4096];
    snprintf(file, sizeof(file), "%s.Modelfile", name);
    char *p = swift_path_join(dirname(d), file);
    free(name);
    free(d);
    return p;
}

int swift_export_modelfile(const char *gguf_path, const char *model_dir, int force)
{
    char *mpath = swift_modelfile_path(gguf_path);
    char *cpath = swift_path_join(model_dir, "tokenizer_config.json");
    json_t *tcfg = NULL;
    int rc = -1;
    struct stat st;
    if (!force && stat(mpath, &st) == 0) {
        swift_error("'%s' exists; use --force to overwrite it", mpath);
        goto out;
    }
    if (access(cpath, R_OK) == 0 && !(tcfg = swift_json_load(cpath)))
        goto out;
    const char *ct = json_string_value(json_object_get(tcfg, "chat_template"));
    const char *eos = json_string_value(json_object_get(tcfg, "eos_token"));
    if (!eos)
        eos = json_string_value(json_object_get(json_object_get(tcfg, "eos_token"), "content"));
    struct swift_atomic af;
    if (swift_atomic_open(&af, mpath) < 0)
        goto out;
    char *g = swift_xstrdup(gguf_path);
    fprintf(af.fp, "FROM ./%s\n", basename(g));
    free(g);
    const char *stops[4] = {0};
    int ns = 0;
    if (ct && strstr(ct, "<|im_start|>")) {
        fprintf(af.fp, "TEMPLATE \"\"\"%s\"\"\"\n", chatml);
        stops[ns++] = "<|im_end|>";
        stops[ns++] = "<|endoftext|>";
    } else if (ct && strstr(ct, "<|start_header_id|>")) {
        fprintf(af.fp, "TEMPLATE \"\"\"%s\"\"\"\n", llama3);
        stops[ns++] = "<|start_header_id|>";
        stops[ns++] = "<|end_header_id|>";
        stops[ns++] = "<|eot_id|>";
    } else {
        swift_warn("%s: no ChatML or Llama 3 chat template; Modelfile without TEMPLATE (ollama "
                   "then uses the GGUF's tokenizer.chat_template)",
                   cpath);
    }
    int have_eos = 0;
    for (int i = 0; i < ns; i++)
        have_eos |= eos && !strcmp(eos, stops[i]);
    if (eos && !have_eos)
        stops[ns++] = eos;
    for (int i = 0; i < ns; i++)
        fprintf(af.fp, "PARAMETER stop \"%s\"\n", stops[i]);
    rc = swift_atomic_commit(&af);
    if (rc == 0) {
        char *name = model_name(gguf_path);
        swift_info("wrote %s; load it with: ollama create %s -f %s", mpath, name, mpath);
        free(name);
    }
out:
    json_decref(tcfg);
    free(mpath);
    free(cpath);
    return rc;
}
