/* libFuzzer target: a model folder whose model.safetensors is the input
 * (its 8-byte header length, JSON header, tensor table and data) next to a
 * valid micro config.json, loaded with model_load. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/model.h"

static const char CONFIG[] =
    "{\"model_type\": \"qwen2\", \"hidden_size\": 16, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
    " \"num_key_value_heads\": 1, \"intermediate_size\": 32, \"vocab_size\": 32, \"rope_theta\": 10000.0,"
    " \"rms_norm_eps\": 1e-6, \"tie_word_embeddings\": true, \"max_position_embeddings\": 64}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64], path[128];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz_safetensors.%d", (int)getpid());
        mkdir(dir, 0755);
        snprintf(path, sizeof path, "%s/config.json", dir);
        FILE *f = fopen(path, "w");
        fputs(CONFIG, f);
        fclose(f);
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    char err[256];
    model_t *m = model_load(dir, err, sizeof err);
    model_destroy(&m);
    return 0;
}
