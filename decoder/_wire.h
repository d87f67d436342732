/*
 * decoder/_wire.h: the Kafka wire readers every offsetwatch C accelerator shares
 * (decoder/_speedups.c, exporter/state/_ingest_speedups.c).
 *
 * One copy, so that a fix (a bound check, an overflow) reaches every module at once. Each
 * reader is given bytes its caller has already checked are there, or checks them itself and
 * says so; none raises: what a reader cannot take is left to the module's Python path, the
 * reference, which names the error. setup.py builds every module that includes this header
 * with it in the module's SOURCE_SHA256 (decoder/codec.py `built_from`), so a module built
 * before a change here is not used.
 */

#ifndef OFFSETWATCH_WIRE_H
#define OFFSETWATCH_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* Big-endian fixed-width integers at p (the caller checked the bytes are there). */
static inline int16_t
be16(const unsigned char *p)
{
    return (int16_t)(uint16_t)(((uint16_t)p[0] << 8) | p[1]);
}

static inline int32_t
be32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
}

static inline int64_t
be64(const unsigned char *p)
{
    return (int64_t)(((uint64_t)(uint32_t)be32(p) << 32) | (uint64_t)(uint32_t)be32(p + 4));
}

/* An unsigned varint at *p (below end), as flexible versions encode lengths, tag counts,
 * tags and tag sizes: 1 with its value (and *p past it), 0 when it is not one this reader
 * takes: it runs past `end`, is longer than 5 bytes, or its value does not fit in 32 bits.
 * Python's reader (decoder.codegen.read_uvarint) also accepts 5-byte varints up to 35 bits,
 * so such a value must not be cut to 32 bits here: a length of 2**32 + 1 would read as 1,
 * a record the Python path calls truncated. */
static inline int
read_uvarint32(const unsigned char **p, const unsigned char *end, uint32_t *out)
{
    uint32_t v = 0;
    const unsigned char *q = *p;
    for (int shift = 0; shift <= 28; shift += 7) {
        if (q >= end) {
            return 0;
        }
        unsigned char c = *q++;
        if (shift == 28 && (c & 0x70)) {
            return 0; /* bits past the 32nd */
        }
        v |= (uint32_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *p = q;
            *out = v;
            return 1;
        }
    }
    return 0;
}

/* Whether the n bytes at p are strict UTF-8 as Python's "strict" decoder takes it: no
 * overlong forms, no encoded surrogates (U+D800-U+DFFF), nothing above U+10FFFF, no
 * truncated sequence. A caller that writes such bytes out as text (JSON) leaves what fails
 * here to its module's Python path, which keeps the bytes its own way. */
static inline int
is_strict_utf8(const unsigned char *p, size_t n)
{
    const unsigned char *end = p + n;
    while (p < end) {
        unsigned char c = *p;
        if (c < 0x80) {
            p++;
            continue;
        }
        size_t need;
        unsigned char lo = 0x80, hi = 0xbf; /* the range of the second byte */
        if (c >= 0xc2 && c <= 0xdf) {
            need = 1;
        }
        else if (c >= 0xe0 && c <= 0xef) {
            need = 2;
            if (c == 0xe0) {
                lo = 0xa0; /* overlong */
            }
            else if (c == 0xed) {
                hi = 0x9f; /* surrogates */
            }
        }
        else if (c >= 0xf0 && c <= 0xf4) {
            need = 3;
            if (c == 0xf0) {
                lo = 0x90; /* overlong */
            }
            else if (c == 0xf4) {
                hi = 0x8f; /* above U+10FFFF */
            }
        }
        else {
            return 0;
        }
        if ((size_t)(end - p) <= need || p[1] < lo || p[1] > hi) {
            return 0;
        }
        for (size_t k = 2; k <= need; k++) {
            if ((p[k] & 0xc0) != 0x80) {
                return 0;
            }
        }
        p += need + 1;
    }
    return 1;
}

#endif /* OFFSETWATCH_WIRE_H */
