/* libFuzzer target: tokenizer input. Encodes any bytes with the Qwen
 * byte-level BPE (tests/golden/tokenizer/qwen/tokenizer.json, when
 * unpacked) and the byte tokenizer, and decodes the ids back. */
#include <stdint.h>
#include <stdlib.h>

#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tokenizer_t *qwen, *bytes;
    static int loaded;
    if (!loaded) {
        char err[256];
        qwen = tokenizer_load("tests/golden/tokenizer/qwen/tokenizer.json", err, sizeof err);
        bytes = tokenizer_byte_new();
        loaded = 1;
    }
    tokenizer_t *toks[] = {qwen, bytes};
    for (int k = 0; k < 2; k++) {
        if (!toks[k]) continue;
        int32_t *ids = NULL;
        size_t n = 0;
        if (tokenizer_encode(toks[k], (const char *)data, size, &ids, &n) == 0) free(tokenizer_decode(toks[k], ids, n));
        free(ids);
    }
    return 0;
}
