// Records where a process's heap allocations come from, for
// `tools/profile-get --allocation-sites`: loaded with LD_PRELOAD, it wraps
// glibc's allocator entry points, takes each allocation's call stack with
// backtrace() (libgcc's unwinder reads the unwind tables, so C code built
// without frame pointers unwinds too), and when the process exits writes
// the stacks and /proc/self/maps to the file named by MALLOC_SITES_FILE.
// tools/profiling/allocation-sites.py names the frames. Exact, unlike a
// sampling profiler, and independent of the machine's other work.
#define _GNU_SOURCE
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

enum { depth = 24, capacity = 1 << 26 };  // words: 512 MiB of address space, touched as used

static uintptr_t *records;           // per allocation: frame count, then the frames
static atomic_size_t used;
static atomic_int ready;
static __thread int inside;

static void record(void) {
    if (inside || !atomic_load_explicit(&ready, memory_order_acquire)) return;
    inside = 1;  // backtrace() may allocate on its first call (it loads libgcc_s)
    void *frames[depth + 1];
    int count = backtrace(frames, depth + 1);
    if (count > 1) {
        size_t words = (size_t)count;  // the count and the frames above this one
        size_t at = atomic_fetch_add_explicit(&used, words, memory_order_relaxed);
        if (at + words <= capacity) {
            records[at] = (uintptr_t)(count - 1);
            for (int i = 1; i < count; i++) records[at + (size_t)i] = (uintptr_t)frames[i];
        }
    }
    inside = 0;
}

__attribute__((constructor)) static void start(void) {
    if (getenv("MALLOC_SITES_FILE") == NULL) return;
    void *area = mmap(NULL, capacity * sizeof(uintptr_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (area == MAP_FAILED) return;
    records = area;
    void *warm[2];
    inside = 1;
    backtrace(warm, 2);
    inside = 0;
    atomic_store_explicit(&ready, 1, memory_order_release);
}

void *malloc(size_t size) { record(); return __libc_malloc(size); }
void *calloc(size_t count, size_t size) { record(); return __libc_calloc(count, size); }
void *realloc(void *pointer, size_t size) { record(); return __libc_realloc(pointer, size); }
void *aligned_alloc(size_t alignment, size_t size) { record(); return __libc_memalign(alignment, size); }
void *memalign(size_t alignment, size_t size) { record(); return __libc_memalign(alignment, size); }
int posix_memalign(void **result, size_t alignment, size_t size) {
    record();
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL) return 12; /* ENOMEM */
    *result = pointer;
    return 0;
}

static void write_all(int fd, const void *bytes, size_t count) {
    const char *at = bytes;
    while (count > 0) {
        ssize_t n = write(fd, at, count);
        if (n <= 0) return;
        at += n;
        count -= (size_t)n;
    }
}

// File: "maps" length (8 bytes), /proc/self/maps, then the records as words.
__attribute__((destructor)) static void report(void) {
    const char *path = getenv("MALLOC_SITES_FILE");
    if (path == NULL || records == NULL) return;
    atomic_store_explicit(&ready, 0, memory_order_release);
    char maps[1 << 20];
    size_t length = 0;
    int in = open("/proc/self/maps", O_RDONLY);
    if (in >= 0) {
        ssize_t n;
        while (length < sizeof maps && (n = read(in, maps + length, sizeof maps - length)) > 0) length += (size_t)n;
        close(in);
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    uint64_t header = length;
    write_all(fd, &header, sizeof header);
    write_all(fd, maps, length);
    size_t words = atomic_load(&used);
    if (words > capacity) words = capacity;
    write_all(fd, records, words * sizeof(uintptr_t));
    close(fd);
}
