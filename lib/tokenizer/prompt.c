/* Prompt text for a question, in the format a model was trained on. */
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *prompt_format(prompt_format_t fmt, const char *system, const char *user)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f) return NULL;
    user = user ? user : "";
    if (fmt == PROMPT_CHATML) {
        if (system) fprintf(f, "<|im_start|>system\n%s<|im_end|>\n", system);
        fprintf(f, "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", user);
    } else {
        if (system) fprintf(f, "%s\n\n", system);
        fprintf(f, "Question: %s\nAnswer:", user);
    }
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

int prompt_format_from_name(const char *name)
{
    if (strcmp(name, "plain") == 0) return PROMPT_PLAIN;
    if (strcmp(name, "chatml") == 0) return PROMPT_CHATML;
    return -1;
}
