/* A Brainfuck interpreter for the bf task family: the ground truth of a bf
 * question is what its program prints. Cells are 8-bit and wrap, the tape has
 * BF_TAPE_CELLS cells and starts at its left end, as in the common
 * interpreters (bfi, which reasoning-gym uses, included). A step limit
 * turns a program that would not halt into an error instead of a hang.
 *
 * Only programs the generator wrote are run here; a model's answer is never
 * executed. */
#ifndef SAPO_TASKS_BF_H
#define SAPO_TASKS_BF_H

#include <stddef.h>
#include <stdint.h>

#define BF_TAPE_CELLS 30000

/* Runs program with no input (',' reads 0, as at end of input). On success
 * returns 0 and *out is a new NUL-terminated buffer holding the output
 * (*outlen bytes, which may include NULs) and *steps, if not NULL, the number
 * of instructions executed; a run of the same instruction (+++, >>>) and the
 * clear loop [-] count as one. On error (unbalanced brackets, the pointer
 * leaving the tape, more than step_limit steps) returns -1 with one line in
 * err naming the program offset, and *out is NULL. */
int bf_run(const char *program, uint64_t step_limit, char **out, size_t *outlen, uint64_t *steps, char *err,
           size_t errlen);

#endif
