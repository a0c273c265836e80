/* The ceiling for a libcurl client: the multi interface with connection
 * reuse, nothing else. Used by `tools/bench session` as the reference.
 *
 *   curl-bench get <url> <requests> <in-flight>   GETs, N in flight at once
 *   curl-bench download <url>                    one transfer, body discarded
 *   curl-bench download-file <url> <path>        one transfer, body written to <path>
 *   curl-bench upload <url> <path>               one PUT of the file at <path>
 *
 * Prints: <elapsed seconds> <cpu seconds> <peak rss KiB> <bytes>
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static size_t bytes_total;

static size_t discard(char *data, size_t size, size_t count, void *user) {
    (void)data; (void)user;
    bytes_total += size * count;
    return size * count;
}

static size_t to_file(char *data, size_t size, size_t count, void *user) {
    size_t written = fwrite(data, size, count, (FILE *)user);
    bytes_total += written * size;
    return written * size;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static CURL *make(const char *url) {
    CURL *easy = curl_easy_init();
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    return easy;
}

/* Peak RSS in KiB from VmHWM: getrusage's ru_maxrss survives execve, so a
 * child spawned by a larger parent would report the parent's peak. */
static long peak_rss_kib(void) {
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (status && fgets(line, sizeof line, status)) {
        if (strncmp(line, "VmHWM:", 6) == 0) { kib = atol(line + 6); break; }
    }
    if (status) fclose(status);
    return kib;
}

static void report(double start) {
    double elapsed = now() - start;
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
    printf("%f %f %ld %zu\n", elapsed, cpu, peak_rss_kib(), bytes_total);
}

/* One transfer to or from a file, on the multi interface like the rest. */
static int file_transfer(const char *mode, const char *url, const char *path) {
    int upload = strcmp(mode, "upload") == 0;
    FILE *file = fopen(path, upload ? "rb" : "wb");
    if (!file) { perror(path); return 1; }
    CURL *easy = make(url);
    if (upload) {
        fseek(file, 0, SEEK_END);
        long size = ftell(file);
        fseek(file, 0, SEEK_SET);
        curl_easy_setopt(easy, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(easy, CURLOPT_READDATA, file);
        curl_easy_setopt(easy, CURLOPT_INFILESIZE_LARGE, (curl_off_t)size);
        bytes_total = (size_t)size;
    } else {
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, to_file);
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, file);
    }
    CURLM *multi = curl_multi_init();
    double start = now();
    curl_multi_add_handle(multi, easy);
    int running = 1;
    while (running) {
        curl_multi_perform(multi, &running);
        if (running) curl_multi_poll(multi, NULL, 0, 1000, NULL);
    }
    int left;
    CURLMsg *message = curl_multi_info_read(multi, &left);
    if (message && message->data.result != CURLE_OK) {
        fprintf(stderr, "curl-bench: %s\n", curl_easy_strerror(message->data.result));
        return 1;
    }
    fclose(file);
    report(start);
    curl_multi_remove_handle(multi, easy);
    curl_easy_cleanup(easy);
    curl_multi_cleanup(multi);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: curl-bench get URL N INFLIGHT | download URL | download-file URL PATH | upload URL PATH\n"); return 2; }
    curl_global_init(CURL_GLOBAL_ALL);
    if (argc == 4 && (strcmp(argv[1], "download-file") == 0 || strcmp(argv[1], "upload") == 0)) {
        return file_transfer(argv[1], argv[2], argv[3]);
    }
    int total = argc > 3 ? atoi(argv[3]) : 1;
    int inflight = argc > 4 ? atoi(argv[4]) : 1;
    CURLM *multi = curl_multi_init();
    double start = now();
    int started = 0, finished = 0, running = 0;
    CURL **pool = calloc(inflight, sizeof(CURL *));
    for (int i = 0; i < inflight && started < total; i++, started++) {
        pool[i] = make(argv[2]);
        curl_multi_add_handle(multi, pool[i]);
    }
    while (finished < total) {
        curl_multi_perform(multi, &running);
        CURLMsg *message;
        int left;
        while ((message = curl_multi_info_read(multi, &left))) {
            if (message->msg != CURLMSG_DONE) continue;
            if (message->data.result != CURLE_OK) {
                fprintf(stderr, "curl-bench: %s\n", curl_easy_strerror(message->data.result));
                return 1;
            }
            CURL *easy = message->easy_handle;
            curl_multi_remove_handle(multi, easy);
            finished++;
            if (started < total) {
                /* Reuse the handle: libcurl keeps its connection. */
                curl_multi_add_handle(multi, easy);
                started++;
            } else {
                curl_easy_cleanup(easy);
            }
        }
        if (finished < total) curl_multi_poll(multi, NULL, 0, 1000, NULL);
    }
    report(start);
    curl_multi_cleanup(multi);
    free(pool);
    return 0;
}
