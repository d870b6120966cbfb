/* What the applications under apps/ share: option values, the block decomposition and the
 * hash that tells two runs' results apart bit for bit. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* A whole decimal number from `least` to 2^30 into *out; 0 for anything else. */
static inline int app_number(const char *s, long least, int *out) {
    char *end;
    long v = s && *s ? strtol(s, &end, 10) : -1;
    if (v < least || *end || v > (1L << 30)) return 0;
    *out = (int)v;
    return 1;
}

/* Block distribution: part `index` of `n` cells cut in `parts`, the first n % parts one larger. */
static inline void app_split(int n, int parts, int index, int *count, int *start) {
    *count = n / parts + (index < n % parts);
    *start = index * (n / parts) + (index < n % parts ? index : n % parts);
}

/* FNV-1a over the floats' bytes: two runs print the same value exactly when their results
 * are bit for bit the same. */
static inline uint64_t app_fnv1a(const float *v, size_t n) {
    const unsigned char *b = (const unsigned char *)v;
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}
