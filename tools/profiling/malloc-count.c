// Counts a process's heap allocations, for `tools/profile-get --allocations`:
// loaded with LD_PRELOAD, it wraps glibc's allocator entry points
// and, when the process exits, writes the counts to the file named by
// MALLOC_COUNT_FILE (nothing when unset). Counts do not depend on the
// machine's other work, unlike times on this project's virtual machine.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void __libc_free(void *pointer);

static atomic_long mallocs, callocs, reallocs, aligned, frees;

void *malloc(size_t size) {
    atomic_fetch_add_explicit(&mallocs, 1, memory_order_relaxed);
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    atomic_fetch_add_explicit(&callocs, 1, memory_order_relaxed);
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    atomic_fetch_add_explicit(&reallocs, 1, memory_order_relaxed);
    return __libc_realloc(pointer, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    atomic_fetch_add_explicit(&aligned, 1, memory_order_relaxed);
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL) return 12; /* ENOMEM */
    *result = pointer;
    return 0;
}

void *aligned_alloc(size_t alignment, size_t size) {
    atomic_fetch_add_explicit(&aligned, 1, memory_order_relaxed);
    return __libc_memalign(alignment, size);
}

void *memalign(size_t alignment, size_t size) {
    atomic_fetch_add_explicit(&aligned, 1, memory_order_relaxed);
    return __libc_memalign(alignment, size);
}

void free(void *pointer) {
    if (pointer != NULL) atomic_fetch_add_explicit(&frees, 1, memory_order_relaxed);
    __libc_free(pointer);
}

__attribute__((destructor)) static void report(void) {
    const char *path = getenv("MALLOC_COUNT_FILE");
    if (path == NULL) return;
    char line[160];
    int length = snprintf(line, sizeof line, "%ld %ld %ld %ld %ld\n", (long)mallocs, (long)callocs, (long)reallocs,
                          (long)aligned, (long)frees);
    int file = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (file < 0 || length <= 0) return;
    (void)write(file, line, (size_t)length);
    close(file);
}
