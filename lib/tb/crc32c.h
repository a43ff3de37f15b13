/* CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected), the checksum of
 * TFRecord framing, and the mask TFRecord puts on it. Written here: Debian
 * 12 packages no C library of it (only Python's python3-crc32c). A table
 * of 256 entries, a byte at a time: a round's event record is a few KB. */
#ifndef SAPO_TB_CRC32C_H
#define SAPO_TB_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* the CRC-32C of n bytes ("123456789" gives 0xE3069283) */
uint32_t crc32c(const void *data, size_t n);

/* TFRecord's masked form: the CRC rotated right by 15 bits plus
 * 0xA282EAD8, so that a CRC over bytes holding CRCs stays strong */
uint32_t crc32c_masked(const void *data, size_t n);

#endif
