/* The ceiling for a libcurl client: the multi interface with connection
 * reuse, nothing else. Used by `tools/bench session` as the reference.
 *
 *   curl-bench get <url> <requests> <in-flight>   GETs, N in flight at once
 *   curl-bench download <url>                    one transfer, body discarded
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

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: curl-bench get URL N INFLIGHT | download URL\n"); return 2; }
    curl_global_init(CURL_GLOBAL_ALL);
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
    double elapsed = now() - start;
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
    printf("%f %f %ld %zu\n", elapsed, cpu, usage.ru_maxrss, bytes_total);
    curl_multi_cleanup(multi);
    free(pool);
    return 0;
}
