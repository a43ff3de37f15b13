/* Small file-system helpers shared by the processes. */
#ifndef SAPO_FS_H
#define SAPO_FS_H

/* Removes a folder and everything in it; links are removed, not followed.
 * 0, or -1 (errno set) when something could not be removed. */
int fs_rm_tree(const char *dir);

/* mkdir -p; 0 or -1 with errno */
int fs_mkdirs(const char *dir);

/* a whole file as a NUL-terminated string (malloc'ed), or NULL with errno */
char *fs_read_text(const char *path);

/* The last whole line of a file (one that ends in a newline), without its
 * newline (malloc'ed): a process killed mid-write leaves a partial line
 * after it, which is not read. NULL when the file is missing or has no
 * whole line. */
char *fs_last_line(const char *path);

/* Cuts a partial last line (bytes after the last newline, left by a
 * process killed mid-write) off a file that lines are appended to, so
 * the next line starts whole: the number of bytes cut, 0 when the file
 * ends whole or is missing, -1 with errno when it cannot be cut. */
long fs_cut_partial_line(const char *path);

#endif
