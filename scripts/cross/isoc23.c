// Linked only into bookworm builds (scripts/cross/build.sh): Debian sid's static Swift runtime
// was compiled against glibc 2.38, whose headers turn strtol & co. into the C23 variants
// __isoc23_*; bookworm's glibc 2.36 has none of them. The C23 variants differ only in also
// accepting a 0b prefix, which the runtime never feeds them, so the C17 functions stand in.
// libdispatch (agentctl's Foundation) also calls strlcpy, new in glibc 2.38.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t strlcpy(char *dst, const char *src, size_t size) {
    size_t n = strlen(src);
    if (size > 0) {
        size_t k = n < size - 1 ? n : size - 1;
        memcpy(dst, src, k);
        dst[k] = 0;
    }
    return n;
}

long __isoc23_strtol(const char *s, char **end, int base) { return strtol(s, end, base); }
long long __isoc23_strtoll(const char *s, char **end, int base) { return strtoll(s, end, base); }
unsigned long __isoc23_strtoul(const char *s, char **end, int base) { return strtoul(s, end, base); }
unsigned long long __isoc23_strtoull(const char *s, char **end, int base) { return strtoull(s, end, base); }
int __isoc23_sscanf(const char *s, const char *format, ...) {
    va_list args;
    va_start(args, format);
    int n = vsscanf(s, format, args);
    va_end(args);
    return n;
}
