/* libFuzzer target: the input as a GGUF file, opened and read as a policy
 * is (gguf_open, the tokenizer from its metadata, the model from its
 * tensors). Seeded with a micro Llama (fuzz/seeds/fuzz_gguf, written by
 * tests/oracle/gguf_seed.py). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/fuzz_gguf.%d.gguf", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    char err[256];
    gguf_t *g = gguf_open(path, err, sizeof err);
    if (!g) return 0;
    tokenizer_t *t = tokenizer_from_gguf(g, err, sizeof err);
    tokenizer_destroy(&t);
    model_t *m = model_load_gguf_from(g, err, sizeof err);
    model_destroy(&m);
    gguf_destroy(&g);
    return 0;
}
