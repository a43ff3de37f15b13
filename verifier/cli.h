/* The verifier's command-line modes, used without the rest of a node:
 *   verifier score [FILE]     JSON lines in, the same lines with "score" out
 *   verifier generate --family NAME --seed S --count N [--config JSON] [--start I]
 * argv[0] is the mode name. Exit status: 0 fine, 1 some line failed,
 * 2 bad usage. */
#ifndef SAPO_VERIFIER_CLI_H
#define SAPO_VERIFIER_CLI_H

int verifier_cli_score(int argc, char **argv);
int verifier_cli_generate(int argc, char **argv);

#endif
