/* libFuzzer target: task metadata JSON and the scorers. The input is a
 * completion, a NUL byte, then a question as JSON ({question, answer,
 * metadata}); what the verifier does with an external group's task. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    size_t cut = strlen(text);
    const char *json = cut < size ? text + cut + 1 : "{}";
    cJSON *obj = cJSON_ParseWithLength(json, size - (cut < size ? cut + 1 : size));
    task_question_t e = {0};
    char err[256];
    if (obj && task_question_from_json(obj, &e, err, sizeof err) == 0) {
        char *answer = task_extract_answer(text);
        task_score_answer(answer, &e, err, sizeof err);
        task_score_answer(text, &e, err, sizeof err);
        bool formatted;
        task_score_completion(text, &e, &formatted, err, sizeof err);
        free(answer);
        task_question_free(&e);
    }
    cJSON_Delete(obj);
    free(text);
    return 0;
}
