/* A runner for an exported library on another CPU (under qemu-user): engine/deploy/qemu.py
 * cross-compiles it once and runs it under the emulator.
 *
 *   runner LIB --metadata SYMBOL
 *       prints the JSON text the library's `const char *SYMBOL(void)` returns;
 *   runner LIB SYMBOL REPEAT i:FILE ... o:FILE ...
 *       reads each argument's bytes from FILE (an output's file has its size), calls
 *       `int SYMBOL(void *, ...)` with the buffers in order, writes the outputs ("o:")
 *       back to their files; with REPEAT > 0 it then calls it REPEAT more times and
 *       prints "seconds_per_call <s>" (the emulated time of one call).
 *
 * Exit status: 0 done; 2 a usage or file error; 3 the library or symbol not found;
 * 4 the function returned non-zero (printed).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ARGS 16

typedef void *P;

static int call(void *fn, int n, P *a) {
    switch (n) {
    case 1: return ((int (*)(P))fn)(a[0]);
    case 2: return ((int (*)(P, P))fn)(a[0], a[1]);
    case 3: return ((int (*)(P, P, P))fn)(a[0], a[1], a[2]);
    case 4: return ((int (*)(P, P, P, P))fn)(a[0], a[1], a[2], a[3]);
    case 5: return ((int (*)(P, P, P, P, P))fn)(a[0], a[1], a[2], a[3], a[4]);
    case 6: return ((int (*)(P, P, P, P, P, P))fn)(a[0], a[1], a[2], a[3], a[4], a[5]);
    case 7: return ((int (*)(P, P, P, P, P, P, P))fn)(a[0], a[1], a[2], a[3], a[4], a[5],
                                                       a[6]);
    case 8: return ((int (*)(P, P, P, P, P, P, P, P))fn)(a[0], a[1], a[2], a[3], a[4], a[5],
                                                          a[6], a[7]);
    case 9: return ((int (*)(P, P, P, P, P, P, P, P, P))fn)(a[0], a[1], a[2], a[3], a[4],
                                                             a[5], a[6], a[7], a[8]);
    case 10: return ((int (*)(P, P, P, P, P, P, P, P, P, P))fn)(a[0], a[1], a[2], a[3], a[4],
                                                                 a[5], a[6], a[7], a[8], a[9]);
    case 11: return ((int (*)(P, P, P, P, P, P, P, P, P, P, P))fn)(
        a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10]);
    case 12: return ((int (*)(P, P, P, P, P, P, P, P, P, P, P, P))fn)(
        a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11]);
    case 13: return ((int (*)(P, P, P, P, P, P, P, P, P, P, P, P, P))fn)(
        a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12]);
    case 14: return ((int (*)(P, P, P, P, P, P, P, P, P, P, P, P, P, P))fn)(
        a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12],
        a[13]);
    case 15: return ((int (*)(P, P, P, P, P, P, P, P, P, P, P, P, P, P, P))fn)(
        a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12],
        a[13], a[14]);
    case 16: return ((int (*)(P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P))fn)(
        a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12],
        a[13], a[14], a[15]);
    }
    return -100;
}

static void *read_file(const char *path, long *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    /* 64-byte aligned, as the engine's own buffers; at least one line */
    size_t alloc = ((size_t)(*size) + 63) / 64 * 64 + 64;
    void *buf = aligned_alloc(64, alloc);
    if (buf && *size > 0 && fread(buf, 1, (size_t)*size, f) != (size_t)*size) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: runner LIB --metadata SYMBOL | LIB SYMBOL REPEAT i:FILE o:FILE...\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
        return 3;
    }
    if (strcmp(argv[2], "--metadata") == 0) {
        const char *(*meta)(void) = (const char *(*)(void))dlsym(lib, argv[3]);
        if (!meta) {
            fprintf(stderr, "no symbol %s in %s\n", argv[3], argv[1]);
            return 3;
        }
        fputs(meta(), stdout);
        return 0;
    }
    void *fn = dlsym(lib, argv[2]);
    if (!fn) {
        fprintf(stderr, "no symbol %s in %s\n", argv[2], argv[1]);
        return 3;
    }
    long repeat = strtol(argv[3], NULL, 10);
    int n = argc - 4;
    if (n < 1 || n > MAX_ARGS) {
        fprintf(stderr, "between 1 and %d arguments, got %d\n", MAX_ARGS, n);
        return 2;
    }
    P args[MAX_ARGS];
    long sizes[MAX_ARGS];
    for (int i = 0; i < n; i++) {
        const char *spec = argv[4 + i];
        if ((spec[0] != 'i' && spec[0] != 'o') || spec[1] != ':') {
            fprintf(stderr, "argument %d is not i:FILE or o:FILE\n", i);
            return 2;
        }
        args[i] = read_file(spec + 2, &sizes[i]);
        if (!args[i]) {
            fprintf(stderr, "cannot read %s\n", spec + 2);
            return 2;
        }
    }
    int rc = call(fn, n, args);
    if (rc != 0) {
        printf("returned %d\n", rc);
        return 4;
    }
    for (int i = 0; i < n; i++) {
        if (argv[4 + i][0] != 'o') continue;
        FILE *f = fopen(argv[4 + i] + 2, "wb");
        if (!f || fwrite(args[i], 1, (size_t)sizes[i], f) != (size_t)sizes[i]) {
            fprintf(stderr, "cannot write %s\n", argv[4 + i] + 2);
            return 2;
        }
        fclose(f);
    }
    if (repeat > 0) {
        double t0 = now();
        for (long r = 0; r < repeat; r++) call(fn, n, args);
        printf("seconds_per_call %.9g\n", (now() - t0) / (double)repeat);
    }
    return 0;
}
