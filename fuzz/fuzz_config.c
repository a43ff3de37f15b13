/* libFuzzer target: a Hugging Face config.json as given by a user or a
 * downloaded folder, read with model_config_load. */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/fuzz_config.%d.json", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    model_config_t cfg;
    char err[256];
    model_config_load(&cfg, path, err, sizeof err);
    return 0;
}
