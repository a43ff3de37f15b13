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

#endif
