/* verifier: scores completions with the tasks' rule-based checkers.
 * For now only the command-line modes (score, generate); see cli.h. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "score") == 0) return verifier_cli_score(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "generate") == 0) return verifier_cli_generate(argc - 1, argv + 1);
    fprintf(stderr, "usage: verifier score [FILE] | verifier generate --family NAME --seed S --count N "
                    "[--config JSON] [--start I]\n");
    return 2;
}
